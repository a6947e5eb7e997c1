-- The penalty box (docs/bans.md), the Lua twin of src/limiter/ban.cpp and of the memory
-- store's findBans/recordBans (src/store/memory/memory_store.cpp): the same numbers give the
-- same bans, to the microsecond.
--
-- A bucket's ban state lives beside it, at its key .. ';ban' (the same hash tag, so the same
-- slot of a cluster; not among the script's KEYS and read alone with a one-key MGET, as the
-- holds are: 80_holds.lua), as the text
--   "strikes strikes_since step until last_denial last_length"   (times in us)
-- with a PX of the time until it is a fresh state again, so Redis drops it by itself.
--
-- A limit with a ban sends its quota group slot as "<group>@<k>": ARGV[k .. k + 5] are
-- after, duration (us), backoff (x1000), max (us), forgive_after (us) and the window the
-- denials are counted in (us). The sidecar sends them only when the ban applies to the
-- request (an ordinary request or a reserve; never a report, a refund, a commit or a
-- release).
local kBanSuffix = ';ban'

-- A quota group slot: the group, and the ARGV index of the limit's ban values (nil: none).
local function group_and_ban(text)
  local g = number(text)
  if g then
    return g, nil
  end
  local group, at = string.match(text, '^(%-?%d+)@(%d+)$')
  return tonumber(group), tonumber(at)
end

-- The ban state stored beside `key`, or nil (none, or not one).
local function ban_read(key)
  local text = redis.call('MGET', key .. kBanSuffix)[1]
  if type(text) ~= 'string' then
    return nil
  end
  local s, ss, st, u, ld, ll =
      string.match(text, '^(%d+) (%-?%d+) (%d+) (%-?%d+) (%-?%d+) (%d+)$')
  if not s then
    return nil
  end
  return { tonumber(s), tonumber(ss), tonumber(st), tonumber(u), tonumber(ld), tonumber(ll) }
end

-- The length of ban `step` after one of `previous` us (sluice::banLength): previous x backoff
-- / 1000 rounded down, in two parts so that no product passes 2^53, never shorter, at most max.
local function ban_length(ARGV, at, step, previous)
  local duration, backoff, longest = number(ARGV[at + 1]), number(ARGV[at + 2]),
      number(ARGV[at + 3])
  if step <= 1 or previous <= 0 then
    return min(duration, longest)
  end
  local q = floor_div(previous, 1000)
  local grown = q * backoff + floor_div((previous - q * 1000) * backoff, 1000)
  return min(max(grown, previous), longest)
end

-- Records a denial at `now` of a client not banned (sluice::recordDenial) and stores the
-- new state. Returns whether it starts a ban, the ban's end and its step.
local function ban_strike(key, ARGV, at, t, now)
  local after, forgive, within = number(ARGV[at]), number(ARGV[at + 4]), number(ARGV[at + 5])
  local strikes, since, step, untl, last, length = 0, 0, 0, 0, 0, 0
  if t then
    strikes, since, step, untl, last, length = t[1], t[2], t[3], t[4], t[5], t[6]
  end
  if step > 0 and now - max(untl, last) >= forgive then
    step, length = 0, 0
  end
  if strikes == 0 or now >= since + within then
    strikes, since = 0, now
  end
  strikes = strikes + 1
  last = now
  local started = false
  if strikes >= after then
    step = step + 1
    length = ban_length(ARGV, at, step, length)
    untl = now + length
    strikes, since = 0, now
    started = true
  end
  -- Kept until it is a fresh state again (sluice::banTtl).
  local finish = untl
  if strikes > 0 then
    finish = max(finish, since + within)
  end
  if step > 0 then
    finish = max(finish, max(untl, last) + forgive)
  end
  local ms = floor((finish - now + 999) / 1000) + sluice_ttl_slack_ms
  redis.call('SET', key .. kBanSuffix,
             string.format('%d %d %d %d %d %d', strikes, since, step, untl, last, length),
             'PX', ms_string(ms))
  return started, untl, step
end

-- The bans of a request's limits: nil when no limit has one; else { at = {i: ARGV index},
-- untl = {i: end of the ban the client is in at `now`}, state = {i: the state read} }. One
-- read per limit with a ban.
local function read_bans(KEYS, ARGV, n, now, stride)
  local bans
  for i = 1, n do
    local _, at = group_and_ban(ARGV[2 + (i - 1) * stride + 8])
    if at then
      bans = bans or { at = {}, untl = {}, state = {} }
      bans.at[i] = at
      local t = ban_read(KEYS[i])
      bans.state[i] = t
      if t and now < t[4] then
        bans.untl[i] = t[4]
      end
    end
  end
  return bans
end

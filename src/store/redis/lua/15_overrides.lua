-- Runtime overrides (docs/overrides.md), read by the request script in the same atomic step
-- that decides: every sidecar of this Redis applies a change on its next decision.
--
-- Where they are: one hash per hash tag, "<prefix>:{<client>|<domain>}#o" (the tag of the
-- buckets it applies to, so it shares their cluster slot), whose fields are
--   "b:<bucket>"  one bucket's own override (the bucket: domain and the rest of its key)
--   "r:<rule>"    the rule's override for every bucket of that client
-- and whose values are the text include/sluice/store/limit_override.hpp describes (its
-- first line holds the numbers read here). A bucket's own override wins over its rule's.
-- The admin side also keeps every override in one index hash ("<prefix>:overrides", field
-- "<tag>\31<field>") for listing and the bound on their number.
--
-- A limit that may be overridden carries flag 32 x (the ARGV index of its "r:<rule>" field).
local kOverrideFlag = 32
local kOverrideStride = 9

-- The override hash of a bucket's key, and the bucket's own field; nil for a key without tag.
local function override_place(key)
  local open = string.find(key, '{', 1, true)
  local close = open and string.find(key, '}', open + 1, true)
  if not close then
    return nil
  end
  local tag = string.sub(key, open + 1, close - 1)
  local bar = string.find(tag, '|', 1, true)
  local domain = bar and string.sub(tag, bar + 1) or tag
  return string.sub(key, 1, close) .. '#o', 'b:' .. domain .. string.sub(key, close + 1)
end

-- A stored override's numbers, or nil when it is not one or has expired at `now`:
-- limit, window, burst, min_interval, count_rejected, warmup.
local function read_override(text, now)
  if type(text) ~= 'string' then
    return nil
  end
  local _, l, w, b, mi, cr, wu, exp = string.match(text,
      '^sluice%-override 1 (%d+) (%d+) (%d+) (%d+) (%d+) ([01]) (%d+) (%d+) ')
  if not l then
    return nil
  end
  exp = tonumber(exp)
  if exp ~= 0 and exp <= now then
    return nil
  end
  return tonumber(l), tonumber(w), tonumber(b), tonumber(mi), tonumber(cr), tonumber(wu)
end

-- Set for a batch none of whose override hashes exists (99_read_ahead.lua).
local overrides_absent = false

-- Applies the live overrides of a request's limits: returns the arguments to decide with (a
-- copy when one applies: a batch shares argument lists between requests) and the list
-- { limit index, override text, ... } of those applied, or nil. One HMGET per request that
-- has a limit which may be overridden, unless its batch has no override at all.
local function apply_overrides(KEYS, ARGV, n, now)
  if overrides_absent then
    return ARGV, nil
  end
  local hash, fields, owners
  for i = 1, n do
    local flags = number(ARGV[2 + (i - 1) * kOverrideStride + 5])
    if flags >= kOverrideFlag then
      local h, bucket_field = override_place(KEYS[i])
      if h then
        hash = hash or h
        fields = fields or {}
        owners = owners or {}
        fields[#fields + 1] = bucket_field
        owners[#owners + 1] = i
        fields[#fields + 1] = ARGV[floor(flags / kOverrideFlag)]
        owners[#owners + 1] = i
      end
    end
  end
  if not fields then
    return ARGV, nil
  end
  local values = redis.call('HMGET', hash, unpack(fields))
  local args, applied, done
  for j = 1, #fields do
    local i = owners[j]
    if not (done and done[i]) then
      local l, w, b, mi, cr, wu = read_override(values[j], now)
      if l then
        done = done or {}
        done[i] = true
        if not args then
          args = {}
          for x = 1, #ARGV do
            args[x] = ARGV[x]
          end
        end
        local base = 2 + (i - 1) * kOverrideStride
        local flags = number(args[base + 5])
        local low = flags % kOverrideFlag
        args[base + 1] = l
        args[base + 2] = w
        args[base + 3] = b
        args[base + 4] = mi
        args[base + 5] = flags - low + (low - low % 2) + cr
        args[base + 6] = wu
        applied = applied or {}
        applied[#applied + 1] = i
        applied[#applied + 1] = values[j]
      end
    end
  end
  return args or ARGV, applied
end

-- The admin side's calls: ARGV = { 'override', action, ... }, KEYS[1] the hash it works on.
--   set-index <field> <text> <max>  the index: set or replace; 1 replaced, 0 new; an error
--                                   when a new one would pass max
--   set <field> <text>              a tag's hash: set or replace
--   del <field>                     a tag's hash or the index: 1 removed, 0 none
--   list                            the index: HGETALL
local function override_admin(KEYS, ARGV)
  local action = ARGV[2]
  if action == 'set-index' then
    if redis.call('HEXISTS', KEYS[1], ARGV[3]) == 1 then
      redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
      return 1
    end
    local count = redis.call('HLEN', KEYS[1])
    if count >= tonumber(ARGV[5]) then
      return redis.error_reply('ERR too many overrides: ' .. count ..
                               ' are set, the most --max-overrides allows (remove one first)')
    end
    redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
    return 0
  elseif action == 'set' then
    redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
    return 1
  elseif action == 'del' then
    return redis.call('HDEL', KEYS[1], ARGV[3])
  elseif action == 'list' then
    return redis.call('HGETALL', KEYS[1])
  end
  return redis.error_reply('ERR override: unknown action ' .. tostring(action))
end

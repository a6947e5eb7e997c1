#include "store/eventual/eventual_script.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>

#include "store/redis/lua_scripts.hpp"
#include "store/redis/redis_errors.hpp"

namespace sluice::eventual {
namespace {

constexpr std::string_view kPrelude = R"lua(
-- The sketch hash seed, shared with the strict sketch (redis_sketch.hpp): KEYS[1] the seed
-- key, ARGV = { 'sketch-seed', candidate }. The first candidate set wins; returns the seed.
if ARGV[1] == 'sketch-seed' then
  redis.call('SET', KEYS[1], ARGV[2], 'NX')
  return redis.call('GET', KEYS[1])
end
-- Eventual limits are windowed on the sidecars' clocks: the time is the caller's.
local sluice_now = tonumber(ARGV[1])
local sluice_ttl_slack_ms = 0
)lua";

// One call syncs and/or decides many keys. Layout:
//   ARGV[1] now (us since the epoch, the caller's clock)
//   ARGV[2] the entry this caller writes: "s<sidecar id>" (a sidecar's own hits in its own
//           region's Redis) or "r<region>" (a region's total, replicated into another
//           region's Redis)
//   per entry i, ARGV[3 + 12*(i-1) ...]:
//     op (0 sync: raise the entry, read; 1 decide: sync, then evaluate cost and charge;
//     2 one cell of a sketch, docs/eventual.md "sketch": the d cells of one client are d
//     consecutive entries with algorithm 2, burst = the cell's row (0..d-1), acked = d; each
//     is synced like a sliding_window_counter hash, and at the last one the client is decided
//     on C = min over the cells of the current window's sums, P = the same for the previous
//     window, and charged conservatively: each own entry becomes max(own, min own + cost)),
//     algorithm (0 fixed_window, 2 sliding_window_counter, 3 token_bucket), L, W (us),
//     burst, value (the entry's cumulative hits in the window of KEYS[2i-1]), prev_value
//     (in the window before, 0 = nothing to send), acked (token_bucket: the entry's value
//     the caller last saw stored), cost (op 1), flags (1 = count_rejected, 2 = shadow,
//     4 x (quota group + 1): the quota-mode group of the limit, 0 for none),
//     tat_us, tat_rem (token_bucket: the arrival time the caller last read; max-merged;
//     fixed_window and sliding_window_counter, op 1: with other regions, the count of this
//     region in the window that every other region confirmed, and the cap on this region's
//     hits beyond it, 0 for none: eventual::regionCap(); acked is then the number of regions)
//   KEYS[2i-1] the hash of the entry's window (token_bucket: the bucket's only hash),
//   KEYS[2i]   the hash of the window before (token_bucket: the same key, unused)
//   With no key declared (Redis Cluster: one call per master for the keys of every slot it
//   serves, which one call may not declare), the 2n keys follow the n entries in ARGV.
// A hash has one field per writer (cumulative, only ever raised: a grow-only counter whose
// merge is the maximum, so replays and reordering are harmless), and for token_bucket the
// fields _tat and _rem: the arrival time after every hit this Redis has seen, each applied
// when it arrived here (later than it happened: conservative).
// Returns per entry 15 integers: allowed, remaining, reset_after, retry_after, never (op 1;
// op 0 returns 1, 0, 0, 0, 0), charged (hits added to the entry by op 1: the op-1 entries are
// charged only if the request is allowed with the store's semantics, include/sluice/store/
// store.hpp: every non-shadow, non-quota one allowed and, when there are quota groups, one
// group has no denying non-shadow entry), then, read before the charge: the total of
// every other field of the window, the caller's own field, the same two for the previous
// window (read only when needed: sliding_window_counter, or a previous value sent), this
// region's total ("s" fields, own included) in the window and in the previous one (what is
// replicated to other regions), the number of other fields with hits, and {tat_us, tat_rem}
// (after the charge). All of them in one string of whole numbers separated by spaces: one
// reply object per call, cheap to build here and to parse in the sidecar.
constexpr std::string_view kMain = R"lua(
local kStride = 12
local entry = ARGV[2]
local now = sluice_now
local sliding_window_counter, gcra

-- Redis turns a Lua number argument into text with 14 significant digits: times (~1.7e15 us)
-- would lose their last digits, so every stored number is formatted whole.
local function int(x)
  return string.format('%.0f', x)
end

local function hget_number(key, field)
  local v = redis.call('HGET', key, field)
  if v then
    return tonumber(v) or 0
  end
  return nil
end

-- Raises `field` of `key` to `value` (never lowers it). Returns the stored value before.
local function raise(key, field, value)
  local old = hget_number(key, field)
  if value > (old or 0) then
    redis.call('HSET', key, field, int(value))
  end
  return old
end

-- The window's fields: the total of the others', the caller's own, this region's total
-- ("s" fields), the number of other fields with hits.
local function read_window(key)
  local flat = redis.call('HGETALL', key)
  local others, own, region, writers = 0, 0, 0, 0
  for j = 1, #flat, 2 do
    local f = flat[j]
    if f ~= '_tat' and f ~= '_rem' then
      local v = tonumber(flat[j + 1]) or 0
      if f == entry then
        own = v
      else
        others = others + v
        if v > 0 then
          writers = writers + 1
        end
      end
      if string.byte(f, 1) == 115 then -- 's'
        region = region + v
      end
    end
  end
  return others, own, region, writers
end

-- token_bucket arrival time helpers: (us, rem) with 0 <= rem < L; n hits take n * W / L.
local function tat_later(au, ar, bu, br)
  if au > bu or (au == bu and ar >= br) then
    return au, ar
  end
  return bu, br
end

local function tat_advance(us, rem, limit, window, burst, hits)
  if us < now then
    us, rem = now, 0
  end
  local q = floor(window / limit)
  local r = window - q * limit
  local function span(n)
    local nr = n * r
    local whole = floor_div(nr, limit)
    return n * q + whole, nr - whole * limit
  end
  local cu, cr = span(burst)
  cu = cu + now
  if hits > 0 then
    local su, sr = span(min(hits, burst))
    us, rem = us + su, rem + sr
    if rem >= limit then
      us, rem = us + 1, rem - limit
    end
  end
  -- A bucket is never emptier than empty: hits beyond the burst (sidecars that admitted at
  -- once before they saw each other) do not push the arrival time past now + B * W / L.
  if us > cu or (us == cu and rem > cr) then
    us, rem = cu, cr
  end
  return us, rem
end

-- token_bucket: the arrival time after the caller's hits this Redis has not seen yet (its
-- entry raised to `value`; an absent entry, expired or lost by a restart, counts from what the
-- caller last saw stored, `acked`: only the hits since then are new), max-merged with the
-- caller's hint.
local function bucket_arrival(cur, limit, window, burst, value, acked, hint_us, hint_rem)
  local t = redis.call('HMGET', cur, '_tat', '_rem')
  local tu, tr = tonumber(t[1]) or 0, tonumber(t[2]) or 0
  tu, tr = tat_later(tu, tr, hint_us, hint_rem)
  local old = raise(cur, entry, value) or acked
  if value > old then
    tu, tr = tat_advance(tu, tr, limit, window, burst, value - old)
  end
  return tu, tr
end

local function bucket_store(cur, tu, tr, limit, window, burst)
  redis.call('HSET', cur, '_tat', int(tu), '_rem', int(tr))
  local ttl_ms = floor((max(tu - now, 0) + window * burst / limit + window) / 1000) + 1000
  redis.call('PEXPIRE', cur, int(ttl_ms))
end

-- fixed_window and sliding_window_counter: reads the window's hash first, then raises the entry
-- only when it grew (and only then renews the TTL: a hash lives 2 W + 1 s past its last write):
-- a synced key whose count did not change costs one HGETALL, one that did an HSET and a PEXPIRE
-- more. The previous window's hash the same way, when it is read (sliding_window_counter) or
-- written (a value to send). Returns the reading: others, own, region, writers, and the
-- previous window's others, own, region.
local function window_sync(cur, prev, algorithm, window, value, prev_value)
  local ttl_ms = floor(2 * window / 1000) + 1000
  local others, own, region, writers = read_window(cur)
  if value > own then
    redis.call('HSET', cur, entry, int(value))
    redis.call('PEXPIRE', cur, int(ttl_ms))
    if string.byte(entry, 1) == 115 then -- 's': counted in this region's total
      region = region + value - own
    end
    own = value
  end
  local prev_others, prev_own, prev_region = 0, 0, 0
  if algorithm == 2 or prev_value > 0 then
    prev_others, prev_own, prev_region = read_window(prev)
    if prev_value > prev_own then
      redis.call('HSET', prev, entry, int(prev_value))
      redis.call('PEXPIRE', prev, int(ttl_ms))
      if string.byte(entry, 1) == 115 then
        prev_region = prev_region + prev_value - prev_own
      end
      prev_own = prev_value
    end
  end
  return others, own, region, writers, prev_others, prev_own, prev_region
end

-- One bulk string of whole numbers separated by spaces: one reply object for the sidecar to
-- parse instead of one per number. Most numbers of a synced entry are 0 or 1 (written as
-- they are); table.concat writes a whole number below 1e14 exactly (%.14g); times and
-- anything else go through int().
local function encode(out)
  for j = 1, #out do
    local x = out[j]
    if x == 0 then
      out[j] = '0'
    elseif x == 1 then
      out[j] = '1'
    elseif x ~= floor(x) or x >= 1e14 or x <= -1e14 then
      out[j] = int(x)
    end
  end
  return table.concat(out, ' ')
end

-- The sync layout (ARGV[3] = 'S'): only op 0, in fewer arguments and reply values. Per entry,
-- its algorithm, then for fixed_window and sliding_window_counter (0, 2): W, value,
-- prev_value; for token_bucket (3): L, W, burst, value, acked, tat_us, tat_rem (the same
-- meanings as above). KEYS as above, or with none declared the 2n keys after the entries.
-- Returns per entry the 9 reading values of the main layout's reply (others, own, prev_others,
-- prev_own, region, prev_region, writers, tat_us, tat_rem).
if ARGV[3] == 'S' then
  local nargs = #ARGV
  local declared = #KEYS > 0
  local starts = {}
  local b = 4
  while b <= nargs and (declared or nargs - b + 1 ~= 2 * #starts) do
    starts[#starts + 1] = b
    b = b + (ARGV[b] == '3' and 8 or 4)
  end
  local K = KEYS
  if not declared then
    K = {}
    for j = 1, 2 * #starts do
      K[j] = ARGV[b + j - 1]
    end
  end
  local out = {}
  for i = 1, #starts do
    local a = starts[i]
    local cur = K[2 * i - 1]
    local o = (i - 1) * 9
    if ARGV[a] == '3' then
      local limit, window, burst = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
      if burst <= 0 then
        burst = limit
      end
      local tu, tr = bucket_arrival(cur, limit, window, burst, tonumber(ARGV[a + 4]),
                                    tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6]),
                                    tonumber(ARGV[a + 7]))
      bucket_store(cur, tu, tr, limit, window, burst)
      local others, own, region, writers = read_window(cur)
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = others, own, 0, 0, region
      out[o + 6], out[o + 7], out[o + 8], out[o + 9] = 0, writers, tu, tr
    else
      local others, own, region, writers, prev_others, prev_own, prev_region =
          window_sync(cur, K[2 * i], number(ARGV[a]), tonumber(ARGV[a + 1]),
                      tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]))
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] =
          others, own, prev_others, prev_own, region
      out[o + 6], out[o + 7], out[o + 8], out[o + 9] = prev_region, writers, 0, 0
    end
  end
  return encode(out)
end

-- Pass 1: every entry is synced and read; entries with op 1 are evaluated. Pass 2: they are
-- charged only if every non-shadow one allowed (all or nothing, like the request script);
-- count_rejected entries record the attempt either way.
local out = {}
local plan = {}
local all_allowed = true
local groups, failed -- quota groups seen / with a denying entry (built only when used)
local sketch, sketch_own, sketch_plan = nil, {}, {} -- the sketch whose cells are being read
local n, K
if #KEYS == 0 then
  n = floor((#ARGV - 2) / (kStride + 2))
  K = {}
  for j = 1, 2 * n do
    K[j] = ARGV[2 + n * kStride + j]
  end
else
  n = floor((#ARGV - 2) / kStride)
  K = KEYS
end
for i = 1, n do
  local b = 3 + (i - 1) * kStride
  local op = number(ARGV[b])
  local algorithm = number(ARGV[b + 1])
  local limit = tonumber(ARGV[b + 2])
  local window = tonumber(ARGV[b + 3])
  local burst = tonumber(ARGV[b + 4])
  local value = tonumber(ARGV[b + 5])
  local prev_value = tonumber(ARGV[b + 6])
  local acked = tonumber(ARGV[b + 7])
  local cost = tonumber(ARGV[b + 8])
  local flags = number(ARGV[b + 9])
  local count_rejected = (flags % 2) == 1
  local shadow = (floor(flags / 2) % 2) == 1
  local quota = floor(flags / 4) - 1
  local hint_us, hint_rem = tonumber(ARGV[b + 10]), tonumber(ARGV[b + 11])
  local cur, prev = K[2 * i - 1], K[2 * i]
  local ok, remaining, reset_after, retry_after, never = true, 0, 0, 0, false
  local charge, next_tat = 0, nil
  local others, own, region, writers = 0, 0, 0, 0
  local prev_others, prev_own, prev_region = 0, 0, 0
  local tat_us, tat_rem = 0, 0
  local sketch_done = false
  if op == 2 then
    -- One cell of a sketch (a sliding_window_counter hash): acked = the sketch's depth d,
    -- burst = this cell's row; the d cells of one client are consecutive entries.
    local depth, row = acked, burst
    local ttl_ms = floor(2 * window / 1000) + 1000
    raise(cur, entry, value)
    redis.call('PEXPIRE', cur, int(ttl_ms))
    if prev_value > 0 then
      raise(prev, entry, prev_value)
      redis.call('PEXPIRE', prev, int(ttl_ms))
    end
    others, own, region, writers = read_window(cur)
    prev_others, prev_own, prev_region = read_window(prev)
    if row == 0 then
      sketch = { first = i, count = math.huge, before = math.huge, own_min = math.huge }
    end
    sketch.count = min(sketch.count, others + own)
    sketch.before = min(sketch.before, prev_others + prev_own)
    sketch.own_min = min(sketch.own_min, own)
    sketch_own[i] = own
    if row == depth - 1 then
      -- The client's counts are the minimum over its cells; the decision is
      -- sliding_window_counter's on them, the charge the conservative update of this
      -- writer's own cells: each becomes max(own, min own + cost).
      local start = floor_div(now, window) * window
      local delay, ttl, st
      sliding_window_counter = sliding_window_counter or make_sliding_window_counter()
      ok, remaining, reset_after, retry_after, delay, never, ttl, st =
          sliding_window_counter(limit, window, count_rejected, start, sketch.count,
                                 sketch.before, now, cost)
      local added = max(st[2] - sketch.count, 0)
      for j = sketch.first, i do
        local c = 0
        if added > 0 then
          c = max(sketch.own_min + added - sketch_own[j], 0)
        end
        sketch_plan[j] = { ok, remaining, reset_after, retry_after, never, c }
      end
      sketch_done = true
    end
    op = 1
  elseif algorithm == 3 then
    if burst <= 0 then
      burst = limit
    end
    local tu, tr = bucket_arrival(cur, limit, window, burst, value, acked, hint_us, hint_rem)
    if op == 1 then
      gcra = gcra or make_gcra()
      local delay, ttl, nx
      ok, remaining, reset_after, retry_after, delay, never, ttl, nx =
          gcra(false, limit, window, burst, 0, false, tu, tr, 0, now, cost)
      if ok and cost > 0 then
        charge, next_tat = cost, nx
      end
    end
    bucket_store(cur, tu, tr, limit, window, burst)
    others, own, region, writers = read_window(cur)
    tat_us, tat_rem = tu, tr
  else
    others, own, region, writers, prev_others, prev_own, prev_region =
        window_sync(cur, prev, algorithm, window, value, prev_value)
    if op == 1 then
      local start = floor_div(now, window) * window
      local count, before = others + own, prev_others + prev_own
      local delay, ttl, st
      if algorithm == 2 then
        sliding_window_counter = sliding_window_counter or make_sliding_window_counter()
        ok, remaining, reset_after, retry_after, delay, never, ttl, st =
            sliding_window_counter(limit, window, count_rejected, start, count, before, now, cost)
      else
        ok, remaining, reset_after, retry_after, delay, never, ttl, st =
            fixed_window(limit, window, count_rejected, start, count, now, cost)
      end
      charge = max(st[2] - count, 0)
      -- Regions, near the limit (fixed_window and sliding_window_counter): this region may
      -- hold beyond its count every other region confirmed (tat_us) the larger of a cap
      -- (tat_rem, 0 for none) and its share of what remains (acked = the number of regions;
      -- `others + own - region` = the other regions' counts here). Denied past it until more
      -- is confirmed (eventual::regionHoldLimit()).
      local cap = hint_rem
      local confirmed = min(hint_us, region)
      local hold = cap
      if cap > 0 and acked >= 2 then
        local weighs = 0 -- what the previous window still weighs (sliding_window_counter)
        if algorithm == 2 then
          weighs = math.ceil(before * (window - (now - start)) / window)
        end
        local left = limit - weighs - confirmed - (others + own - region)
        hold = max(cap, floor(max(left, 0) / acked))
      end
      if ok and cap > 0 and charge > 0 and region + charge - confirmed > hold then
        ok, remaining, retry_after, never = false, 0, min(reset_after, 100000), false
        if not count_rejected then
          charge = 0
        end
      end
    end
  end
  if number(ARGV[b]) == 2 and not sketch_done then
    -- A sketch cell before the last: decided with the last one.
  elseif op == 1 and quota >= 0 then
    groups = groups or {}
    groups[quota] = true
    if not ok and not shadow then
      failed = failed or {}
      failed[quota] = true
    end
  elseif op == 1 and not ok and not shadow then
    all_allowed = false
  end
  if sketch_done then
    -- Every cell of the client gets the decision and its own charge.
    for j = sketch.first, i do
      local sp = sketch_plan[j]
      plan[j] = { 1, sp[1], sp[6], nil, count_rejected, K[2 * j - 1] }
      local o = (j - 1) * 15
      out[o + 1] = sp[1] and 1 or 0
      out[o + 2] = sp[2]
      out[o + 3] = sp[3]
      out[o + 4] = sp[4]
      out[o + 5] = sp[5] and 1 or 0
    end
  end
  if plan[i] == nil and op == 1 then
    -- Only a decided entry (op 1) may be charged in pass 2; a synced one needs no plan.
    plan[i] = { op, ok, charge, next_tat, count_rejected, cur }
  end
  local o = (i - 1) * 15
  if sketch_done then
    ok = plan[i][2]
  end
  out[o + 1] = ok and 1 or 0
  out[o + 2] = remaining
  out[o + 3] = reset_after
  out[o + 4] = retry_after
  out[o + 5] = never and 1 or 0
  out[o + 6] = 0
  out[o + 7] = others
  out[o + 8] = own
  out[o + 9] = prev_others
  out[o + 10] = prev_own
  out[o + 11] = region
  out[o + 12] = prev_region
  out[o + 13] = writers
  out[o + 14] = tat_us
  out[o + 15] = tat_rem
end

if all_allowed and groups then
  -- Quota mode: the request passes while one quota group still has room.
  all_allowed = false
  for g in pairs(groups) do
    if not (failed and failed[g]) then
      all_allowed = true
      break
    end
  end
end

for i = 1, n do
  local p = plan[i]
  if p and p[1] == 1 and p[3] > 0 and ((all_allowed and p[2]) or p[5]) then
    redis.call('HINCRBY', p[6], entry, int(p[3]))
    if p[4] then
      redis.call('HSET', p[6], '_tat', int(p[4][1]), '_rem', int(p[4][2]))
      out[(i - 1) * 15 + 14] = p[4][1]
      out[(i - 1) * 15 + 15] = p[4][2]
    end
    out[(i - 1) * 15 + 6] = p[3]
  end
end
return encode(out)
)lua";

}  // namespace

std::string composeEventualScript() {
  std::string out(kPrelude);
  for (std::string_view name : lua::scriptNames()) {
    if (name.starts_with("00_") || name.starts_with("99_")) {
      continue;
    }
    out += lua::script(name);
    out += '\n';
  }
  out += kMain;
  return out;
}

namespace {

Status replyShape(const std::string& what) {
  return redis::redisError(redis::FailureSource::kProtocol, 0, "eventual script: " + what);
}

}  // namespace

Status parseReply(const redis::Reply& reply, std::size_t n, std::vector<std::int64_t>& out,
                  int stride) {
  out.clear();
  if (reply.type != redis::Reply::Type::kString) {
    return replyShape("not a string of numbers");
  }
  const std::size_t expected = n * static_cast<std::size_t>(stride);
  out.reserve(expected);
  const char* p = reply.str.data();
  const char* end = p + reply.str.size();
  while (p < end) {
    std::int64_t value = 0;
    auto [next, ec] = std::from_chars(p, end, value);
    if (ec != std::errc() || (next < end && *next != ' ')) {
      return replyShape("a value that is not a whole number");
    }
    out.push_back(value);
    p = next < end ? next + 1 : next;
  }
  if (out.size() != expected) {
    return replyShape("unexpected reply size");
  }
  return {};
}

KeyReading syncReadingOf(const std::int64_t* r, std::int64_t window) {
  KeyReading reading;
  reading.window = window;
  reading.others = r[kOthers - kOthers];
  reading.own = r[kOwn - kOthers];
  reading.prev_others = r[kPrevOthers - kOthers];
  reading.prev_own = r[kPrevOwn - kOthers];
  reading.writers = static_cast<std::size_t>(std::max<std::int64_t>(r[kWriters - kOthers], 0));
  reading.tat.a = r[kTatUs - kOthers];
  reading.tat.b = r[kTatRem - kOthers];
  return reading;
}

KeyReading readingOf(const std::int64_t* v, std::int64_t window) {
  return syncReadingOf(v + kOthers, window);
}

}  // namespace sluice::eventual

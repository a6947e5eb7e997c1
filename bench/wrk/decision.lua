-- wrk script of Sluice's benchmark: one decision request per call, many distinct clients,
-- optional constant offered rate, results written as JSON. Parameters come from the
-- environment (wrk's done() runs in a Lua state that never sees init()'s arguments):
--   BENCH_MODE     json   POST /shouldAllowRequest with a JSON body (Sluice, the Node peer)
--                  header GET /<op>/<n> with the client in an X-Client header (nginx, HAProxy)
--   BENCH_CLIENTS  number of distinct client ids (1 = one hot key)          default 1
--   BENCH_SEQ      1: client ids 0,1,2,... in order, modulo BENCH_CLIENTS (fills keys once)
--   BENCH_SEQ_START first sequential id                                     default 0
--   BENCH_PREFIX   client id prefix, so that runs do not share buckets      default "c"
--   BENCH_OP       value of the "op" descriptor, e.g. fixed_window_allow
--   BENCH_DESC     descriptors per request: 1 or 3                          default 1
--   BENCH_RATE     total offered rate in requests/s (0 = as fast as possible) default 0
--   BENCH_THREADS  wrk -t, to split BENCH_RATE between threads               default 1
--   BENCH_OUT      file the JSON summary is written to (done())
--
-- Constant rate without wrk2: delay() hands out send slots every 1/rate seconds on a monotonic
-- clock (LuaJIT FFI clock_gettime). A connection that asks for the next slot waits until it
-- (wrk's timers have millisecond resolution: each send is within ~0.5 ms of its slot, the
-- average rate is exact); a late slot is sent at once, so a stall is caught up, not skipped.
-- wrk measures latency from the moment a request is written, so a stall longer than a slot is
-- not charged to the requests queued behind it (no coordinated-omission correction): the
-- percentiles are service times at the offered rate. The achieved rate is reported beside them.

local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
  int clock_gettime(int clk_id, bench_timespec *tp);
]]
local ts = ffi.new("bench_timespec")
local function now_s()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local function env(name, default)
  local v = os.getenv(name)
  if v == nil or v == "" then
    return default
  end
  return v
end

local mode = env("BENCH_MODE", "json")
local clients = tonumber(env("BENCH_CLIENTS", "1"))
local sequential = env("BENCH_SEQ", "0") == "1"
local seq_next = tonumber(env("BENCH_SEQ_START", "0"))
local prefix = env("BENCH_PREFIX", "c")
local op = env("BENCH_OP", "fixed_window_allow")
local ndesc = tonumber(env("BENCH_DESC", "1"))
local rate = tonumber(env("BENCH_RATE", "0"))
local nthreads = tonumber(env("BENCH_THREADS", "1"))

-- Client ids have a fixed width so that every request has the same length and can be made by
-- concatenating three constant strings around the id (cheap for the load generator).
local function client_id(n)
  return prefix .. string.format("%08d", n)
end

local head, tail
if mode == "json" then
  local descs = '{"entries":[{"key":"op","value":"' .. op .. '"}]}'
  if ndesc == 3 then
    descs = descs .. ',{"entries":[{"key":"route","value":"/v1/items"}]}'
      .. ',{"entries":[{"key":"tier","value":"gold"}]}'
  end
  local body_head = '{"domain":"bench","clientId":"'
  local body_tail = '","descriptors":[' .. descs .. ']}'
  local body_len = #body_head + #client_id(0) + #body_tail
  head = "POST /shouldAllowRequest HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    .. "Content-Type: application/json\r\nContent-Length: " .. body_len .. "\r\n\r\n" .. body_head
  tail = body_tail
else
  head = "GET /" .. op .. "/" .. ndesc .. " HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Client: "
  tail = "\r\n\r\n"
end

math.randomseed(os.time())

request = function()
  local n
  if sequential then
    n = seq_next % clients
    seq_next = seq_next + 1
  elseif clients <= 1 then
    n = 0
  else
    n = math.random(0, clients - 1)
  end
  return head .. client_id(n) .. tail
end

if rate > 0 then
  local interval = nthreads / rate
  local next_slot = nil
  delay = function()
    local t = now_s()
    if next_slot == nil then
      next_slot = t
    end
    local slot = next_slot
    next_slot = next_slot + interval
    local wait_ms = (slot - t) * 1000
    if wait_ms <= 0.5 then
      return 0
    end
    return math.floor(wait_ms + 0.5)
  end
end

done = function(summary, latency, requests)
  local out = os.getenv("BENCH_OUT")
  if out == nil or out == "" then
    return
  end
  local e = summary.errors
  local f = assert(io.open(out, "w"))
  f:write(string.format(
    '{"duration_us":%d,"requests":%d,"bytes":%d,"non2xx":%d,"connect_errors":%d,' ..
    '"read_errors":%d,"write_errors":%d,"timeouts":%d,"lat_mean_us":%.1f,"lat_max_us":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d}\n',
    summary.duration, summary.requests, summary.bytes, e.status, e.connect, e.read, e.write,
    e.timeout, latency.mean, latency.max, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9)))
  f:close()
end

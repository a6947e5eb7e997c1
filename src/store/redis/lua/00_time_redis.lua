-- Time source of the production script: the Redis server clock, so that every sidecar
-- sharing this Redis decides on one clock. ARGV[1] (the test time slot) is ignored here.
-- Key lifetimes get no slack: a key lives exactly as long as its state matters (rounded up
-- to whole milliseconds).
-- A value read once, not a function: the chunk runs on every call anyway (see 10_common.lua).
local sluice_now
do
  local t = redis.call('TIME')
  sluice_now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- A batch of requests (99_evaluate.lua) is decided on this one reading: see there (no
-- request sets its own time).
local sluice_request_time = nil
local sluice_ttl_slack_ms = 0
-- Keys that must outlive a point in time (sketch windows) expire at it (PEXPIREAT).
local sluice_expire_at = true

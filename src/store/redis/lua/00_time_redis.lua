-- Time source of the production script: the Redis server clock, so that every sidecar
-- sharing this Redis decides on one clock. ARGV[1] (the test time slot) is ignored here.
-- Key lifetimes get no slack: a key lives exactly as long as its state matters (rounded up
-- to whole milliseconds).
local function sluice_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local sluice_ttl_slack_ms = 0

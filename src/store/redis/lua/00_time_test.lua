-- Time source of the TEST-ONLY script variant (composed only for
-- RedisOptions::script_time = ScriptTime::kStoreClock, which no flag sets): the
-- decision time comes from ARGV[1], in microseconds since the epoch. Keys still expire on
-- the Redis clock, so they get one hour of slack: an expired-but-kept state decides exactly
-- like a fresh bucket (that is what the limiter's ttl means), so the slack never changes a
-- decision, while expiring on real time during a simulated trace could.
local sluice_now = tonumber(ARGV[1])
-- In a batch (99_evaluate.lua) each request carries its own time in its own ARGV[1].
local function sluice_request_time(args)
  sluice_now = tonumber(args[1])
end
local sluice_ttl_slack_ms = 3600000
-- The simulated time is not Redis time: expiries are relative (PEXPIRE), plus the slack.
local sluice_expire_at = false

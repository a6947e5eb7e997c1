-- Time source of the TEST-ONLY script variant (composed only for
-- RedisOptions::script_time = ScriptTime::kStoreClock, which no flag sets): the
-- decision time comes from ARGV[1], in microseconds since the epoch. Keys still expire on
-- the Redis clock, so they get one hour of slack: an expired-but-kept state decides exactly
-- like a fresh bucket (that is what the limiter's ttl means), so the slack never changes a
-- decision, while expiring on real time during a simulated trace could.
local sluice_now = tonumber(ARGV[1])
local sluice_ttl_slack_ms = 3600000

"""The penalty box over gRPC RLS v3 (docs/bans.md), through a real client against the real
sluice binary, on the memory store and on a real redis-server.

A client denied `after` times within the limit's window is banned: the answer is OVER_LIMIT
with the ban's remaining time in duration_until_reset and the rate-limit headers in
response_headers_to_add (Retry-After to the ban's end); while banned every answer says so;
the admin reset (DELETE /limits) lifts the ban, and another client is never affected.
"""

import json
import re
import time
import unittest
import urllib.error
import urllib.request

from rls_support import Code, Redis, Sluice, headers_of, request

# 2 logins an hour; the third denial within the hour bans for 30 s (then 60 s, at most 2 m).
RULES = {"api.yaml": """domain: api
descriptors:
  - key: user
    rate_limit:
      name: login
      unit: hour
      requests_per_unit: 2
      ban: {after: 3, duration: 30s, backoff: 2, max: 2m}
"""}

BAN_SECONDS = 30


def delete(port, path, body):
    data = json.dumps(body).encode()
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data,
                                 method="DELETE")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def metric(text, series):
    """The value of one series of /metrics, or None when it is absent."""
    match = re.search("^" + re.escape(series) + r" (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else None


class BansOnMemory(unittest.TestCase):
    """RedisBans runs the same on Redis."""

    def store_args(self):
        return []

    def setUp(self):
        # The hour's window must not roll over during a test (it would forget the denials).
        into_hour = time.time() % 3600
        if into_hour > 3600 - 30:
            time.sleep(3600 - into_hour + 0.05)
        self.redis = None
        self.sluice = Sluice(RULES, args=self.store_args(), admin=True)
        self.admin_port = self.sluice.admin_port
        self.stub = self.sluice.stub()

    def tearDown(self):
        self.sluice.close()
        if self.redis is not None:
            self.redis.close()

    def login(self, who):
        return self.stub.ShouldRateLimit(request("api", [[("user", who)]]), timeout=5)

    def flood_until_banned(self, who):
        """Two allowed, two denied (not banned), and the third denial starts the ban."""
        for _ in range(2):
            self.assertEqual(self.login(who).overall_code, Code.OK)
        for _ in range(2):
            denied = self.login(who)
            self.assertEqual(denied.overall_code, Code.OVER_LIMIT)
            # A plain denial of the hour's limit: reset at the window's end, not a ban's.
            self.assertNotEqual(headers_of(denied).get("Retry-After"), str(BAN_SECONDS))
        return self.login(who)

    def assert_banned(self, response, at_most):
        self.assertEqual(response.overall_code, Code.OVER_LIMIT)
        status = response.statuses[0]
        self.assertEqual(status.code, Code.OVER_LIMIT)
        self.assertEqual(status.current_limit.name, "login")
        self.assertEqual(status.limit_remaining, 0)
        seconds = status.duration_until_reset.seconds
        self.assertTrue(at_most - 3 <= seconds <= at_most, seconds)
        headers = headers_of(response)
        self.assertEqual(headers["Retry-After"], str(seconds))
        self.assertEqual(headers["X-Ratelimit-Reset"], str(seconds))
        self.assertEqual(headers["X-Ratelimit-Remaining"], "0")

    def test_a_flooding_client_is_banned_until_the_admin_reset(self):
        started = self.flood_until_banned("mallory")
        # The denial that starts the ban answers with the whole ban.
        self.assert_banned(started, BAN_SECONDS)
        self.assertEqual(started.statuses[0].duration_until_reset.seconds, BAN_SECONDS)
        for _ in range(3):
            self.assert_banned(self.login("mallory"), BAN_SECONDS)
        # Another client of the same rule is not affected.
        self.assertEqual(self.login("alice").overall_code, Code.OK)

        metrics = self.sluice.metrics()
        self.assertEqual(metric(metrics, 'sluice_bans_total{domain="api",rule="login"}'), 1)
        self.assertEqual(metric(metrics, 'sluice_banned_total{domain="api",rule="login"}'), 4)

        # Envoy's requests carry no client id: the reset names the empty one.
        status, body = delete(self.admin_port, "/limits", {
            "domain": "api", "clientId": "",
            "descriptors": [{"entries": [{"key": "user", "value": "mallory"}]}]})
        self.assertEqual(status, 200, body)
        lifted = self.login("mallory")
        self.assertEqual(lifted.overall_code, Code.OK)
        self.assertEqual(lifted.statuses[0].limit_remaining, 1)

    def test_a_reset_of_the_domain_lifts_the_ban_and_forgets_the_ladder(self):
        self.assert_banned(self.flood_until_banned("eve"), BAN_SECONDS)
        # Without descriptors: every bucket of the domain (for the empty client id). Banned
        # again afterwards, the ban is the ladder's first step again (not 60 s).
        status, body = delete(self.admin_port, "/limits", {"domain": "api", "clientId": ""})
        self.assertEqual(status, 200, body)
        self.assert_banned(self.flood_until_banned("eve"), BAN_SECONDS)


class RedisBans(BansOnMemory):
    def store_args(self):
        self.redis = Redis()
        return ["--store", "redis", "--redis", self.redis.url(), "--failure-mode", "closed",
                "--redis-timeout-ms", "2000"]  # a loaded test machine: correctness, not latency


if __name__ == "__main__":
    unittest.main()

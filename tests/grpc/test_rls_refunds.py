"""Envoy's counting and refunds over gRPC RLS v3, through a real client against the real
sluice binary, on the memory store and on a real redis-server.

- envoyproxy/ratelimit's own integration scripts, replayed as the RLS calls Envoy makes
  for them (examples/envoy/proxy.yaml): integration-test/scripts/token-quota.sh and
  multiservice-tokenquota.sh with examples/ratelimit/config/example.yaml (a check with
  hits_addend 0 on the request path, a charge of 1 at stream end), and
  test/integration/integration_test.go testBasicBaseConfig's request with two limits.
  Each runs with Envoy's default counting (every matched limit of every request) and with
  STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true (all or nothing).
- Refunds: a descriptor's is_negative_hits gives its hits back, never beyond the limit; a
  sketch limit refuses it with the reason, and nothing is charged.
"""

import random
import time
import unittest

import grpc

from rls_support import Code, Redis, Sluice, request

EXAMPLE = """domain: rl
descriptors:
  - key: service
    value: service_1
    quota_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
    metadata:
      service_with_quota:
        name: "service_1"
  - key: service
    value: service_2
    quota_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 2
    metadata:
      service_with_quota:
        name: "service_2"
"""

ANOTHER = """domain: another
descriptors:
  - key: key2
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: key3
    rate_limit:
      unit: hour
      requests_per_unit: 10
"""

LLM = """domain: llm
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 1000
  - key: team
    rate_limit:
      unit: minute
      requests_per_unit: 100
      algorithm: token_bucket
  - key: ip
    rate_limit:
      unit: minute
      requests_per_unit: 100
      algorithm: sketch
      sketch: {expected_requests: 1000}
"""

RULES = {"example.yaml": EXAMPLE, "another.yaml": ANOTHER, "llm.yaml": LLM}


def await_fresh_minute(needed_seconds=15):
    """The replays count per minute: start one early enough in a minute that its window
    does not roll over while it runs (the wait happens only in a minute's last seconds)."""
    into = time.time() % 60
    if into > 60 - needed_seconds:
        time.sleep(60 - into + 0.05)


class Counting(unittest.TestCase):
    """On the memory store; RedisCounting runs the same on Redis."""

    def store_args(self):
        return []

    def start(self, extra=(), env=None):
        self.sluice = Sluice(RULES, args=self.store_args() + list(extra), env=env)
        self.stub = self.sluice.stub()
        await_fresh_minute()

    def setUp(self):
        self.redis = None
        self.sluice = None

    def tearDown(self):
        if self.sluice is not None:
            self.sluice.close()
        if self.redis is not None:
            self.redis.close()

    def call(self, domain, descriptors, hits_addend=0):
        return self.stub.ShouldRateLimit(request(domain, descriptors, hits_addend), timeout=5)

    def token_quota(self, requests):
        """token-quota.sh: each request checks (service, service_2) with hits_addend 0 and,
        once served, charges it 1 at stream end. Returns how many requests were served."""
        served = 0
        for _ in range(requests):
            check = self.call("rl", [{"entries": [("service", "service_2")], "hits_addend": 0}])
            if check.overall_code != Code.OK:
                continue
            served += 1
            self.call("rl", [{"entries": [("service", "service_2")], "hits_addend": 1}])
        return served

    def test_token_quota_script_serves_three_requests_as_envoy_does(self):
        self.start()
        # "only the 4th request should be rejected"
        self.assertEqual(self.token_quota(4), 3)

    def test_stop_cache_key_increment_when_overlimit_keeps_all_or_nothing(self):
        # The charge that crosses the limit is refused, so a fourth request gets through.
        self.start(env={"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true"})
        self.assertIn("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true -> --envoy-charge "
                      "all-or-nothing", self.sluice.log())
        self.assertEqual(self.token_quota(4), 4)

    def multiservice(self):
        """multiservice-tokenquota.sh: the request path checks both services with hits 0;
        the rules metadata of the services that passed names the one to use (the first);
        the stream end charges 1 to the service that served. Returns who served each of 6
        requests (None: denied)."""
        served_by = []
        for _ in range(6):
            check = self.call("rl", [
                {"entries": [("service", "service_1")], "hits_addend": 0},
                {"entries": [("service", "service_2")], "hits_addend": 0}])
            if check.overall_code != Code.OK:
                served_by.append(None)
                continue
            metadata = check.dynamic_metadata.fields["metadata"].struct_value
            name = metadata.fields["service_with_quota"].struct_value.fields["name"].string_value
            served_by.append(name)
            self.call("rl", [{"entries": [("service", name)], "hits_addend": 1}])
        return served_by

    def test_multiservice_token_quota_script(self):
        self.start()
        self.assertEqual(self.multiservice(), ["service_1", "service_1", "service_2",
                                               "service_2", "service_2", None])

    def test_multiservice_all_or_nothing_never_runs_out(self):
        # service_1's charge at stream end crosses its limit of 1 and is refused: it serves
        # every request.
        self.start(["--envoy-charge", "all-or-nothing"])
        self.assertEqual(self.multiservice(), ["service_1"] * 6)

    def two_keys(self):
        """testBasicBaseConfig's second loop: key2 (20/minute) and key3 (10/hour) in one
        request, 15 times. Returns key2's limit_remaining and the overall codes."""
        value = str(random.getrandbits(48))
        remaining, codes = [], []
        for _ in range(15):
            response = self.call("another", [[("key2", value)], [("key3", value)]], 1)
            self.assertEqual(response.statuses[0].code, Code.OK)
            remaining.append(response.statuses[0].limit_remaining)
            codes.append(response.overall_code)
        self.assertEqual(codes, [Code.OK] * 10 + [Code.OVER_LIMIT] * 5)
        return remaining

    def test_a_denied_request_charges_its_other_limit_as_envoy_does(self):
        self.start()
        self.assertEqual(self.two_keys(), [20 - (i + 1) for i in range(15)])

    def test_all_or_nothing_leaves_the_other_limit_uncharged(self):
        self.start(["--envoy-charge", "all-or-nothing"])
        self.assertEqual(self.two_keys(), [20 - (i + 1) for i in range(10)] + [10] * 5)

    def test_is_negative_hits_refunds_never_beyond_the_limit(self):
        self.start()
        charged = self.call("llm", [{"entries": [("user", "u1")], "hits_addend": 800}])
        self.assertEqual(charged.statuses[0].limit_remaining, 200)
        refund = self.call("llm", [{"entries": [("user", "u1")], "hits_addend": 500,
                                    "is_negative_hits": True}])
        self.assertEqual(refund.overall_code, Code.OK)
        self.assertEqual(refund.statuses[0].limit_remaining, 700)
        refund = self.call("llm", [{"entries": [("user", "u1")], "hits_addend": 5000,
                                    "is_negative_hits": True}])
        self.assertEqual(refund.statuses[0].limit_remaining, 1000)
        # A token bucket: its arrival time goes back, never before now. 40 come back, plus
        # one per 600 ms between the two calls (its refill).
        started = time.monotonic()
        self.call("llm", [{"entries": [("team", "t1")], "hits_addend": 100}])
        refund = self.call("llm", [{"entries": [("team", "t1")], "hits_addend": 40,
                                    "is_negative_hits": True}])
        refilled = int((time.monotonic() - started) / 0.6) + 1
        self.assertGreaterEqual(refund.statuses[0].limit_remaining, 40)
        self.assertLessEqual(refund.statuses[0].limit_remaining, 40 + refilled)

    def test_a_refund_and_a_charge_in_one_request(self):
        self.start()
        self.call("llm", [{"entries": [("user", "u2")], "hits_addend": 1000}])
        # The refunded descriptor never denies; the other one is decided as usual.
        response = self.call("llm", [
            {"entries": [("user", "u2")], "hits_addend": 300, "is_negative_hits": True},
            {"entries": [("user", "u3")], "hits_addend": 10}])
        self.assertEqual(response.overall_code, Code.OK)
        self.assertEqual(response.statuses[0].limit_remaining, 300)
        self.assertEqual(response.statuses[1].limit_remaining, 990)

    def test_a_sketch_refund_is_refused_with_the_reason(self):
        self.start()
        self.call("llm", [{"entries": [("user", "u4")], "hits_addend": 10}])
        with self.assertRaises(grpc.RpcError) as failure:
            self.call("llm", [
                {"entries": [("user", "u4")], "hits_addend": 10, "is_negative_hits": True},
                {"entries": [("ip", "10.0.0.1")], "hits_addend": 1, "is_negative_hits": True}])
        self.assertEqual(failure.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("sketch limit cannot take a refund", failure.exception.details())
        # Nothing was touched: the user's limit still holds its 10.
        check = self.call("llm", [{"entries": [("user", "u4")], "hits_addend": 0}])
        self.assertEqual(check.statuses[0].limit_remaining, 990)


class RedisCounting(Counting):
    def store_args(self):
        if self.redis is None:
            self.redis = Redis()
        # A loaded test machine may miss the default 20 ms: correctness here, not latency.
        return ["--store", "redis", "--redis", self.redis.url(), "--redis-timeout-ms", "2000"]


if __name__ == "__main__":
    unittest.main()

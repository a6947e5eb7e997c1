"""In-flight limits (algorithm: concurrency) over gRPC RLS v3, through a real client against
the real sluice binary, on the memory store and on a real redis-server.

An admitted ShouldRateLimit takes a lease and names it in the response's dynamic metadata
(`lease_id`: what Envoy's `metadata` rate-limit action reads back at stream end). A refund
(`is_negative_hits`) whose descriptor carries the `lease_id` entry releases that lease; a
refund without one releases none; a lease id that is not one is INVALID_ARGUMENT and
nothing is touched.
"""

import unittest

import grpc

from rls_support import Code, Redis, Sluice, request

RULES = {"work.yaml": """domain: work
descriptors:
  - key: inflight
    value: chat
    rate_limit:
      algorithm: concurrency
      max_in_flight: 2
      lease: 60s
"""}

CHAT = [("inflight", "chat")]


class Leases(unittest.TestCase):
    """On the memory store; RedisLeases runs the same on Redis."""

    def store_args(self):
        return []

    def setUp(self):
        self.redis = None
        self.sluice = Sluice(RULES, args=self.store_args())
        self.stub = self.sluice.stub()

    def tearDown(self):
        self.sluice.close()
        if self.redis is not None:
            self.redis.close()

    def call(self, descriptors, hits_addend=0):
        return self.stub.ShouldRateLimit(request("work", descriptors, hits_addend), timeout=5)

    def take(self):
        """The lease id of an admitted request, or None when denied."""
        response = self.call([CHAT])
        if response.overall_code != Code.OK:
            self.assertNotIn("lease_id", response.dynamic_metadata.fields)
            return None
        return response.dynamic_metadata.fields["lease_id"].string_value

    def release(self, lease_id):
        entries = CHAT + ([("lease_id", lease_id)] if lease_id is not None else [])
        return self.call([{"entries": entries, "hits_addend": 1, "is_negative_hits": True}])

    def available(self):
        # A check: hits_addend 0 at the descriptor level consumes nothing.
        response = self.call([{"entries": CHAT, "hits_addend": 0}])
        return response.statuses[0].limit_remaining

    def test_the_lease_id_comes_in_the_dynamic_metadata(self):
        first = self.take()
        self.assertTrue(first.startswith("l1."), first)
        second = self.take()
        self.assertNotEqual(first, second)
        self.assertIsNone(self.take(), "max_in_flight is 2")
        self.assertEqual(self.available(), 0)

    def test_a_refund_naming_the_lease_releases_it_once(self):
        first = self.take()
        second = self.take()
        response = self.release(first)
        self.assertEqual(response.overall_code, Code.OK)
        self.assertEqual(response.statuses[0].limit_remaining, 1)
        # The same refund again (a retried stream-end call) releases nothing more.
        self.assertEqual(self.release(first).statuses[0].limit_remaining, 1)
        self.assertEqual(self.available(), 1)
        self.assertIsNotNone(self.take())
        self.assertIsNone(self.take())
        self.assertEqual(self.release(second).statuses[0].limit_remaining, 1)

    def test_a_refund_without_a_lease_releases_none(self):
        self.take()
        self.take()
        self.assertEqual(self.release(None).statuses[0].limit_remaining, 0)
        self.assertEqual(self.available(), 0)

    def test_a_lease_id_that_is_not_one_is_refused_and_touches_nothing(self):
        self.take()
        with self.assertRaises(grpc.RpcError) as failure:
            self.release("l1.not-a-lease")
        self.assertEqual(failure.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("descriptors[0].entries[1]: lease: not a lease id",
                      failure.exception.details())
        self.assertEqual(self.available(), 1)

    def test_json_answers_carry_the_lease_id_too(self):
        status, body, _ = self.sluice.post_json(
            "/json", {"domain": "work",
                      "descriptors": [{"entries": [{"key": "inflight", "value": "chat"}]}]})
        self.assertEqual(status, 200)
        lease_id = body["dynamicMetadata"]["lease_id"]
        status, answer, _ = self.sluice.post_json("/release", {"lease": lease_id})
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["limits"][0]["available"], 2)


class RedisLeases(Leases):
    def store_args(self):
        if self.redis is None:
            self.redis = Redis()
        # A loaded test machine may miss the default 20 ms: correctness here, not latency.
        return ["--store", "redis", "--redis", self.redis.url(), "--redis-timeout-ms", "2000"]


if __name__ == "__main__":
    unittest.main()

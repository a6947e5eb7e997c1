"""A Redis outage (a real redis-server killed) seen through gRPC, in each failure mode:
open answers OK (flagged), closed answers UNAVAILABLE (so Envoy's failure_mode_deny
applies; never overall_code UNKNOWN), local keeps limiting in memory."""

import unittest
import urllib.error
import urllib.request

import grpc

from rls_support import Code, Redis, Sluice, request, wait_for

RULES = {
    "api.yaml": """domain: api
descriptors:
  - key: client
    rate_limit:
      name: per_client
      unit: hour
      requests_per_unit: 2
""",
}


def ready(sluice):
    """/readyz: rules loaded and every I/O thread connected to Redis."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % sluice.http_port,
                                    timeout=1) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


class Outage(unittest.TestCase):
    def start(self, mode):
        self.redis = Redis()
        self.sluice = Sluice(RULES, args=["--store", "redis", "--redis", self.redis.url(),
                                          "--failure-mode", mode])
        wait_for(lambda: ready(self.sluice), 15, "sluice ready")
        self.stub = self.sluice.stub()
        # With open and local, /readyz does not wait for Redis (Sluice answers anyway): wait
        # for an answer that came from Redis, on a key of its own.
        wait_for(lambda: not self.degraded(self.call("warm-up")[1]), 15, "Redis to answer")

    @staticmethod
    def degraded(call):
        return ("x-sluice-degraded", "true") in call.trailing_metadata()

    def tearDown(self):
        self.sluice.close()
        self.redis.close()

    def call(self, client):
        return self.stub.ShouldRateLimit.with_call(request("api", [[("client", client)]]), timeout=5)

    def test_open_answers_ok_and_flags_the_answer(self):
        self.start("open")
        response, _ = self.call("o")
        self.assertEqual(response.statuses[0].limit_remaining, 1)
        self.redis.kill()
        for _ in range(4):
            response, call = self.call("o")
            self.assertEqual(response.overall_code, Code.OK)
        self.assertIn(("x-sluice-degraded", "true"), call.trailing_metadata())

    def test_closed_answers_unavailable_then_recovers(self):
        self.start("closed")
        self.call("c")
        self.redis.kill()
        with self.assertRaises(grpc.RpcError) as caught:
            self.call("c")
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.redis.start()
        wait_for(lambda: ready(self.sluice), 20, "sluice reconnected to Redis")
        # The Redis came back empty (no persistence): counting starts again.
        response, _ = self.call("c")
        self.assertEqual(response.overall_code, Code.OK)
        self.assertEqual(response.statuses[0].limit_remaining, 1)

    def test_local_keeps_limiting_in_memory(self):
        self.start("local")
        self.redis.kill()
        codes = [self.call("l")[0].overall_code for _ in range(3)]
        self.assertEqual(codes, [Code.OK, Code.OK, Code.OVER_LIMIT])


if __name__ == "__main__":
    unittest.main()

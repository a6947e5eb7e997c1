"""A Redis outage (a real redis-server killed) seen through gRPC, in each failure mode:
open answers OK (flagged), closed answers UNAVAILABLE (so Envoy's failure_mode_deny
applies; never overall_code UNKNOWN), local keeps limiting in memory. Calls whose client
gives up while a slow Redis (CLIENT PAUSE) is deciding them."""

import re
import unittest
import urllib.error
import urllib.request

import grpc

from rls_support import Code, Redis, Sluice, health_pb2, health_pb2_grpc, rls_pb2_grpc, \
    request, wait_for

RULES = {
    "api.yaml": """domain: api
descriptors:
  - key: client
    rate_limit:
      name: per_client
      unit: hour
      requests_per_unit: 2
""",
    "wide.yaml": """domain: wide
descriptors:
  - key: client
    rate_limit:
      unit: hour
      requests_per_unit: 100
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
        # Under load the first script call can outlast --redis-timeout-ms: with `closed` that
        # is an UNAVAILABLE answer, so keep asking until Redis answers in time.
        wait_for(self.answered_by_redis, 15, "Redis to answer")

    def answered_by_redis(self):
        try:
            return not self.degraded(self.call("warm-up")[1])
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.UNAVAILABLE:
                return False
            raise

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


def metric(text, name):
    """The value of one series of Sluice's /metrics (0 when absent)."""
    match = re.search(r"^sluice_%s (\S+)$" % re.escape(name), text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


class Cancellation(unittest.TestCase):
    def test_calls_given_up_while_redis_decides_them_are_counted_and_charged_once(self):
        # Redis is held up by CLIENT PAUSE WRITE (the decision script is a write, so it waits;
        # this test's own connection can still UNPAUSE). One call is cancelled by its client,
        # another reaches its deadline, both while their decision is outstanding. The server
        # must answer the other calls meanwhile, finish both calls once Redis answers, count
        # them as cancelled, and charge each at most once.
        redis = Redis()
        sluice = Sluice(RULES, args=["--store", "redis", "--redis", redis.url(),
                                     "--redis-timeout-ms", "8000", "--failure-mode", "closed"])
        try:
            wait_for(lambda: ready(sluice), 15, "sluice ready")
            # One channel (one HTTP/2 connection): what is sent on it reaches the server in
            # order, so a health check answered after a cancel was read after the RST_STREAM.
            channel = sluice.channel()
            stub = rls_pb2_grpc.RateLimitServiceStub(channel)
            health = health_pb2_grpc.HealthStub(channel)
            first = stub.ShouldRateLimit(request("wide", [[("client", "x")]]), timeout=5)
            self.assertEqual(first.statuses[0].limit_remaining, 99)

            self.assertEqual(redis.command("CLIENT", "PAUSE", "20000", "WRITE"), "+OK")
            try:
                cancelled = stub.ShouldRateLimit.future(request("wide", [[("client", "x")]]),
                                                        timeout=30)
                wait_for(lambda: metric(sluice.metrics(), "grpc_calls_in_flight") == 1, 10,
                         "the call to be in flight")
                self.assertTrue(cancelled.cancel())
                with self.assertRaises(grpc.FutureCancelledError):
                    cancelled.result()
                expiring = stub.ShouldRateLimit.future(request("wide", [[("client", "x")]]),
                                                       timeout=0.4)
                with self.assertRaises(grpc.RpcError) as caught:
                    expiring.result()
                self.assertEqual(caught.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
                # Still serving while both decisions are outstanding (NOT_SERVING only if the
                # store has given up on the paused Redis meanwhile, see below).
                status = health.Check(health_pb2.HealthCheckRequest(service="ratelimit"),
                                      timeout=5).status
                self.assertIn(status, (health_pb2.HealthCheckResponse.SERVING,
                                       health_pb2.HealthCheckResponse.NOT_SERVING))
            finally:
                self.assertEqual(redis.command("CLIENT", "UNPAUSE"), "+OK")

            # Both calls are finished once Redis answers (or once the store gives up on it).
            wait_for(lambda: metric(sluice.metrics(), "grpc_calls_in_flight") == 0, 15,
                     "no call in flight")
            metrics = sluice.metrics()
            queued = metric(metrics, 'grpc_calls_cancelled_total{stage="queued"}')
            deciding = metric(metrics, 'grpc_calls_cancelled_total{stage="deciding"}')
            self.assertEqual(queued + deciding, 2, metrics)
            # The call with a 0.4 s deadline ends by the server's timer (DEADLINE_EXCEEDED)
            # or, when the client's own timer fires first and its RST_STREAM arrives before
            # the server's timer does (a loaded machine), as a cancel: either is right.
            cancelled_calls = metric(metrics, 'grpc_calls_total{code="CANCELLED"}')
            expired_calls = metric(metrics, 'grpc_calls_total{code="DEADLINE_EXCEEDED"}')
            self.assertIn(cancelled_calls, (1, 2), metrics)
            self.assertEqual(cancelled_calls + expired_calls, 2, metrics)
            self.assertEqual(metric(metrics, 'grpc_calls_total{code="OK"}'), 1, metrics)

            # The server goes on answering; each call given up on was charged at most once:
            # exactly once if it had reached Redis, unless the store dropped its connection
            # to the paused Redis (no reply for 1 s: only on a very slow machine, and logged)
            # before the script ran.
            wait_for(lambda: ready(sluice), 15, "sluice ready again")
            last = stub.ShouldRateLimit(request("wide", [[("client", "x")]]), timeout=5)
            self.assertEqual(last.overall_code, Code.OK)
            charged = 99 - 1 - last.statuses[0].limit_remaining
            if "-> failing" in sluice.log():
                self.assertLessEqual(charged, deciding)
            else:
                self.assertEqual(charged, deciding)
            self.assertIsNone(sluice.process.poll())
        finally:
            sluice.close()
            redis.close()


if __name__ == "__main__":
    unittest.main()

"""Kuadrant's limitador service (kuadrant.service.ratelimit.v1.RateLimitService: CheckRateLimit,
Report, Reserve, Commit) on Sluice's gRPC listener, through python grpcio with limitador's own
proto (proto/kuadrant/service/ratelimit/v1/kuadrantrls.proto), on the memory store and Redis.

Run with Debian's /usr/bin/python3 (see rls_support.py).
"""

import importlib
import time
import unittest

import grpc

from rls_support import Code, Redis, Sluice, generate_more_stubs, request

generate_more_stubs(["kuadrant/service/ratelimit/v1/kuadrantrls.proto"])
kuadrant_pb2 = importlib.import_module("kuadrant.service.ratelimit.v1.kuadrantrls_pb2")
kuadrant_pb2_grpc = importlib.import_module("kuadrant.service.ratelimit.v1.kuadrantrls_pb2_grpc")

RULES = {"llm.yaml": """domain: llm
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: calls
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: ip
    rate_limit:
      unit: minute
      requests_per_unit: 100
      algorithm: sketch
      sketch: {expected_requests: 1000}
"""}


def reserve(amount, user="u1", ttl_ms=None, key="user"):
    message = kuadrant_pb2.ReserveRequest(domain="llm", amount=amount)
    entry = message.descriptors.add().entries.add()
    entry.key, entry.value = key, user
    if ttl_ms is not None:
        message.ttl.FromMilliseconds(ttl_ms)
    return message


def commit(reservation_id, actual, user="u1"):
    message = kuadrant_pb2.CommitRequest(domain="llm", reservation_id=reservation_id,
                                         actual_amount=actual)
    entry = message.descriptors.add().entries.add()
    entry.key, entry.value = "user", user
    return message


class Kuadrant:
    store_args = ()

    def setUp(self):
        self.sluice = Sluice(RULES, args=list(self.store_args) + ["--max-reservation-ttl", "30s"])
        self.stub = kuadrant_pb2_grpc.RateLimitServiceStub(self.sluice.channel())

    def tearDown(self):
        self.sluice.close()

    def remaining(self, user="u1"):
        # A descriptor's own hits_addend 0 checks without charging (the request's 0 means 1).
        answer = self.stub.CheckRateLimit(
            request("llm", [{"entries": [("user", user)], "hits_addend": 0}]), timeout=5)
        return answer.statuses[0].limit_remaining

    def test_check_and_report(self):
        calls = request("llm", [[("calls", "c")]])
        for _ in range(3):
            self.assertEqual(self.stub.CheckRateLimit(calls, timeout=5).overall_code, Code.OK)
        self.assertEqual(self.stub.CheckRateLimit(calls, timeout=5).overall_code,
                         Code.OVER_LIMIT)
        tokens = request("llm", [[("user", "r")]], hits_addend=1500)
        answer = self.stub.Report(tokens, timeout=5)
        self.assertEqual(answer.overall_code, Code.OK)
        self.assertEqual(answer.statuses[0].limit_remaining, 0)
        self.assertEqual(self.stub.CheckRateLimit(request("llm", [[("user", "r")]]),
                                                  timeout=5).overall_code, Code.OVER_LIMIT)

    def test_reserve_and_commit(self):
        held = self.stub.Reserve(reserve(600, ttl_ms=20000), timeout=5)
        self.assertEqual(held.code, Code.OK)
        self.assertTrue(held.reservation_id.startswith("r1."))
        self.assertEqual(self.remaining(), 400)
        over = self.stub.Reserve(reserve(401), timeout=5)
        self.assertEqual(over.code, Code.OVER_LIMIT)
        self.assertEqual(over.reservation_id, "")
        done = self.stub.Commit(commit(held.reservation_id, 250), timeout=5)
        self.assertTrue(done.reservation_released)
        self.assertEqual(self.remaining(), 750)
        again = self.stub.Commit(commit(held.reservation_id, 250), timeout=5)
        self.assertFalse(again.reservation_released)
        self.assertEqual(self.remaining(), 750)

    def test_late_commit_is_a_report(self):
        held = self.stub.Reserve(reserve(900, ttl_ms=200), timeout=5)
        self.assertEqual(held.code, Code.OK)
        deadline = time.monotonic() + 5
        while self.remaining() != 1000:
            self.assertLess(time.monotonic(), deadline, "the hold did not expire")
            time.sleep(0.02)
        late = self.stub.Commit(commit(held.reservation_id, 950), timeout=5)
        self.assertFalse(late.reservation_released)
        self.assertEqual(self.remaining(), 50)

    def test_bad_calls(self):
        held = self.stub.Reserve(reserve(10), timeout=5)
        self.assertEqual(held.code, Code.OK)
        parts = held.reservation_id.split(".")
        unknown = ".".join([parts[0], parts[1], "0123456789abcdef", parts[3]])
        cases = [
            (self.stub.Reserve, reserve(0), grpc.StatusCode.INVALID_ARGUMENT, "amount"),
            (self.stub.Reserve, reserve(5, ttl_ms=-10), grpc.StatusCode.INVALID_ARGUMENT, "ttl"),
            (self.stub.Reserve, reserve(5, ttl_ms=31000), grpc.StatusCode.INVALID_ARGUMENT,
             "--max-reservation-ttl"),
            (self.stub.Reserve, reserve(5, "1.2.3.4", key="ip"), grpc.StatusCode.INVALID_ARGUMENT,
             "sketch limit"),
            (self.stub.Commit, commit(held.reservation_id, 5, user="u2"),
             grpc.StatusCode.INVALID_ARGUMENT, "was made for another"),
            (self.stub.Commit, commit("nonsense", 5), grpc.StatusCode.INVALID_ARGUMENT,
             "not a reservation id"),
            (self.stub.Commit, commit(held.reservation_id, 5000),
             grpc.StatusCode.INVALID_ARGUMENT, "larger than any matched limit"),
            (self.stub.Commit, commit(unknown, 5), grpc.StatusCode.NOT_FOUND, "holds nothing"),
        ]
        for method, message, code, words in cases:
            with self.assertRaises(grpc.RpcError) as caught:
                method(message, timeout=5)
            self.assertEqual(caught.exception.code(), code, (message, caught.exception.details()))
            self.assertIn(words, caught.exception.details())
        self.assertEqual(self.remaining(), 990)


class KuadrantOnMemory(Kuadrant, unittest.TestCase):
    pass


class KuadrantOnRedis(Kuadrant, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.redis = Redis()  # started, on a free port

    @classmethod
    def tearDownClass(cls):
        cls.redis.close()

    def setUp(self):
        self.redis.command("FLUSHALL")
        self.store_args = ("--store", "redis", "--redis", self.redis.url(),
                           "--redis-timeout-ms", "2000")
        super().setUp()


if __name__ == "__main__":
    unittest.main()

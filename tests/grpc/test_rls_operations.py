"""The gRPC server's life: health, exact counting under concurrent calls, drain on SIGTERM,
unix socket files (live ones never stolen, stale ones replaced, mode, removal), a port
held by another instance, calls past their deadline, connection age, reflection."""

import concurrent.futures
import os
import signal
import socket
import stat
import tempfile
import threading
import unittest

import grpc

from rls_support import (SHOULD_RATE_LIMIT_PATH, Code, RawHttp2, Redis, Sluice, free_port,
                         health_pb2, request, run_sluice, wait_for)

RULES = {
    "api.yaml": """domain: api
descriptors:
  - key: client
    rate_limit:
      name: per_client
      unit: hour
      requests_per_unit: 100
""",
}

Serving = health_pb2.HealthCheckResponse


def health_status(sluice, service, address=None):
    return sluice.health(address).Check(health_pb2.HealthCheckRequest(service=service),
                                        timeout=5).status


class Health(unittest.TestCase):
    def test_serving_for_ratelimit_and_the_empty_name(self):
        sluice = Sluice(RULES)
        try:
            self.assertEqual(health_status(sluice, "ratelimit"), Serving.SERVING)
            self.assertEqual(health_status(sluice, ""), Serving.SERVING)
            with self.assertRaises(grpc.RpcError) as caught:
                health_status(sluice, "something-else")
            self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)
        finally:
            sluice.close()

    def test_watch_sends_the_status_then_nothing_for_an_unknown_service(self):
        sluice = Sluice(RULES)
        try:
            watch = sluice.health().Watch(health_pb2.HealthCheckRequest(service="ratelimit"),
                                          timeout=10)
            self.assertEqual(next(watch).status, Serving.SERVING)
            watch.cancel()
            unknown = sluice.health().Watch(
                health_pb2.HealthCheckRequest(service="something-else"), timeout=1)
            self.assertEqual(next(unknown).status, Serving.SERVICE_UNKNOWN)
            # Nothing more comes: the call stays open until its deadline.
            with self.assertRaises(grpc.RpcError) as caught:
                next(unknown)
            self.assertEqual(caught.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        finally:
            sluice.close()

    def test_follows_the_store_health(self):
        # With --failure-mode closed the service cannot answer without Redis: NOT_SERVING,
        # like /readyz. (open and local keep answering, and stay SERVING.)
        redis = Redis()
        sluice = Sluice(RULES, args=["--store", "redis", "--redis", redis.url(),
                                     "--failure-mode", "closed"])
        try:
            wait_for(lambda: health_status(sluice, "ratelimit") == Serving.SERVING, 15,
                     "SERVING once connected to Redis")
            watch = sluice.health().Watch(health_pb2.HealthCheckRequest(service="ratelimit"),
                                          timeout=30)
            self.assertEqual(next(watch).status, Serving.SERVING)
            redis.kill()
            wait_for(lambda: health_status(sluice, "ratelimit") == Serving.NOT_SERVING, 15,
                     "NOT_SERVING after Redis went away")
            self.assertEqual(next(watch).status, Serving.NOT_SERVING)  # streamed on the change
            watch.cancel()
            self.assertEqual(health_status(sluice, ""), Serving.NOT_SERVING)
            redis.start()
            wait_for(lambda: health_status(sluice, "ratelimit") == Serving.SERVING, 20,
                     "SERVING after Redis came back")
        finally:
            sluice.close()
            redis.close()


class Counting(unittest.TestCase):
    # 8 client threads x 25 calls on one key with a limit of 100: exactly 100 allowed,
    # over two I/O threads, and the counter ends at the limit.
    def check_exact_counting(self, sluice):
        stubs = [sluice.stub() for _ in range(4)]

        def worker(index):
            stub = stubs[index % len(stubs)]
            codes = []
            for _ in range(25):
                codes.append(stub.ShouldRateLimit(
                    request("api", [[("client", "shared")]]), timeout=10).overall_code)
            return codes

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            codes = [c for result in pool.map(worker, range(8)) for c in result]
        self.assertEqual(codes.count(Code.OK), 100)
        self.assertEqual(codes.count(Code.OVER_LIMIT), 100)
        last = stubs[0].ShouldRateLimit(request("api", [[("client", "shared")]]), timeout=5)
        self.assertEqual(last.overall_code, Code.OVER_LIMIT)
        self.assertEqual(last.statuses[0].limit_remaining, 0)

    def test_concurrent_calls_are_counted_exactly(self):
        sluice = Sluice(RULES)
        try:
            self.check_exact_counting(sluice)
        finally:
            sluice.close()

    def test_concurrent_calls_are_counted_exactly_in_redis(self):
        # Each I/O thread has its own Redis connection: the script keeps the count exact.
        redis = Redis()
        sluice = Sluice(RULES, args=["--store", "redis", "--redis", redis.url(),
                                     "--redis-timeout-ms", "5000", "--failure-mode", "closed"])
        try:
            wait_for(lambda: health_status(sluice, "ratelimit") == Serving.SERVING, 15,
                     "SERVING once connected to Redis")
            self.check_exact_counting(sluice)
        finally:
            sluice.close()
            redis.close()


class Drain(unittest.TestCase):
    def test_sigterm_lets_a_running_call_finish(self):
        redis = Redis()
        # The store call of the running call is held up by a DEBUG SLEEP on the real Redis:
        # the Redis deadline is longer than the sleep, and the sleep shorter than the store's
        # stall timeout (1 s), so the call is answered, late. Should the machine be so slow
        # that the call is answered before SIGTERM, the test still holds (and proves less).
        sluice = Sluice(RULES, args=["--store", "redis", "--redis", redis.url(),
                                     "--redis-timeout-ms", "8000", "--failure-mode", "closed"])
        try:
            wait_for(lambda: health_status(sluice, "ratelimit") == Serving.SERVING, 15,
                     "SERVING once connected to Redis")
            stub = sluice.stub()
            self.assertEqual(stub.ShouldRateLimit(request("api", [[("client", "d")]]),
                                                  timeout=5).overall_code, Code.OK)
            sleeper = threading.Thread(target=self.debug_sleep, args=(redis.port, "0.7"))
            sleeper.start()
            wait_for(lambda: self.redis_sleeping(redis.port), 5, "Redis to sleep")
            future = stub.ShouldRateLimit.future(request("api", [[("client", "d")]]),
                                                 timeout=15)
            wait_for(lambda: 'grpc_calls_in_flight 1' in sluice.metrics(), 5,
                     "the call to be in flight")
            sluice.signal(signal.SIGTERM)
            response = future.result()
            self.assertEqual(response.overall_code, Code.OK)
            self.assertEqual(response.statuses[0].limit_remaining, 98)
            self.assertEqual(sluice.wait(20), 0)
            self.assertIn("draining", sluice.log())
            sleeper.join()
        finally:
            sluice.close()
            redis.close()

    @staticmethod
    def debug_sleep(port, seconds):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(("DEBUG SLEEP %s\r\n" % seconds).encode())
            s.recv(16)

    @staticmethod
    def redis_sleeping(port):
        # A PING that does not come back within 100 ms: the server is inside DEBUG SLEEP.
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.1) as s:
                s.sendall(b"PING\r\n")
                s.recv(16)
                return False
        except socket.timeout:
            return True


class UnixSocket(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sluice-grpc-uds-")
        self.path = os.path.join(self.dir, "rls.sock")

    def tearDown(self):
        if os.path.exists(self.path):
            os.unlink(self.path)
        os.rmdir(self.dir)

    def test_socket_file_has_the_mode_and_is_removed_on_exit(self):
        sluice = Sluice(RULES, grpc_listen=["unix:" + self.path],
                        args=["--grpc-unix-mode", "0600"])
        try:
            mode = os.stat(self.path).st_mode
            self.assertTrue(stat.S_ISSOCK(mode))
            self.assertEqual(stat.S_IMODE(mode), 0o600)
            response = sluice.stub().ShouldRateLimit(request("api", [[("client", "u")]]),
                                                     timeout=5)
            self.assertEqual(response.overall_code, Code.OK)
        finally:
            sluice.close()
        self.assertFalse(os.path.exists(self.path))

    def test_default_mode_is_0660(self):
        sluice = Sluice(RULES, grpc_listen=["unix:" + self.path])
        try:
            self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o660)
        finally:
            sluice.close()

    def test_a_live_socket_is_never_stolen(self):
        first = Sluice(RULES, grpc_listen=["unix:" + self.path])
        try:
            code, output = run_sluice(["--listen", "127.0.0.1:%d" % free_port(), "--rules",
                                       first.rules_dir, "--grpc-listen", "unix:" + self.path])
            self.assertEqual(code, 1, output)
            self.assertIn("another server is listening on it", output)
            # The first server still answers on its socket.
            response = first.stub().ShouldRateLimit(request("api", [[("client", "l")]]),
                                                    timeout=5)
            self.assertEqual(response.overall_code, Code.OK)
        finally:
            first.close()

    def test_a_stale_socket_is_replaced(self):
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(self.path)
        stale.close()  # the file stays, nobody listens: what a crashed server leaves
        sluice = Sluice(RULES, grpc_listen=["unix:" + self.path])
        try:
            response = sluice.stub().ShouldRateLimit(request("api", [[("client", "s")]]),
                                                     timeout=5)
            self.assertEqual(response.overall_code, Code.OK)
        finally:
            sluice.close()

    def test_a_file_that_is_not_a_socket_is_left_alone(self):
        with open(self.path, "w") as f:
            f.write("precious")
        code, output = run_sluice(["--listen", "127.0.0.1:%d" % free_port(), "--rules",
                                   os.path.join(os.environ.get("SLUICE_SOURCE_DIR", "."),
                                                "config", "rules"),
                                   "--grpc-listen", "unix:" + self.path])
        self.assertEqual(code, 1, output)
        self.assertIn("is not a socket", output)
        with open(self.path) as f:
            self.assertEqual(f.read(), "precious")


class SamePort(unittest.TestCase):
    def test_a_second_instance_on_the_same_port_fails_to_start(self):
        first = Sluice(RULES)
        try:
            code, output = run_sluice(["--listen", "127.0.0.1:%d" % free_port(), "--rules",
                                       first.rules_dir, "--grpc-listen",
                                       "127.0.0.1:%d" % first.grpc_port])
            self.assertEqual(code, 1, output)
            self.assertIn("--grpc-listen", output)
            response = first.stub().ShouldRateLimit(request("api", [[("client", "p")]]),
                                                    timeout=5)
            self.assertEqual(response.overall_code, Code.OK)
        finally:
            first.close()


class Deadline(unittest.TestCase):
    def test_a_call_whose_deadline_passed_before_its_request_came_is_not_charged(self):
        # The call's headers (grpc-timeout 50 ms) arrive, its request message only once the
        # server has ended the call at its deadline: nothing may be charged for it. (A call
        # that waits for an I/O thread past its deadline: tests/unit/grpc/rls_server_test.cpp.)
        sluice = Sluice(RULES)
        raw = RawHttp2(sluice.grpc_port)
        try:
            raw.send_headers(1, sluice.grpc_port, timeout_header="50m")
            ended = False
            while not ended:
                frame = raw.read_frame()  # each read waits at most 10 s
                self.assertIsNotNone(frame, "connection closed before the call ended")
                kind, flags, stream, _ = frame
                # Trailers (HEADERS with END_STREAM) or RST_STREAM end the call.
                ended = stream == 1 and ((kind == 1 and flags & 0x1) or kind == 3)
            raw.send_message(1, request("api", [[("client", "late")]]))
            # Frames of one connection are read in order: once the PING is acknowledged the
            # late message has been seen, and whatever it started is in flight.
            raw.sock.sendall(raw.frame(6, 0, 0, b"12345678"))
            while True:
                frame = raw.read_frame()
                self.assertIsNotNone(frame, "connection closed before the PING was answered")
                if frame[0] == 6 and frame[1] & 0x1:
                    break
            wait_for(lambda: "grpc_calls_in_flight 0\n" in sluice.metrics(), 10,
                     "no call in flight")
            response = sluice.stub().ShouldRateLimit(request("api", [[("client", "late")]]),
                                                     timeout=5)
            self.assertEqual(response.overall_code, Code.OK)
            self.assertEqual(response.statuses[0].limit_remaining, 99)
            self.assertIn('grpc_calls_total{code="OK"} 1\n', sluice.metrics())
        finally:
            raw.close()
            sluice.close()


class ConnectionAge(unittest.TestCase):
    def test_goaway_after_the_max_age_then_closed_after_the_grace(self):
        sluice = Sluice(RULES, args=["--grpc-max-connection-age-ms", "300",
                                     "--grpc-max-connection-age-grace-ms", "300"])
        raw = RawHttp2(sluice.grpc_port)
        try:
            kinds = []
            while True:
                frame = raw.read_frame()  # each read waits at most 10 s
                if frame is None:
                    break
                kinds.append(frame[0])
            self.assertIn(7, kinds, "no GOAWAY frame before the connection was closed")
            # A new connection is served as usual.
            response = sluice.stub().ShouldRateLimit(request("api", [[("client", "age")]]),
                                                     timeout=5)
            self.assertEqual(response.overall_code, Code.OK)
        finally:
            raw.close()
            sluice.close()


REFLECTION_PATH = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
# ServerReflectionRequest{list_services = 7: ""}, serialized by hand: tag 7/LEN, length 0.
LIST_SERVICES = b"\x3a\x00"


def list_services(sluice):
    call = sluice.channel().stream_stream(REFLECTION_PATH, request_serializer=None,
                                          response_deserializer=None)
    return b"".join(call(iter([LIST_SERVICES]), timeout=5))


class Reflection(unittest.TestCase):
    def test_off_by_default(self):
        sluice = Sluice(RULES)
        try:
            with self.assertRaises(grpc.RpcError) as caught:
                list_services(sluice)
            self.assertEqual(caught.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        finally:
            sluice.close()

    def test_lists_the_services_when_on(self):
        sluice = Sluice(RULES, args=["--grpc-reflection", "true"])
        try:
            answer = list_services(sluice)
            self.assertIn(b"envoy.service.ratelimit.v3.RateLimitService", answer)
            self.assertIn(b"grpc.health.v1.Health", answer)
        finally:
            sluice.close()


if __name__ == "__main__":
    unittest.main()

"""envoyproxy/ratelimit's container settings run Sluice unchanged: its environment
variables (RUNTIME_*, PORT, GRPC_PORT / GRPC_UDS, REDIS_*, LOG_LEVEL,
LIMIT_RESPONSE_HEADERS_ENABLED, ...) are mapped onto Sluice's flags, the mapping is logged
once, and a variable Sluice cannot honour is named at start-up."""

import os
import shutil
import subprocess
import tempfile
import unittest
import urllib.request

import grpc

from rls_support import (BINARY, Code, Redis, free_port, rls_pb2_grpc, request, wait_for)

RULES = """domain: rl
descriptors:
  - key: source_cluster
    value: proxy
    rate_limit:
      unit: minute
      requests_per_unit: 1
"""


class EnvoyEnvironment(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="sluice-envoy-env-")
        config = os.path.join(self.root, "current", "ratelimit", "config")
        os.makedirs(config)
        with open(os.path.join(config, "rl.yaml"), "w") as f:
            f.write(RULES)
        self.redis = Redis()
        self.process = None
        self.log_file = None

    def tearDown(self):
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.log_file is not None:
            self.log_file.close()
        self.redis.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def start(self, extra):
        """Starts sluice with envoy's variables and `extra`; a value of `extra` that is
        callable (free_port) is called at each attempt: a port picked free may be taken by a
        parallel test before sluice binds it, and such a start is retried on new ports. Returns
        the environment of the start that came up."""
        for attempt in range(4):
            env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
            env.update({
                "RUNTIME_ROOT": os.path.join(self.root, "current"),
                "RUNTIME_SUBDIRECTORY": "ratelimit",
                "RUNTIME_IGNOREDOTFILES": "true",
                "HOST": "127.0.0.1",
                "PORT": str(free_port()),
                "REDIS_SOCKET_TYPE": "tcp",
                "REDIS_URL": "127.0.0.1:%d" % self.redis.port,
                "LOG_LEVEL": "info",
                "USE_STATSD": "false",
            })
            env.update({k: str(v()) if callable(v) else v for k, v in extra.items()})
            self.http_port = int(env["PORT"])
            self.log_path = os.path.join(self.root, "sluice.log")
            if self.log_file is not None:
                self.log_file.close()
            self.log_file = open(self.log_path, "w")
            self.process = subprocess.Popen([BINARY], env=env, stdout=self.log_file,
                                            stderr=subprocess.STDOUT)
            try:
                wait_for(self.ready, 15, "sluice ready with envoy's variables")
                return env
            except AssertionError:
                if attempt == 3 or self.process.poll() is None or \
                        "Address already in use" not in self.log():
                    raise

    def ready(self):
        if self.process.poll() is not None:
            raise AssertionError("sluice exited:\n" + self.log())
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % self.http_port,
                                        timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def log(self):
        self.log_file.flush()
        with open(self.log_path) as f:
            return f.read()

    def test_tcp_grpc_redis_and_headers_switch(self):
        env = self.start({"GRPC_HOST": "127.0.0.1", "GRPC_PORT": free_port,
                          "LIMIT_RESPONSE_HEADERS_ENABLED": "false", "SHADOW_MODE": "true"})
        grpc_port = int(env["GRPC_PORT"])
        with grpc.insecure_channel("127.0.0.1:%d" % grpc_port) as channel:
            stub = rls_pb2_grpc.RateLimitServiceStub(channel)
            first = stub.ShouldRateLimit(request("rl", [[("source_cluster", "proxy")]]), timeout=5)
            second = stub.ShouldRateLimit(request("rl", [[("source_cluster", "proxy")]]),
                                          timeout=5)
        self.assertEqual(first.overall_code, Code.OK)
        self.assertEqual(second.overall_code, Code.OVER_LIMIT)
        self.assertEqual(len(first.response_headers_to_add), 0)  # switched off
        # The counter lives in the Redis of REDIS_URL.
        keys = subprocess.run(["redis-cli", "-p", str(self.redis.port), "--scan"],
                              stdout=subprocess.PIPE, check=True).stdout.decode()
        self.assertTrue(keys.strip(), "no key in Redis")
        log = self.log()
        mapping = [line for line in log.splitlines()
                   if "envoyproxy/ratelimit environment:" in line]
        self.assertEqual(len(mapping), 1, log)
        self.assertIn("-> --rules " + os.path.join(self.root, "current", "ratelimit", "config"),
                      mapping[0])
        self.assertIn("-> --grpc-listen 127.0.0.1:%d" % grpc_port, mapping[0])
        self.assertIn("-> --store redis", mapping[0])
        self.assertIn("not honoured: SHADOW_MODE=true", log)

    def test_grpc_uds(self):
        path = os.path.join(self.root, "ratelimit.sock")
        self.start({"GRPC_UDS": path})
        with grpc.insecure_channel("unix:" + path) as channel:
            stub = rls_pb2_grpc.RateLimitServiceStub(channel)
            response = stub.ShouldRateLimit(request("rl", [[("source_cluster", "proxy")]]),
                                            timeout=5)
        self.assertEqual(response.overall_code, Code.OK)
        self.assertEqual(oct(os.stat(path).st_mode & 0o777), oct(0o660))


if __name__ == "__main__":
    unittest.main()

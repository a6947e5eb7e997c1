"""Rules over xDS (docs/envoy.md, "Rules over xDS"): the real sluice binary with --rules-xds
against a real xDS management server (xds_server.py) over a real gRPC stream, deciding over
gRPC (ShouldRateLimit) with the memory store, Redis and a Redis Cluster."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import grpc
import yaml

from rls_support import (BINARY, SOURCE_DIR, Code, Redis, RedisCluster, free_port,
                         health_pb2, health_pb2_grpc, in_one_window, rls_pb2_grpc, request,
                         wait_for)
from xds_server import TYPE_URL, XdsServer, config_from_yaml, rls_conf_pb2, discovery_pb2

UNIT = rls_conf_pb2.RateLimitUnit


def policy(domain, limits, name=None):
    """A RateLimitConfig with one top-level descriptor per (key, value, requests_per_minute)."""
    config = rls_conf_pb2.RateLimitConfig(name=name or domain, domain=domain)
    for key, value, per_minute in limits:
        d = config.descriptors.add(key=key, value=value)
        d.rate_limit.unit = UNIT.MINUTE
        d.rate_limit.requests_per_unit = per_minute
    return config


class SluiceXds:
    """sluice --rules-xds against `xds` (an XdsServer), HTTP and gRPC on free ports."""

    def __init__(self, xds_address, args=(), env=None):
        self.dir = tempfile.mkdtemp(prefix="sluice-xds-")
        self.log_path = os.path.join(self.dir, "sluice.log")
        self.log_file = None
        # A port picked free may be taken by a parallel test before sluice binds it: such a
        # start is retried on new ports (only when the log says so, and only a few times).
        for attempt in range(4):
            self.launch(xds_address, args, env)
            try:
                wait_for(self.alive, 15, "sluice to answer /healthz")
                return
            except AssertionError:
                if attempt == 3 or self.process.poll() is None or \
                        "Address already in use" not in self.log():
                    raise
                self.channel.close()

    def launch(self, xds_address, args, env):
        self.http_port = free_port()
        self.grpc_port = free_port()
        if self.log_file is not None:
            self.log_file.close()
        self.log_file = open(self.log_path, "w")
        command = [BINARY, "--listen", "127.0.0.1:%d" % self.http_port,
                   "--grpc-listen", "127.0.0.1:%d" % self.grpc_port, "--threads", "2"]
        if xds_address:
            command += ["--rules-xds", xds_address]
        command += ["--xds-backoff-initial-ms", "100", "--xds-backoff-max-ms", "400"]
        command += list(args)
        environment = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
        environment.update(env or {})
        self.process = subprocess.Popen(command, stdout=self.log_file, stderr=subprocess.STDOUT,
                                        env=environment)
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % self.grpc_port)

    def alive(self):
        if self.process.poll() is not None:
            raise AssertionError("sluice exited with %s:\n%s" % (self.process.returncode,
                                                                 self.log()))
        try:
            return self.get("/healthz")[0] == 200
        except OSError:
            return False

    def get(self, path, port=None):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port or self.http_port, path),
                                        timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def readyz(self):
        status, body = self.get("/readyz")
        return status, json.loads(body)

    def rules_version(self):
        status, body = self.readyz()
        return body.get("rules_version") if status == 200 else None

    def wait_version(self, version, timeout=10.0):
        wait_for(lambda: self.rules_version() == version, timeout,
                 "rules version %r in /readyz (log:\n%s)" % (version, self.log()))

    def decide(self, domain, entries):
        stub = rls_pb2_grpc.RateLimitServiceStub(self.channel)
        return stub.ShouldRateLimit(request(domain, [entries]), timeout=5).overall_code

    def health(self):
        stub = health_pb2_grpc.HealthStub(self.channel)
        return stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status

    def metric(self, name):
        for line in self.get("/metrics")[1].splitlines():
            if line.startswith("sluice_" + name + " ") or line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
        return None

    def log(self):
        self.log_file.flush()
        with open(self.log_path) as f:
            return f.read()

    def close(self):
        self.channel.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log_file.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class XdsCase(unittest.TestCase):
    store_args = ()

    def setUp(self):
        self.xds = XdsServer()
        self.sluice = None

    def tearDown(self):
        if self.sluice is not None:
            self.sluice.close()
        self.xds.close()

    def start(self, args=(), env=None):
        self.sluice = SluiceXds("127.0.0.1:%d" % self.xds.port, list(self.store_args) + list(args),
                                env)
        return self.sluice

    def acked(self, version):
        return self.xds.wait_request(
            lambda r: r.version_info == version and r.response_nonce and
            not r.HasField("error_detail"), what="the ACK of " + version)

    def nacked(self, nonce):
        return self.xds.wait_request(
            lambda r: r.response_nonce == nonce and r.HasField("error_detail"),
            what="the NACK of " + nonce)


class FirstSetAndUpdates(XdsCase):
    """The protocol and the decisions, on the memory store; the Redis classes below rerun it."""

    def test_not_ready_until_the_first_set_then_deciding(self):
        s = self.start(["--xds-node-id", "envoy-ratelimit", "--xds-node-metadata",
                        "cluster=gw,zone=z1"])
        first = self.xds.wait_request(lambda r: True, what="the first DiscoveryRequest")
        self.assertEqual(first.type_url, TYPE_URL)
        self.assertEqual(first.node.id, "envoy-ratelimit")
        self.assertEqual(first.node.metadata.fields["cluster"].string_value, "gw")
        self.assertEqual(first.node.metadata.fields["zone"].string_value, "z1")
        self.assertEqual(first.version_info, "")
        self.assertEqual(s.readyz()[0], 503)
        wait_for(lambda: s.health() == health_pb2.HealthCheckResponse.NOT_SERVING, 5,
                 "gRPC health NOT_SERVING")
        self.xds.set_snapshot("v1", [policy("gw", [("route", "r1", 2)])])
        self.acked("v1")
        s.wait_version("v1")
        wait_for(lambda: s.health() == health_pb2.HealthCheckResponse.SERVING, 5,
                 "gRPC health SERVING")
        codes = [s.decide("gw", [("route", "r1")]) for _ in range(3)]
        self.assertEqual(codes, [Code.OK, Code.OK, Code.OVER_LIMIT])
        self.assertEqual(s.metric('rules_xds_connected'), 1)
        self.assertIn("rules: loaded xDS version 'v1'", s.log())
        _, rules = s.get("/rules")
        self.assertEqual(json.loads(rules)["version"], "v1")

    def test_update_applied_within_a_second_keeping_unchanged_counters(self):
        s = self.start()
        self.xds.set_snapshot("v1", [policy("gw", [("route", "a", 2), ("route", "b", 5)])])
        s.wait_version("v1")
        self.assertEqual(s.decide("gw", [("route", "a")]), Code.OK)
        pushed = time.monotonic()
        self.xds.set_snapshot("v2", [policy("gw", [("route", "a", 2), ("route", "b", 1)])])
        s.wait_version("v2", timeout=1.0)
        self.assertLess(time.monotonic() - pushed, 1.0)
        # route=a did not change: its counter (1 of 2 used) is kept.
        self.assertEqual(s.decide("gw", [("route", "a")]), Code.OK)
        self.assertEqual(s.decide("gw", [("route", "a")]), Code.OVER_LIMIT)
        # route=b is now 1 per minute.
        self.assertEqual(s.decide("gw", [("route", "b")]), Code.OK)
        self.assertEqual(s.decide("gw", [("route", "b")]), Code.OVER_LIMIT)
        self.assertEqual(s.metric('rules_xds_updates_total{result="accepted"}'), 2)

    def test_a_bad_set_is_nacked_with_the_validators_message_and_the_old_set_stays(self):
        s = self.start()
        self.xds.set_snapshot("v1", [policy("gw", [("route", "a", 1)])])
        s.wait_version("v1")
        bad = policy("gw", [("route", "a", 1)], name="gw/policy")
        inner = bad.descriptors[0].descriptors.add(key="user")
        inner.rate_limit.unit = UNIT.UNKNOWN
        inner.rate_limit.requests_per_unit = 3
        [nonce] = self.xds.set_snapshot("v2", [bad])
        nack = self.nacked(nonce)
        self.assertEqual(nack.version_info, "v1")
        self.assertEqual(nack.error_detail.message,
                         'RateLimitConfig "gw/policy" descriptors[0].descriptors[0].rate_limit.'
                         "unit: invalid unit 'UNKNOWN' (expected second, minute, hour, day, "
                         "week, month or year)")
        self.assertEqual(s.rules_version(), "v1")
        self.assertEqual(s.decide("gw", [("route", "a")]), Code.OK)
        self.assertEqual(s.decide("gw", [("route", "a")]), Code.OVER_LIMIT)
        self.assertEqual(s.metric('rules_xds_updates_total{result="rejected"}'), 1)
        self.assertIn("xDS version 'v2'", s.log())

    def test_reconnects_after_the_server_restarts_and_resubscribes_with_its_version(self):
        s = self.start()
        self.xds.set_snapshot("v1", [policy("gw", [("route", "a", 1)])])
        s.wait_version("v1")
        self.acked("v1")
        self.xds.kill()
        wait_for(lambda: s.metric("rules_xds_connected") == 0, 10, "the stream to break")
        # Still deciding with v1 while disconnected.
        self.assertEqual(s.decide("gw", [("route", "a")]), Code.OK)
        self.assertEqual(s.decide("gw", [("route", "a")]), Code.OVER_LIMIT)
        self.assertEqual(s.readyz()[0], 200)
        restarted = XdsServer(port=self.xds.port)
        self.xds = restarted
        restarted.set_snapshot("v3", [policy("gw", [("route", "a", 5)])])
        first = restarted.wait_request(lambda r: True, timeout=15, what="the re-subscription")
        self.assertEqual(first.version_info, "v1")
        self.assertEqual(first.node.id, "default")
        s.wait_version("v3", timeout=15)
        self.assertEqual(s.metric("rules_xds_connected"), 1)

    def test_bad_input_is_nacked_with_a_reason_never_half_applied(self):
        s = self.start()
        self.xds.set_snapshot("v1", [policy("gw", [("route", "a", 1)])])
        s.wait_version("v1")
        self.acked("v1")

        def nack_of(message):
            self.xds.push_raw(message)
            return self.nacked(message.nonce).error_detail.message

        wrong_type = discovery_pb2.DiscoveryResponse(
            version_info="t", type_url="type.googleapis.com/envoy.config.cluster.v3.Cluster",
            nonce="bad-type")
        self.assertIn("expected 'type.googleapis.com/ratelimit.config.ratelimit.v3."
                      "RateLimitConfig'", nack_of(wrong_type))

        garbage = discovery_pb2.DiscoveryResponse(version_info="g", type_url=TYPE_URL,
                                                  nonce="bad-bytes")
        any_ = garbage.resources.add()
        any_.type_url = TYPE_URL
        any_.value = b"\xff\xff\xff\xff"
        self.assertEqual(nack_of(garbage),
                         "resources[0] does not parse as a RateLimitConfig (4 bytes)")

        duplicate = discovery_pb2.DiscoveryResponse(version_info="d", type_url=TYPE_URL,
                                                    nonce="dup-domain")
        duplicate.resources.add().Pack(policy("gw", [("route", "a", 9)], name="one"))
        duplicate.resources.add().Pack(policy("gw", [("route", "b", 9)], name="two"))
        self.assertIn('duplicate domain \'gw\' (already defined at RateLimitConfig "one")',
                      nack_of(duplicate))

        # 4 MiB of descriptors: more than the loader's 100,000 per resource.
        huge = rls_conf_pb2.RateLimitConfig(name="huge", domain="huge")
        for i in range(200000):  # 21 bytes each
            d = huge.descriptors.add(key="k", value="v%07d" % i)
            d.rate_limit.unit = UNIT.SECOND
            d.rate_limit.requests_per_unit = 1
        big = discovery_pb2.DiscoveryResponse(version_info="big", type_url=TYPE_URL,
                                              nonce="four-mib")
        big.resources.add().Pack(huge)
        self.assertGreaterEqual(big.ByteSize(), 4 << 20)
        self.assertIn("more than 100000 descriptors and limits in one resource", nack_of(big))

        # None of them was applied, not even in part.
        self.assertEqual(s.rules_version(), "v1")
        self.assertEqual(s.decide("gw", [("route", "a")]), Code.OK)
        self.assertEqual(s.decide("gw", [("route", "a")]), Code.OVER_LIMIT)
        self.assertEqual(s.decide("gw", [("route", "b")]), Code.OK)  # no rule: allowed
        self.assertEqual(s.metric('rules_xds_updates_total{result="rejected"}'), 4)
        self.assertEqual(s.process.poll(), None)

        # 10,000 descriptors are a valid set, applied whole.
        many = rls_conf_pb2.RateLimitConfig(name="many", domain="gw")
        for i in range(10000):
            d = many.descriptors.add(key="user", value="u%d" % i)
            d.rate_limit.unit = UNIT.MINUTE
            d.rate_limit.requests_per_unit = 1
        self.xds.set_snapshot("v10k", [many])
        s.wait_version("v10k")
        self.assertEqual(s.decide("gw", [("user", "u9999")]), Code.OK)
        self.assertEqual(s.decide("gw", [("user", "u9999")]), Code.OVER_LIMIT)


class ForceStart(XdsCase):
    def test_force_start_serves_with_no_rules_before_the_first_set(self):
        self.xds.kill()  # no management server at all
        s = self.start(["--force-start-without-initial-config", "true"])
        status, body = s.readyz()
        self.assertEqual(status, 200, body)
        self.assertEqual(body["rules_version"], "")
        self.assertEqual(s.decide("gw", [("route", "a")]), Code.OK)

    def test_without_force_start_not_ready_until_the_first_set(self):
        self.xds.kill()
        s = self.start(["--force-start-without-initial-config", "false"])
        time.sleep(0.3)  # a few reconnection attempts (100 ms backoff) have failed by now
        self.assertEqual(s.readyz()[0], 503)
        self.assertEqual(s.process.poll(), None)


class EnvoyGatewayOutputs(XdsCase):
    """Envoy Gateway's translator outputs (tests/data/envoy_gateway) served over xDS."""

    def test_every_file_is_accepted_and_decides(self):
        s = self.start()
        directory = os.path.join(SOURCE_DIR, "tests", "data", "envoy_gateway")
        names = sorted(n for n in os.listdir(directory)
                       if n.endswith(".yaml") and not n.endswith(".routes.yaml"))
        self.assertEqual(len(names), 26)
        for index, name in enumerate(names):
            with open(os.path.join(directory, name)) as f:
                configs = [config_from_yaml(doc) for doc in yaml.safe_load_all(f)]
            version = "eg-%d" % index
            self.xds.set_snapshot(version, configs)
            s.wait_version(version)
        # One decided through: distinct-match's route sends the user's header value.
        with open(os.path.join(directory, "distinct-match.yaml")) as f:
            configs = [config_from_yaml(doc) for doc in yaml.safe_load_all(f)]
        self.xds.set_snapshot("distinct", configs)
        s.wait_version("distinct")
        entries = [("first-route", "first-route"), ("rule-0-match-0", "user-1")]
        # 5 a second: the six calls within one second.
        codes = in_one_window(lambda: [s.decide("first-listener", entries) for _ in range(6)])
        self.assertEqual(codes, [Code.OK] * 5 + [Code.OVER_LIMIT])


class Tls(unittest.TestCase):
    """The xDS client over TLS, certificates made by openssl here."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sluice-xds-tls-")

        def run(*args):
            subprocess.run(["openssl"] + list(args), check=True, cwd=cls.dir,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        for ca in ("ca", "other-ca"):
            run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                "/CN=" + ca, "-keyout", ca + ".key", "-out", ca + ".crt")
        for name, cn, ca in (("server", "envoy-gateway", "ca"), ("client", "envoy-ratelimit", "ca")):
            run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + cn, "-keyout",
                name + ".key", "-out", name + ".csr")
            with open(os.path.join(cls.dir, name + ".ext"), "w") as f:
                f.write("subjectAltName=DNS:%s\n" % cn)
            run("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
                "-CAcreateserial", "-days", "2", "-extfile", name + ".ext", "-out", name + ".crt")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()

    def setUp(self):
        self.sluice = None
        self.xds = XdsServer(tls=(self.read("server.key"), self.read("server.crt"),
                                  self.read("ca.crt")))
        self.xds.set_snapshot("v1", [policy("gw", [("route", "a", 1)])])

    def tearDown(self):
        if self.sluice is not None:
            self.sluice.close()
        self.xds.close()

    def test_mutual_tls_with_the_servers_name(self):
        self.sluice = SluiceXds("127.0.0.1:%d" % self.xds.port, [
            "--xds-tls", "true", "--xds-tls-ca", self.path("ca.crt"), "--xds-tls-cert",
            self.path("client.crt"), "--xds-tls-key", self.path("client.key"),
            "--xds-tls-server-name", "envoy-gateway"])
        self.sluice.wait_version("v1")

    def test_refuses_a_server_certificate_from_another_ca(self):
        self.sluice = SluiceXds("127.0.0.1:%d" % self.xds.port, [
            "--xds-tls", "true", "--xds-tls-ca", self.path("other-ca.crt"), "--xds-tls-cert",
            self.path("client.crt"), "--xds-tls-key", self.path("client.key"),
            "--xds-tls-server-name", "envoy-gateway"])
        wait_for(lambda: (self.sluice.metric("rules_xds_stream_failures_total") or 0) >= 2, 10,
                 "failed attempts")
        self.assertEqual(self.sluice.readyz()[0], 503)
        self.assertEqual(self.sluice.metric('rules_xds_updates_total{result="accepted"}'), 0)

    def test_refuses_a_server_whose_name_does_not_match(self):
        self.sluice = SluiceXds("127.0.0.1:%d" % self.xds.port, [
            "--xds-tls", "true", "--xds-tls-ca", self.path("ca.crt"), "--xds-tls-cert",
            self.path("client.crt"), "--xds-tls-key", self.path("client.key"),
            "--xds-tls-server-name", "someone-else"])
        wait_for(lambda: (self.sluice.metric("rules_xds_stream_failures_total") or 0) >= 2, 10,
                 "failed attempts")
        self.assertEqual(self.sluice.readyz()[0], 503)

    def test_a_missing_ca_file_stops_the_start_naming_it(self):
        done = subprocess.run([BINARY, "--rules-xds", "127.0.0.1:%d" % self.xds.port,
                               "--listen", "127.0.0.1:%d" % free_port(), "--xds-tls", "true",
                               "--xds-tls-ca", self.path("missing.crt")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
        self.assertEqual(done.returncode, 1)
        self.assertIn("--xds-tls-ca %s: cannot be read" % self.path("missing.crt"),
                      done.stdout.decode())


def make_certificates(directory):
    """A CA, a server certificate (CN/SAN envoy-gateway), a client certificate
    (envoy-ratelimit) and another CA, made by openssl in `directory`."""
    def run(*args):
        subprocess.run(["openssl"] + list(args), check=True, cwd=directory,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    for ca in ("ca", "other-ca"):
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=" + ca, "-keyout", ca + ".key", "-out", ca + ".crt")
    for name, cn in (("server", "envoy-gateway"), ("client", "envoy-ratelimit")):
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + cn, "-keyout",
            name + ".key", "-out", name + ".csr")
        with open(os.path.join(directory, name + ".ext"), "w") as f:
            f.write("subjectAltName=DNS:%s\n" % cn)
        run("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", name + ".ext", "-out", name + ".crt")


class EnvoyGatewayEnvironment(unittest.TestCase):
    """The environment Envoy Gateway's controller writes (envoyproxy/gateway
    internal/infrastructure/kubernetes/ratelimit, testdata deployments/default.yaml), verbatim
    but for what points at this machine: the xDS server's address, the certificate paths, the
    Redis address and the metrics port (free ports instead of :19001)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sluice-eg-env-")
        make_certificates(self.dir)
        # Envoy Gateway mounts one certificate for both sides: tls.crt/tls.key signed by ca.crt.
        self.certs = os.path.join(self.dir, "certs")
        os.mkdir(self.certs)
        shutil.copy(os.path.join(self.dir, "client.crt"), os.path.join(self.certs, "tls.crt"))
        shutil.copy(os.path.join(self.dir, "client.key"), os.path.join(self.certs, "tls.key"))
        shutil.copy(os.path.join(self.dir, "ca.crt"), os.path.join(self.certs, "ca.crt"))

        def read(name):
            with open(os.path.join(self.dir, name), "rb") as f:
                return f.read()

        self.xds = XdsServer(tls=(read("server.key"), read("server.crt"), read("ca.crt")))
        self.redis = Redis()
        self.sluice = None

    def tearDown(self):
        if self.sluice is not None:
            self.sluice.close()
        self.xds.close()
        self.redis.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_loads_its_rules_over_mutual_tls_and_decides(self):
        metrics_port = free_port()
        env = {
            "RUNTIME_ROOT": "/data",
            "RUNTIME_SUBDIRECTORY": "ratelimit",
            "RUNTIME_IGNOREDOTFILES": "true",
            "RUNTIME_WATCH_ROOT": "false",
            "LOG_LEVEL": "info",
            "USE_STATSD": "false",
            "CONFIG_TYPE": "GRPC_XDS_SOTW",
            "CONFIG_GRPC_XDS_SERVER_URL": "localhost:%d" % self.xds.port,
            "CONFIG_GRPC_XDS_NODE_ID": "envoy-ratelimit",
            "GRPC_SERVER_USE_TLS": "true",
            "GRPC_SERVER_TLS_CERT": os.path.join(self.certs, "tls.crt"),
            "GRPC_SERVER_TLS_KEY": os.path.join(self.certs, "tls.key"),
            "GRPC_SERVER_TLS_CA_CERT": os.path.join(self.certs, "ca.crt"),
            "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true",
            "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": os.path.join(self.certs, "tls.crt"),
            "CONFIG_GRPC_XDS_CLIENT_TLS_KEY": os.path.join(self.certs, "tls.key"),
            "CONFIG_GRPC_XDS_SERVER_TLS_CACERT": os.path.join(self.certs, "ca.crt"),
            "FORCE_START_WITHOUT_INITIAL_CONFIG": "true",
            "REDIS_SOCKET_TYPE": "tcp",
            "REDIS_URL": "127.0.0.1:%d" % self.redis.port,
            "USE_PROMETHEUS": "true",
            "PROMETHEUS_ADDR": ":%d" % metrics_port,
            "PROMETHEUS_MAPPER_YAML": "/etc/statsd-exporter/conf.yaml",
        }
        # The server's certificate names envoy-gateway, as Envoy Gateway's does: the SAN is
        # the name Sluice checks (Envoy Gateway's URL is envoy-gateway:18001).
        env["CONFIG_GRPC_XDS_SERVER_TLS_SAN"] = "envoy-gateway"
        self.sluice = SluiceXds(None, env=env)
        s = self.sluice
        # FORCE_START_WITHOUT_INITIAL_CONFIG: ready with no rules (once Redis is connected).
        wait_for(lambda: s.readyz()[0] == 200, 10, "ready before any rule set")
        self.assertEqual(s.readyz()[1]["rules_version"], "")
        log = s.log()
        self.assertIn("CONFIG_TYPE=GRPC_XDS_SOTW + CONFIG_GRPC_XDS_SERVER_URL=localhost:%d -> "
                      "--rules-xds localhost:%d" % (self.xds.port, self.xds.port), log)
        self.assertIn("not honoured: PROMETHEUS_MAPPER_YAML", log)
        self.assertNotIn("not honoured: CONFIG_", log)
        self.assertNotIn("not honoured: USE_PROMETHEUS", log)
        with open(os.path.join(SOURCE_DIR, "tests", "data", "envoy_gateway",
                               "distinct-match.yaml")) as f:
            configs = [config_from_yaml(doc) for doc in yaml.safe_load_all(f)]
        self.xds.set_snapshot("eg-1", configs)
        s.wait_version("eg-1")
        first = self.xds.wait_request(lambda r: True)
        self.assertEqual(first.node.id, "envoy-ratelimit")
        # Metrics where Envoy Gateway's Prometheus scrapes them.
        status, text = s.get("/metrics", port=metrics_port)
        self.assertEqual(status, 200)
        self.assertIn("rules_xds_connected 1", text)
        # Envoy's ShouldRateLimit over TLS (GRPC_SERVER_USE_TLS with the mounted certificate;
        # Envoy Gateway's GRPC_SERVER_TLS_CA_CERT is not envoy's variable: no client
        # certificate is asked for, one is presented all the same, as Envoy does).
        self.assertIn("-> --grpc-tls-cert", log)
        self.assertNotIn("not honoured: GRPC_SERVER_USE_TLS", log)
        with self.assertRaises(grpc.RpcError):  # plaintext is refused
            plain = grpc.insecure_channel("127.0.0.1:%d" % s.grpc_port)
            try:
                rls_pb2_grpc.RateLimitServiceStub(plain).ShouldRateLimit(
                    request("first-listener", [[("first-route", "first-route")]]), timeout=2)
            finally:
                plain.close()
        credentials = grpc.ssl_channel_credentials(
            root_certificates=open(os.path.join(self.dir, "ca.crt"), "rb").read(),
            private_key=open(os.path.join(self.dir, "client.key"), "rb").read(),
            certificate_chain=open(os.path.join(self.dir, "client.crt"), "rb").read())
        channel = grpc.secure_channel(
            "127.0.0.1:%d" % s.grpc_port, credentials,
            options=[("grpc.ssl_target_name_override", "envoy-ratelimit")])
        grpc.channel_ready_future(channel).result(timeout=10)  # the TLS handshake done
        stub = rls_pb2_grpc.RateLimitServiceStub(channel)
        entries = [("first-route", "first-route"), ("rule-0-match-0", "user-1")]
        # 5 a second: the six calls within one second.
        codes = in_one_window(lambda: [
            stub.ShouldRateLimit(request("first-listener", [entries]), timeout=5).overall_code
            for _ in range(6)])
        channel.close()
        self.assertEqual(codes, [Code.OK] * 5 + [Code.OVER_LIMIT])
        # The counters are in Redis.
        self.assertNotEqual(self.redis.command("DBSIZE"), ":0")


class OnRedis(FirstSetAndUpdates):
    """The same cases with the counters in Redis."""

    def setUp(self):
        self.redis = Redis()
        # A loaded test machine may miss the default 20 ms: correctness here, not latency.
        self.store_args = ("--store", "redis", "--redis", self.redis.url(),
                           "--redis-timeout-ms", "2000")
        super().setUp()

    def tearDown(self):
        super().tearDown()
        self.redis.close()


class OnRedisCluster(FirstSetAndUpdates):
    """The same cases with the counters in a Redis Cluster."""

    @classmethod
    def setUpClass(cls):
        cls.cluster = RedisCluster()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def setUp(self):
        for port in self.cluster.ports:
            self.cluster.cli(port, "FLUSHALL")
        self.store_args = ("--store", "redis_cluster", "--redis", self.cluster.url(),
                           "--redis-timeout-ms", "2000")  # as OnRedis: a loaded machine
        super().setUp()


if __name__ == "__main__":
    unittest.main()

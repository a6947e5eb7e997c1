"""TLS and mutual TLS on the gRPC listener, with certificates made by openssl for each run:
a client trusting the CA is served (decisions and health on the same port); with a client
CA, a client without a certificate, with one from another CA, or with the wrong SAN is
refused; certificates rotated on disk under load lose no call and reach new connections;
a bad file at start-up is an error naming it; envoyproxy/ratelimit's variables work."""

import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
import unittest

import grpc

from rls_support import (Code, Sluice, health_pb2, health_pb2_grpc, rls_pb2_grpc, request,
                         run_sluice, wait_for)

RULES = {
    "api.yaml": """domain: api
descriptors:
  - key: client
    rate_limit:
      name: per_client
      unit: hour
      requests_per_unit: 1000000
""",
}


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


class Pki:
    """A CA and certificates signed by it, in a temporary directory."""

    def __init__(self, directory, name):
        self.dir = directory
        self.name = name
        self.ca_key = self.path("ca.key")
        self.ca = self.path("ca.crt")
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", self.ca_key, "-out", self.ca, "-days", "2",
                "-subj", "/CN=%s test CA" % name)

    def path(self, file):
        return os.path.join(self.dir, "%s-%s" % (self.name, file))

    def issue(self, label, san):
        """(certificate, key) files of a leaf with subjectAltName `san` (e.g. DNS:a,IP:b)."""
        key, csr, cert = self.path(label + ".key"), self.path(label + ".csr"), \
            self.path(label + ".crt")
        ext = self.path(label + ".ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\n" % san)
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", key, "-out", csr, "-subj", "/CN=%s" % label)
        openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self.ca_key,
                "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext)
        return cert, key


def read(path):
    with open(path, "rb") as f:
        return f.read()


class TlsCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sluice-tls-")
        cls.pki = Pki(cls.dir, "main")
        cls.other = Pki(cls.dir, "other")
        cls.server_cert, cls.server_key = cls.pki.issue("server", "DNS:localhost,IP:127.0.0.1")
        cls.envoy_cert, cls.envoy_key = cls.pki.issue("envoy", "DNS:envoy.example")
        cls.stranger_cert, cls.stranger_key = cls.pki.issue("stranger", "DNS:stranger.example")
        cls.foreign_cert, cls.foreign_key = cls.other.issue("envoy", "DNS:envoy.example")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def channel(self, sluice, cert=None, key=None, root=None):
        credentials = grpc.ssl_channel_credentials(
            root_certificates=read(root or self.pki.ca),
            private_key=read(key) if key else None,
            certificate_chain=read(cert) if cert else None)
        channel = grpc.secure_channel("127.0.0.1:%d" % sluice.grpc_port, credentials,
                                      options=[("grpc.ssl_target_name_override", "localhost")])
        sluice.channels.append(channel)
        return channel

    def start(self, *tls_args, env=None):
        sluice = Sluice(RULES, args=list(tls_args), env=env, wait=False)
        wait_for(lambda: "gRPC rate limit service" in sluice.log() or
                 sluice.process.poll() is not None, 15, "sluice to start")
        self.assertIsNone(sluice.process.poll(), sluice.log())
        return sluice

    def decide(self, channel, client="a"):
        stub = rls_pb2_grpc.RateLimitServiceStub(channel)
        return stub.ShouldRateLimit(request("api", [[("client", client)]]), timeout=5)


class ServerTls(TlsCase):
    def test_decisions_and_health_over_tls(self):
        sluice = self.start("--grpc-tls-cert", self.server_cert, "--grpc-tls-key", self.server_key)
        try:
            channel = self.channel(sluice)
            self.assertEqual(self.decide(channel).overall_code, Code.OK)
            health = health_pb2_grpc.HealthStub(channel)
            status = health.Check(health_pb2.HealthCheckRequest(service="ratelimit"), timeout=5)
            self.assertEqual(status.status, health_pb2.HealthCheckResponse.SERVING)
            # A plaintext client gets nothing.
            with grpc.insecure_channel("127.0.0.1:%d" % sluice.grpc_port) as plain:
                with self.assertRaises(grpc.RpcError) as caught:
                    self.decide(plain)
                self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)
        finally:
            sluice.close()

    def test_a_client_that_does_not_trust_the_server_is_refused(self):
        sluice = self.start("--grpc-tls-cert", self.server_cert, "--grpc-tls-key", self.server_key)
        try:
            with self.assertRaises(grpc.RpcError) as caught:
                self.decide(self.channel(sluice, root=self.other.ca))
            self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)
        finally:
            sluice.close()


class MutualTls(TlsCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.sluice = Sluice(RULES, wait=False, args=[
            "--grpc-tls-cert", cls.server_cert, "--grpc-tls-key", cls.server_key,
            "--grpc-tls-client-ca", cls.pki.ca, "--grpc-tls-client-san", "envoy.example"])
        wait_for(lambda: "gRPC rate limit service" in cls.sluice.log(), 15, "sluice to start")

    @classmethod
    def tearDownClass(cls):
        cls.sluice.close()
        super().tearDownClass()

    def refused(self, **credentials):
        with self.assertRaises(grpc.RpcError) as caught:
            self.decide(self.channel(self.sluice, **credentials))
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)

    def test_a_client_with_a_certificate_of_the_ca_and_the_san_is_served(self):
        channel = self.channel(self.sluice, cert=self.envoy_cert, key=self.envoy_key)
        self.assertEqual(self.decide(channel).overall_code, Code.OK)

    def test_a_client_without_a_certificate_is_refused(self):
        self.refused()

    def test_a_client_certificate_of_another_ca_is_refused(self):
        self.refused(cert=self.foreign_cert, key=self.foreign_key)

    def test_a_client_certificate_with_another_san_is_refused(self):
        self.refused(cert=self.stranger_cert, key=self.stranger_key)


class Rotation(TlsCase):
    def test_rotated_certificates_lose_no_call_and_reach_new_connections(self):
        live_cert = os.path.join(self.dir, "live.crt")
        live_key = os.path.join(self.dir, "live.key")
        shutil.copy(self.server_cert, live_cert)
        shutil.copy(self.server_key, live_key)
        sluice = self.start("--grpc-tls-cert", live_cert, "--grpc-tls-key", live_key,
                            "--grpc-tls-client-ca", self.pki.ca)

        def serial():
            context = ssl.create_default_context(cafile=self.pki.ca)
            context.load_cert_chain(self.envoy_cert, self.envoy_key)
            context.set_alpn_protocols(["h2"])
            import socket
            with socket.create_connection(("127.0.0.1", sluice.grpc_port), timeout=5) as raw:
                with context.wrap_socket(raw, server_hostname="localhost") as tls:
                    return tls.getpeercert()["serialNumber"]

        try:
            before = serial()
            failures, calls, stop = [], [0], threading.Event()

            def load():
                # One long-lived connection and a new one every 20 calls, all the time.
                channel = self.channel(sluice, cert=self.envoy_cert, key=self.envoy_key)
                while not stop.is_set():
                    try:
                        self.assertEqual(self.decide(channel).overall_code, Code.OK)
                        calls[0] += 1
                        if calls[0] % 20 == 0:
                            fresh = self.channel(sluice, cert=self.envoy_cert, key=self.envoy_key)
                            self.decide(fresh)
                            fresh.close()
                    except Exception as error:  # noqa: BLE001 (any failure is the finding)
                        failures.append(error)

            threads = [threading.Thread(target=load) for _ in range(3)]
            for thread in threads:
                thread.start()
            time.sleep(0.3)
            # cert-manager's way: new files renamed into place, the key after the certificate.
            new_cert, new_key = self.pki.issue("server2", "DNS:localhost,IP:127.0.0.1")
            shutil.copy(new_cert, live_cert + ".tmp")
            os.replace(live_cert + ".tmp", live_cert)
            time.sleep(0.2)
            shutil.copy(new_key, live_key + ".tmp")
            os.replace(live_key + ".tmp", live_key)
            wait_for(lambda: serial() != before, 10, "new connections to get the new certificate")
            time.sleep(0.5)
            stop.set()
            for thread in threads:
                thread.join()
            self.assertEqual(failures, [])
            self.assertGreater(calls[0], 20)
            self.assertIn("gRPC TLS: reloaded", sluice.log())
        finally:
            sluice.close()


class StartUp(TlsCase):
    def test_a_bad_file_is_an_error_naming_it(self):
        garbage = os.path.join(self.dir, "garbage.pem")
        with open(garbage, "w") as f:
            f.write("not a certificate\n")
        cases = [
            (["--grpc-tls-cert", garbage, "--grpc-tls-key", self.server_key], garbage),
            (["--grpc-tls-cert", self.server_cert, "--grpc-tls-key", "/nonexistent/key.pem"],
             "/nonexistent/key.pem"),
            (["--grpc-tls-cert", self.server_cert, "--grpc-tls-key", self.envoy_key],
             "does not match"),
            (["--grpc-tls-cert", self.server_cert, "--grpc-tls-key", self.server_key,
              "--grpc-tls-client-ca", garbage], garbage),
        ]
        for args, named in cases:
            code, output = run_sluice(["--rules", self.dir, "--listen", "127.0.0.1:0",
                                       "--grpc-listen", "127.0.0.1:0"] + args)
            self.assertNotEqual(code, 0, output)
            self.assertIn(named, output)

    def test_envoyproxy_ratelimit_variables(self):
        sluice = self.start(env={"GRPC_SERVER_USE_TLS": "true",
                                 "GRPC_SERVER_TLS_CERT": self.server_cert,
                                 "GRPC_SERVER_TLS_KEY": self.server_key,
                                 "GRPC_CLIENT_TLS_CACERT": self.pki.ca,
                                 "GRPC_CLIENT_TLS_SAN": "envoy.example"})
        try:
            channel = self.channel(sluice, cert=self.envoy_cert, key=self.envoy_key)
            self.assertEqual(self.decide(channel).overall_code, Code.OK)
            with self.assertRaises(grpc.RpcError):
                self.decide(self.channel(sluice, cert=self.stranger_cert, key=self.stranger_key))
        finally:
            sluice.close()


if __name__ == "__main__":
    unittest.main()

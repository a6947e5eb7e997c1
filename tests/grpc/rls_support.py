"""Test support for the gRPC Rate Limit Service: stubs generated at test time, the real
`sluice` binary, a real redis-server.

Run with Debian's /usr/bin/python3 (its python3-grpcio 1.51 is importable only there).
SLUICE_BINARY and SLUICE_SOURCE_DIR come from CTest (tests/CMakeLists.txt).
"""

import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import grpc

SOURCE_DIR = os.environ.get(
    "SLUICE_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BINARY = os.environ.get("SLUICE_BINARY", os.path.join(SOURCE_DIR, "build", "sluice"))

_STUB_DIR = None


def _generate_stubs():
    """protoc + grpc_python_plugin over Sluice's own protos (proto/) and the health proto."""
    global _STUB_DIR
    if _STUB_DIR is not None:
        return
    out = tempfile.mkdtemp(prefix="sluice-grpc-stubs-")
    proto_root = os.path.join(SOURCE_DIR, "proto")
    health_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proto")
    protos = [
        "envoy/type/v3/ratelimit_unit.proto",
        "envoy/config/core/v3/base.proto",
        "envoy/extensions/common/ratelimit/v3/ratelimit.proto",
        "envoy/service/ratelimit/v3/rls.proto",
    ]
    plugin = shutil.which("grpc_python_plugin") or "/usr/bin/grpc_python_plugin"
    subprocess.run(
        ["protoc", "-I", proto_root, "-I", "/usr/include", "--python_out", out,
         "--grpc_python_out", out, "--plugin=protoc-gen-grpc_python=" + plugin] + protos,
        check=True)
    subprocess.run(
        ["protoc", "-I", health_root, "--python_out", out, "--grpc_python_out", out,
         "--plugin=protoc-gen-grpc_python=" + plugin, "grpc_health/v1/health.proto"],
        check=True)
    sys.path.insert(0, out)
    _STUB_DIR = out


def generate_more_stubs(protos):
    """Python stubs for more of proto/ (e.g. the xDS protocol), into the same directory."""
    plugin = shutil.which("grpc_python_plugin") or "/usr/bin/grpc_python_plugin"
    subprocess.run(
        ["protoc", "-I", os.path.join(SOURCE_DIR, "proto"), "-I", "/usr/include", "--python_out",
         _STUB_DIR, "--grpc_python_out", _STUB_DIR, "--plugin=protoc-gen-grpc_python=" + plugin]
        + list(protos), check=True)
    importlib.invalidate_caches()


_generate_stubs()
rls_pb2 = importlib.import_module("envoy.service.ratelimit.v3.rls_pb2")
rls_pb2_grpc = importlib.import_module("envoy.service.ratelimit.v3.rls_pb2_grpc")
ratelimit_pb2 = importlib.import_module("envoy.extensions.common.ratelimit.v3.ratelimit_pb2")
ratelimit_unit_pb2 = importlib.import_module("envoy.type.v3.ratelimit_unit_pb2")
health_pb2 = importlib.import_module("grpc_health.v1.health_pb2")
health_pb2_grpc = importlib.import_module("grpc_health.v1.health_pb2_grpc")

Code = rls_pb2.RateLimitResponse
Unit = rls_pb2.RateLimitResponse.RateLimit
UnitEnum = ratelimit_unit_pb2  # envoy.type.v3.RateLimitUnit (a RateLimitOverride's unit)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout=10.0, what="condition"):
    """Polls `predicate` until it returns a true value; fails with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)


def in_one_window(calls, window_seconds=1, attempts=5):
    """Runs `calls()` from the start of a window of `window_seconds` (fixed windows are aligned
    to the epoch) and returns what it returned, once a run fell within one window: a run that
    crossed into the next window (a slow machine) is run again from the start of a later one,
    whose counts are fresh."""
    for _ in range(attempts):
        time.sleep(window_seconds - time.time() % window_seconds + 0.01)
        window = int(time.time() // window_seconds)
        result = calls()
        if int(time.time() // window_seconds) == window:
            return result
    raise AssertionError("no run of the calls fell within one %g s window in %d attempts"
                         % (window_seconds, attempts))


def request(domain, descriptors, hits_addend=0):
    """A RateLimitRequest; descriptors are lists of (key, value) pairs, or dicts with
    'entries' and optional 'hits_addend' / 'limit' (requests_per_unit, unit) /
    'is_negative_hits' (a refund of the descriptor's hits)."""
    message = rls_pb2.RateLimitRequest(domain=domain, hits_addend=hits_addend)
    for d in descriptors:
        descriptor = message.descriptors.add()
        if isinstance(d, dict):
            entries = d["entries"]
            if "hits_addend" in d:
                descriptor.hits_addend.value = d["hits_addend"]
            if d.get("is_negative_hits"):
                descriptor.is_negative_hits = True
            if "limit" in d:
                descriptor.limit.requests_per_unit = d["limit"][0]
                descriptor.limit.unit = d["limit"][1]
        else:
            entries = d
        for key, value in entries:
            entry = descriptor.entries.add()
            entry.key = key
            entry.value = value
    return message


class Redis:
    """A real redis-server on a free loopback port, no persistence."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sluice-grpc-redis-")
        self.process = None
        # A port picked free may be taken by a parallel test before redis-server binds it
        # (it then exits at once, and a PING could reach the other test's server): the first
        # start is retried on new ports, a few times.
        for attempt in range(5):
            self.port = free_port()
            if self.start(may_fail=attempt < 4):
                break

    def url(self):
        return "redis://127.0.0.1:%d/0" % self.port

    def start(self, may_fail=False):
        """Starts redis-server on self.port; True once it answers. A server that exits
        before answering (its port taken) returns False if may_fail, else fails. Starting
        one that runs already is refused: the second server could not bind the port, and the
        first would be left running after close()."""
        if self.process is not None and self.process.poll() is None:
            raise AssertionError("redis-server on port %d is running already" % self.port)
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--enable-debug-command", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: self.process.poll() is not None or self.ping(), 10,
                 "redis-server to answer PING")
        # Ours answered only if it is still running (and then it holds the port).
        if self.process.poll() is None:
            return True
        if may_fail:
            return False
        raise AssertionError("redis-server exited on port %d (exit code %s)"
                             % (self.port, self.process.returncode))

    def ping(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def command(self, *args):
        """One command on a connection of its own; its reply's first line."""
        payload = "*%d\r\n" % len(args) + "".join(
            "$%d\r\n%s\r\n" % (len(str(a).encode()), a) for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(payload.encode())
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                reply += chunk
            return reply.decode().strip()

    def kill(self):
        """A crash, not a shutdown."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def close(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisCluster:
    """Three masters on free loopback ports (cluster bus on free ports too)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sluice-grpc-cluster-")
        self.processes = []
        self.ports = []
        try:
            for i in range(3):
                node_dir = os.path.join(self.dir, str(i))
                os.mkdir(node_dir)
                self.start_node(node_dir)
            subprocess.run(["redis-cli", "--cluster", "create"] +
                           ["127.0.0.1:%d" % p for p in self.ports] + ["--cluster-yes"],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=30)
            for port in self.ports:
                wait_for(lambda: "cluster_state:ok" in self.cli(port, "CLUSTER", "INFO"), 20,
                         "cluster_state:ok")
        except BaseException:
            # A cluster that did not come up leaves no node behind (nobody will close() it).
            self.close()
            raise

    def start_node(self, node_dir, attempts=5):
        """Starts one node on free ports. A port another process took since free_port() makes
        redis-server exit at once: the node then starts again on other ports."""
        for _ in range(attempts):
            port, bus = free_port(), free_port()
            process = subprocess.Popen(
                ["redis-server", "--port", str(port), "--cluster-port", str(bus), "--bind",
                 "127.0.0.1", "--cluster-enabled", "yes", "--cluster-config-file",
                 "nodes.conf", "--save", "", "--appendonly", "no", "--dir", node_dir],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.processes.append(process)  # close() kills it, whatever happens next
            # Ours answers, not another server on the same port: INFO names its process.
            mine = "process_id:%d" % process.pid
            wait_for(lambda: process.poll() is not None or mine in self.cli(port, "INFO", "server"),
                     10, "redis node %d" % port)
            if process.poll() is None:
                self.ports.append(port)
                return
            self.processes.remove(process)
        raise AssertionError("no redis node started in %d attempts" % attempts)

    def cli(self, port, *args):
        """The command's answer; empty when none came within 5 s (a port that accepts and never
        answers: another program's, or a stuck node)."""
        try:
            done = subprocess.run(["redis-cli", "-p", str(port)] + list(args),
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=5)
        except subprocess.TimeoutExpired:
            return ""
        return done.stdout.decode().strip()

    def url(self):
        return ",".join("redis://127.0.0.1:%d" % p for p in self.ports)

    def close(self):
        for process in self.processes:
            process.kill()
            process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Sluice:
    """The real sluice binary with its own rules directory, HTTP on a free port and gRPC on
    the addresses given (TCP on a free port unless grpc_listen is given)."""

    def __init__(self, rules, args=(), grpc_listen=None, env=None, wait=True, admin=False):
        self.dir = tempfile.mkdtemp(prefix="sluice-grpc-")
        self.rules_dir = os.path.join(self.dir, "rules")
        os.mkdir(self.rules_dir)
        for name, text in rules.items():
            with open(os.path.join(self.rules_dir, name), "w") as f:
                f.write(text)
        self.args = list(args)
        self.env = env
        self.fixed_grpc_listen = grpc_listen
        # admin=True: an admin listener on a port picked with the others (self.admin_port), so
        # that a retried start picks it again too.
        self.admin = admin
        self.admin_port = None
        self.log_path = os.path.join(self.dir, "sluice.log")
        self.log_file = None
        self.channels = []
        # A port picked free may be taken by a parallel test before sluice binds it: such a
        # start is retried on new ports (only when the log says so, and only a few times).
        for attempt in range(4):
            self.launch()
            if not wait:
                return
            try:
                self.wait_ready()
                return
            except AssertionError:
                if attempt == 3 or self.process.poll() is None or \
                        "Address already in use" not in self.log() or \
                        (self.fixed_grpc_listen is not None and self.grpc_port is not None):
                    raise

    def launch(self):
        self.http_port = free_port()
        grpc_listen = self.fixed_grpc_listen
        if grpc_listen is None:
            self.grpc_port = free_port()
            grpc_listen = ["127.0.0.1:%d" % self.grpc_port]
        else:
            self.grpc_port = None
            for address in grpc_listen:
                if not address.startswith("unix:"):
                    self.grpc_port = int(address.rsplit(":", 1)[1])
        self.grpc_listen = grpc_listen
        command = [BINARY, "--listen", "127.0.0.1:%d" % self.http_port, "--rules",
                   self.rules_dir, "--threads", "2"]
        for address in grpc_listen:
            command += ["--grpc-listen", address]
        if self.admin:
            self.admin_port = free_port()
            command += ["--admin-listen", "127.0.0.1:%d" % self.admin_port]
        command += self.args
        if self.log_file is not None:
            self.log_file.close()
        self.log_file = open(self.log_path, "w")
        environment = dict(os.environ)
        environment.update(self.env or {})
        self.process = subprocess.Popen(command, stdout=self.log_file, stderr=subprocess.STDOUT,
                                        env=environment)

    def wait_ready(self, timeout=15.0):
        def up():
            if self.process.poll() is not None:
                raise AssertionError("sluice exited with %s:\n%s" % (self.process.returncode,
                                                                     self.log()))
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % self.http_port,
                                            timeout=1) as r:
                    return r.status == 200
            except (urllib.error.URLError, OSError):
                return False
        wait_for(up, timeout, "sluice to answer /healthz")
        # The gRPC listener is up before the HTTP server runs (see the start-up log).
        channel = self.channel()
        grpc.channel_ready_future(channel).result(timeout=timeout)

    def target(self, address=None):
        address = address or self.grpc_listen[0]
        return address if address.startswith("unix:") else address

    def channel(self, address=None):
        channel = grpc.insecure_channel(self.target(address))
        self.channels.append(channel)
        return channel

    def stub(self, address=None):
        return rls_pb2_grpc.RateLimitServiceStub(self.channel(address))

    def health(self, address=None):
        return health_pb2_grpc.HealthStub(self.channel(address))

    def post_json(self, path, body):
        data = json.dumps(body).encode()
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.http_port, path), data=data,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.loads(r.read()), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}"), dict(e.headers)

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.http_port,
                                    timeout=5) as r:
            return r.read().decode()

    def log(self):
        self.log_file.flush()
        with open(self.log_path) as f:
            return f.read()

    def signal(self, number):
        self.process.send_signal(number)

    def wait(self, timeout):
        return self.process.wait(timeout=timeout)

    def close(self):
        for channel in self.channels:
            channel.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log_file.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_sluice(args, env=None, timeout=10):
    """Runs sluice to completion: (exit code, output)."""
    environment = dict(os.environ)
    environment.update(env or {})
    done = subprocess.run([BINARY] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, env=environment, timeout=timeout)
    return done.returncode, done.stdout.decode()


def headers_of(response):
    return {h.key: h.value for h in response.response_headers_to_add}


def terminate_gracefully(sluice, timeout=20):
    sluice.signal(signal.SIGTERM)
    return sluice.wait(timeout)


SHOULD_RATE_LIMIT_PATH = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"


class RawHttp2:
    """A bare HTTP/2 connection, for what grpcio hides: sending a call with any grpc-timeout
    and seeing the server's GOAWAY. Frames are read with a timeout; headers are sent as HPACK
    literals without Huffman coding (RFC 7541, 6.2.2), which every server must accept."""

    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + self.frame(4, 0, 0, b""))
        self.buffer = b""

    @staticmethod
    def frame(kind, flags, stream, payload):
        return (len(payload).to_bytes(3, "big") + bytes([kind, flags]) +
                stream.to_bytes(4, "big") + payload)

    @staticmethod
    def literal(name, value):
        name, value = name.encode(), value.encode()
        assert len(name) < 127 and len(value) < 127
        return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value

    def send_call(self, stream, port, message, timeout_header=None):
        """A unary ShouldRateLimit call on `stream` (odd), ended by its DATA frame."""
        self.send_headers(stream, port, timeout_header)
        self.send_message(stream, message)

    def send_headers(self, stream, port, timeout_header=None):
        """The HEADERS frame of a ShouldRateLimit call on `stream` (odd), without its body."""
        headers = [(":method", "POST"), (":scheme", "http"), (":path", SHOULD_RATE_LIMIT_PATH),
                   (":authority", "127.0.0.1:%d" % port), ("content-type", "application/grpc"),
                   ("te", "trailers")]
        if timeout_header is not None:
            headers.append(("grpc-timeout", timeout_header))
        block = b"".join(self.literal(n, v) for n, v in headers)
        self.sock.sendall(self.frame(1, 0x4, stream, block))

    def send_message(self, stream, message):
        """The request message in a DATA frame that ends the stream."""
        body = message.SerializeToString()
        data = b"\x00" + len(body).to_bytes(4, "big") + body
        self.sock.sendall(self.frame(0, 0x1, stream, data))

    def read_frame(self):
        """(type, flags, stream, payload), or None once the server closed the connection.
        A SETTINGS frame from the server is acknowledged."""
        while True:
            if len(self.buffer) >= 9:
                length = int.from_bytes(self.buffer[:3], "big")
                if len(self.buffer) >= 9 + length:
                    head, payload = self.buffer[:9], self.buffer[9:9 + length]
                    self.buffer = self.buffer[9 + length:]
                    kind, flags = head[3], head[4]
                    stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
                    if kind == 4 and not flags & 0x1:
                        self.sock.sendall(self.frame(4, 0x1, 0, b""))
                    return kind, flags, stream, payload
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return None
            self.buffer += chunk

    def close(self):
        self.sock.close()

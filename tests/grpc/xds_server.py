"""A real xDS management server for tests: envoy.service.discovery.v3.AggregatedDiscoveryService
StreamAggregatedResources (State of the World), serving RateLimitConfig snapshots the way
go-control-plane's snapshot cache does: a stream gets the current snapshot when its request's
version differs from it, and every new snapshot is pushed to every open stream. Every request
received (node, version_info, response_nonce, error_detail) is recorded.

Stubs are generated at test time from Sluice's vendored protos (proto/) by protoc and
grpc_python_plugin (rls_support). Run with Debian's /usr/bin/python3.
"""

import importlib
import queue
import threading
import time
from concurrent import futures

import grpc

import rls_support  # noqa: F401  (generates the stubs and puts them on sys.path)

rls_support.generate_more_stubs([
    "google/rpc/status.proto",
    "envoy/service/discovery/v3/discovery.proto",
    "envoy/service/discovery/v3/ads.proto",
    "ratelimit/config/ratelimit/v3/rls_conf.proto",
])
discovery_pb2 = importlib.import_module("envoy.service.discovery.v3.discovery_pb2")
ads_pb2_grpc = importlib.import_module("envoy.service.discovery.v3.ads_pb2_grpc")
rls_conf_pb2 = importlib.import_module("ratelimit.config.ratelimit.v3.rls_conf_pb2")

TYPE_URL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"


def config_from_yaml(document):
    """A RateLimitConfig message from one envoyproxy/ratelimit YAML document (as a dict)."""
    def descriptor(into, d):
        into.key = d.get("key") or ""
        into.value = d.get("value") or ""
        if d.get("rate_limit"):
            p = d["rate_limit"]
            into.rate_limit.unit = rls_conf_pb2.RateLimitUnit.Value(str(p.get("unit", "UNKNOWN")).upper())
            into.rate_limit.requests_per_unit = p.get("requests_per_unit") or 0
            into.rate_limit.unlimited = bool(p.get("unlimited"))
            into.rate_limit.name = p.get("name") or ""
            for r in p.get("replaces") or []:
                into.rate_limit.replaces.add().name = r["name"]
        into.shadow_mode = bool(d.get("shadow_mode"))
        into.detailed_metric = bool(d.get("detailed_metric"))
        into.quota_mode = bool(d.get("quota_mode"))
        if d.get("metadata"):
            into.metadata.update(d["metadata"])
        for child in d.get("descriptors") or []:
            descriptor(into.descriptors.add(), child)

    config = rls_conf_pb2.RateLimitConfig(name=document.get("name") or "",
                                          domain=document.get("domain") or "")
    for d in document.get("descriptors") or []:
        descriptor(config.descriptors.add(), d)
    return config


def response(version, configs, nonce, type_url=TYPE_URL):
    message = discovery_pb2.DiscoveryResponse(version_info=version, type_url=type_url,
                                              nonce=nonce)
    for config in configs:
        message.resources.add().Pack(config)
    return message


class _Stream:
    def __init__(self):
        self.outbox = queue.Queue()
        self.requests = []
        self.closed = False
        self.sent_version = None


class _Service(ads_pb2_grpc.AggregatedDiscoveryServiceServicer):
    def __init__(self, owner):
        self.owner = owner

    def StreamAggregatedResources(self, request_iterator, context):
        stream = _Stream()
        owner = self.owner
        with owner.lock:
            owner.streams.append(stream)

        def read():
            try:
                for request in request_iterator:
                    with owner.lock:
                        stream.requests.append(request)
                        owner.requests.append(request)
                        snapshot = owner.snapshot
                        owner.cond.notify_all()
                    # A stream's first request with another version gets the snapshot,
                    # unless set_snapshot() already pushed it to this stream.
                    if len(stream.requests) == 1 and snapshot is not None and \
                            request.version_info != snapshot[0]:
                        with owner.lock:
                            already = stream.sent_version == snapshot[0]
                            stream.sent_version = snapshot[0]
                        if not already:
                            stream.outbox.put(owner.make_response(*snapshot))
            except grpc.RpcError:
                pass
            finally:
                stream.closed = True
                stream.outbox.put(None)

        threading.Thread(target=read, daemon=True).start()
        try:
            while context.is_active():
                try:
                    message = stream.outbox.get(timeout=0.1)
                except queue.Empty:
                    continue
                if message is None:
                    return
                yield message
        finally:
            with owner.lock:
                owner.streams.remove(stream)


class XdsServer:
    """Serves on 127.0.0.1:port (a free one unless given); `tls` = (key_pem, cert_pem,
    client_ca_pem or None) for TLS (mutual when client_ca_pem is given)."""

    def __init__(self, port=None, tls=None):
        self.port = port or rls_support.free_port()
        self.tls = tls
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.streams = []
        self.requests = []
        self.snapshot = None  # (version, configs, type_url)
        self.nonce = 0
        self.server = None
        self.start()

    def start(self):
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                                  options=[("grpc.so_reuseport", 0),
                                           ("grpc.max_send_message_length", 64 << 20)])
        ads_pb2_grpc.add_AggregatedDiscoveryServiceServicer_to_server(_Service(self), self.server)
        address = "127.0.0.1:%d" % self.port
        if self.tls:
            key, cert, client_ca = self.tls
            credentials = grpc.ssl_server_credentials(
                [(key, cert)], root_certificates=client_ca,
                require_client_auth=client_ca is not None)
            self.server.add_secure_port(address, credentials)
        else:
            self.server.add_insecure_port(address)
        self.server.start()

    def kill(self):
        """Stops at once, breaking every stream."""
        self.server.stop(0).wait()
        with self.lock:
            for stream in self.streams:
                stream.outbox.put(None)

    def make_response(self, version, configs, type_url=TYPE_URL):
        with self.lock:
            self.nonce += 1
            nonce = "nonce-%d" % self.nonce
        return response(version, configs, nonce, type_url)

    def set_snapshot(self, version, configs, type_url=TYPE_URL):
        """Makes (version, configs) current and pushes it to every open stream; returns the
        nonces sent."""
        with self.lock:
            self.snapshot = (version, configs, type_url)
            streams = list(self.streams)
        nonces = []
        for stream in streams:
            with self.lock:
                stream.sent_version = version
            message = self.make_response(version, configs, type_url)
            nonces.append(message.nonce)
            stream.outbox.put(message)
        return nonces

    def push_raw(self, message):
        """Sends a hand-made DiscoveryResponse on every open stream (bad input)."""
        with self.lock:
            streams = list(self.streams)
        for stream in streams:
            stream.outbox.put(message)

    def wait_request(self, predicate, timeout=10.0, what="an xDS request"):
        """The first recorded request (oldest first) for which predicate holds."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                for request in self.requests:
                    if predicate(request):
                        return request
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError("timed out waiting for " + what)
                self.cond.wait(remaining)

    def open_streams(self):
        with self.lock:
            return len(self.streams)

    def close(self):
        self.kill()

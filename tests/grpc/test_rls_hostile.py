"""Hostile clients on the gRPC listener: a stream that never ends, 10,000 streams at once on
one connection, frame floods, a huge header block, a message over the limit, grpc-timeout of
1 ns and of 100 years. Each gets the right gRPC status or a GOAWAY, the server never
crashes, and a well-behaved client on another connection is answered meanwhile as fast as
usual."""

import socket
import time
import unittest

import grpc
import hpack

from rls_support import SHOULD_RATE_LIMIT_PATH, Code, RawHttp2, Sluice, request

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

DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, CONTINUATION = 0, 1, 3, 4, 6, 7, 9
END_STREAM, END_HEADERS = 0x1, 0x4
PROTOCOL_ERROR, REFUSED_STREAM, ENHANCE_YOUR_CALM = 1, 7, 11
# The bound a well-behaved call must keep on another connection while one is attacked.
PROMPT = 1.0


def hpack_int(value, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal(name, value):
    """A literal header field without indexing, no Huffman coding, any length."""
    name, value = name.encode(), value.encode()
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


def call_headers(port, extra=()):
    fields = [(":method", "POST"), (":scheme", "http"), (":path", SHOULD_RATE_LIMIT_PATH),
              (":authority", "127.0.0.1:%d" % port), ("content-type", "application/grpc"),
              ("te", "trailers")] + list(extra)
    return b"".join(literal(n, v) for n, v in fields)


def grpc_status(headers):
    """grpc-status of a decoded header list, or None."""
    for name, value in headers:
        if name == b"grpc-status":
            return int(value)
    return None


class Raw(RawHttp2):
    """RawHttp2 that keeps reading what the server sent after it stopped reading us."""

    def read_frame(self):
        while True:
            if len(self.buffer) >= 9:
                length = int.from_bytes(self.buffer[:3], "big")
                if len(self.buffer) >= 9 + length:
                    head, payload = self.buffer[:9], self.buffer[9:9 + length]
                    self.buffer = self.buffer[9 + length:]
                    kind, flags = head[3], head[4]
                    stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
                    if kind == SETTINGS and not flags & 0x1:
                        try:
                            self.sock.sendall(self.frame(SETTINGS, 0x1, 0, b""))
                        except OSError:
                            pass
                    return kind, flags, stream, payload
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                chunk = b""
            if not chunk:
                return None
            self.buffer += chunk


class Hostile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sluice = Sluice(RULES, args=["--request-timeout-ms", "1000",
                                         "--max-body-bytes", "65536"])
        cls.bystander = cls.sluice.stub()

    @classmethod
    def tearDownClass(cls):
        cls.sluice.close()

    def setUp(self):
        self.raw = Raw(self.sluice.grpc_port)
        # Python's HPACK (Debian's python3-hpack) for the server's header blocks, each decoded
        # in order: they share the connection's dynamic table.
        self.decoder = hpack.Decoder()

    def next_frame(self):
        """The next frame, a HEADERS payload decoded into a header list."""
        frame = self.raw.read_frame()
        if frame is not None and frame[0] == HEADERS:
            frame = (frame[0], frame[1], frame[2], self.decoder.decode(frame[3], raw=True))
        return frame

    def tearDown(self):
        self.raw.close()
        self.assertIsNone(self.sluice.process.poll(), "sluice exited:\n" + self.sluice.log())
        self.assert_others_served()

    def assert_others_served(self):
        started = time.monotonic()
        response = self.bystander.ShouldRateLimit(request("api", [[("client", "bystander")]]),
                                                  timeout=5)
        self.assertEqual(response.overall_code, Code.OK)
        self.assertLess(time.monotonic() - started, PROMPT)

    def read_until(self, done, what):
        """Frames until done(frame) is true; the frames read. None ends the connection."""
        frames = []
        while True:
            frame = self.next_frame()
            frames.append(frame)
            if done(frame):
                return frames
            self.assertIsNotNone(frame, "connection closed before " + what)

    def status_of(self, stream):
        """The grpc-status the server ended `stream` with (from its last HEADERS)."""
        frames = self.read_until(lambda f: f is not None and f[2] == stream and f[0] == HEADERS
                                 and f[1] & END_STREAM, "stream %d ended" % stream)
        return grpc_status(frames[-1][3])

    def test_a_stream_that_never_ends_gets_deadline_exceeded(self):
        port = self.sluice.grpc_port
        self.raw.sock.sendall(self.raw.frame(HEADERS, END_HEADERS, 1, call_headers(port)))
        self.raw.sock.sendall(self.raw.frame(DATA, 0, 1, b"\x00\x00\x00\x00\x10abc"))
        # Meanwhile, another connection is served at once.
        self.assert_others_served()
        # After --request-timeout-ms the call is ended; the bytes still coming are dropped.
        self.assertEqual(self.status_of(1), 4)  # DEADLINE_EXCEEDED

    def test_ten_thousand_streams_at_once_are_refused_beyond_the_limit(self):
        port = self.sluice.grpc_port
        block = call_headers(port)
        burst = b"".join(self.raw.frame(HEADERS, END_HEADERS, 2 * i + 1, block)
                         for i in range(10000))
        self.raw.sock.sendall(burst)
        refused, goaway, ended = 0, False, set()
        # Every stream over the limit is refused (or the connection is ended with GOAWAY);
        # those within it end at the request timeout.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and refused + len(ended) < 10000 and not goaway:
            frame = self.next_frame()
            if frame is None:
                break
            kind, flags, stream, payload = frame
            if kind == RST_STREAM and int.from_bytes(payload[:4], "big") == REFUSED_STREAM:
                refused += 1
            elif kind == HEADERS and flags & END_STREAM:
                self.assertEqual(grpc_status(payload), 4)
                ended.add(stream)
            elif kind == GOAWAY:
                goaway = True
        self.assertTrue(goaway or refused >= 9000, (refused, len(ended), goaway))
        self.assertLessEqual(len(ended), 1000)

    def test_a_ping_flood_gets_goaway_enhance_your_calm(self):
        ping = self.raw.frame(PING, 0, 0, b"12345678")
        self.raw.sock.sendall(ping * 10000)
        frames = self.read_until(lambda f: f is None or f[0] == GOAWAY, "GOAWAY")
        self.assertIsNotNone(frames[-1], "closed without GOAWAY")
        code = int.from_bytes(frames[-1][3][4:8], "big")
        self.assertEqual(code, ENHANCE_YOUR_CALM)
        self.assertIn(b"too_many_pings", frames[-1][3][8:])

    def test_a_settings_flood_ends_the_connection(self):
        settings = self.raw.frame(SETTINGS, 0, 0, b"")
        try:
            for _ in range(20):
                self.raw.sock.sendall(settings * 5000)
        except (BrokenPipeError, ConnectionResetError):
            pass
        # The acknowledgements it asked for are not all queued: the connection ends.
        self.raw.sock.settimeout(10)
        self.read_until(lambda f: f is None, "the end of the connection")

    def test_a_header_block_over_the_limit_gets_resource_exhausted(self):
        port = self.sluice.grpc_port
        block = call_headers(port, [("x-padding", "p" * 20000)])
        # HEADERS then CONTINUATION frames of at most 16 KiB (the default max frame size).
        chunks = [block[i:i + 16384] for i in range(0, len(block), 16384)]
        frames = [self.raw.frame(HEADERS, 0, 1, chunks[0])]
        for i, chunk in enumerate(chunks[1:]):
            flags = END_HEADERS if i == len(chunks) - 2 else 0
            frames.append(self.raw.frame(CONTINUATION, flags, 1, chunk))
        self.raw.sock.sendall(b"".join(frames))
        self.assertEqual(self.status_of(1), 8)  # RESOURCE_EXHAUSTED

    def test_a_megabyte_header_block_ends_the_connection(self):
        port = self.sluice.grpc_port
        block = call_headers(port) + b"".join(literal("x-pad-%d" % i, "p" * 60000)
                                              for i in range(17))
        chunks = [block[i:i + 16384] for i in range(0, len(block), 16384)]
        frames = [self.raw.frame(HEADERS, 0, 1, chunks[0])]
        for i, chunk in enumerate(chunks[1:]):
            flags = END_HEADERS if i == len(chunks) - 2 else 0
            frames.append(self.raw.frame(CONTINUATION, flags, 1, chunk))
        try:
            self.raw.sock.sendall(b"".join(frames))
        except (BrokenPipeError, ConnectionResetError):
            pass
        # Too many CONTINUATION frames: GOAWAY (or a plain close), never a hang.
        frames = self.read_until(lambda f: f is None or f[0] == GOAWAY or
                                 (f[0] == HEADERS and f[1] & END_STREAM), "the end")
        if frames[-1] is not None and frames[-1][0] == HEADERS:
            self.assertEqual(grpc_status(frames[-1][3]), 8)

    def test_a_message_over_the_limit_gets_resource_exhausted(self):
        big = request("api", [[("client", "x" * 1000)]] * 60 + [[("client", "y" * 70000)]])
        with self.assertRaises(grpc.RpcError) as caught:
            self.bystander.ShouldRateLimit(big, timeout=5)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)

    def test_a_declared_length_over_the_limit_gets_resource_exhausted(self):
        port = self.sluice.grpc_port
        self.raw.sock.sendall(self.raw.frame(HEADERS, END_HEADERS, 1, call_headers(port)))
        self.raw.sock.sendall(self.raw.frame(DATA, 0, 1, b"\x00\x7f\xff\xff\xff" + b"a" * 16000))
        for _ in range(8):
            self.raw.sock.sendall(self.raw.frame(DATA, 0, 1, b"a" * 16000))
        self.assertEqual(self.status_of(1), 8)

    def test_malformed_requests_are_reset_with_protocol_error_and_charge_nothing(self):
        port = self.sluice.grpc_port
        body = request("api", [[("client", "malformed")]]).SerializeToString()
        data = b"\x00" + len(body).to_bytes(4, "big") + body
        fields = [(":method", "POST"), (":scheme", "http"), (":path", SHOULD_RATE_LIMIT_PATH),
                  (":authority", "127.0.0.1:%d" % port), ("content-type", "application/grpc"),
                  ("te", "trailers")]
        cases = {
            "no :path": [f for f in fields if f[0] != ":path"],
            "no :method": fields[1:],
            "an empty :path": [(n, "" if n == ":path" else v) for n, v in fields],
            "a repeated :method": fields[:1] + fields,
            "a pseudo-header after a regular one": fields[1:] + fields[:1],
            "an unknown pseudo-header": fields[:4] + [(":protocol", "websocket")] + fields[4:],
            "a connection-specific header": fields + [("connection", "keep-alive")],
            "te other than trailers": fields[:-1] + [("te", "gzip")],
        }
        stream = 1
        for what, case in cases.items():
            block = b"".join(literal(n, v) for n, v in case)
            self.raw.sock.sendall(self.raw.frame(HEADERS, END_HEADERS, stream, block) +
                                  self.raw.frame(DATA, END_STREAM, stream, data))
            frames = self.read_until(lambda f: f is not None and f[2] == stream and
                                     f[0] in (RST_STREAM, HEADERS), what)
            self.assertEqual(frames[-1][0], RST_STREAM, what)
            self.assertEqual(int.from_bytes(frames[-1][3][:4], "big"), PROTOCOL_ERROR, what)
            stream += 2
        # The connection still serves a well-formed call, and none of the above was charged.
        block = b"".join(literal(n, v) for n, v in fields)
        self.raw.sock.sendall(self.raw.frame(HEADERS, END_HEADERS, stream, block) +
                              self.raw.frame(DATA, END_STREAM, stream, data))
        self.assertEqual(self.status_of(stream), 0)
        response = self.bystander.ShouldRateLimit(request("api", [[("client", "malformed")]]),
                                                  timeout=5)
        self.assertEqual(response.statuses[0].limit_remaining, 98)

    def test_a_timeout_of_one_nanosecond_is_deadline_exceeded_and_charges_nothing(self):
        port = self.sluice.grpc_port
        body = request("api", [[("client", "one-ns")]]).SerializeToString()
        self.raw.sock.sendall(self.raw.frame(
            HEADERS, END_HEADERS, 1, call_headers(port, [("grpc-timeout", "1n")])))
        self.raw.sock.sendall(self.raw.frame(DATA, END_STREAM, 1,
                                             b"\x00" + len(body).to_bytes(4, "big") + body))
        self.assertEqual(self.status_of(1), 4)
        response = self.bystander.ShouldRateLimit(request("api", [[("client", "one-ns")]]),
                                                  timeout=5)
        self.assertEqual(response.statuses[0].limit_remaining, 99)

    def test_a_timeout_of_a_hundred_years_is_served(self):
        port = self.sluice.grpc_port
        body = request("api", [[("client", "century")]]).SerializeToString()
        self.raw.sock.sendall(self.raw.frame(
            HEADERS, END_HEADERS, 1, call_headers(port, [("grpc-timeout", "876600H")])))
        self.raw.sock.sendall(self.raw.frame(DATA, END_STREAM, 1,
                                             b"\x00" + len(body).to_bytes(4, "big") + body))
        self.assertEqual(self.status_of(1), 0)
        self.assertEqual(grpc.StatusCode.OK.value[0], 0)


if __name__ == "__main__":
    unittest.main()

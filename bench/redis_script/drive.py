#!/usr/bin/env python3
"""Sends CALLS batch calls of Sluice's production script to a redis-server, pipelined, each
holding M fixed_window decisions (one limit each, 10 000 clients) in the layout the Redis
store sends (src/store/redis/lua/99_evaluate.lua, "A batch"); M = 1 sends today's unbatched
call instead. Used by bench/redis_script_cost.sh."""
import os
import random
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench import LUA_DIR, lua_script  # noqa: E402  (bench/bench.py: the same composition)


def encode(args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


def read_reply(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind in (b"+", b":"):
        return rest
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        return [read_reply(f) for _ in range(max(int(rest), 0))]
    raise RuntimeError(f"unexpected reply {line!r}")


def main():
    port, calls, m = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    lua_dir = sys.argv[4] if len(sys.argv) > 4 else LUA_DIR
    # "lists": the batch layout since bf593e6's successor (an argument list sent once per
    # call); "per-request": the layout before it, to measure an older script.
    layout = sys.argv[5] if len(sys.argv) > 5 else "lists"
    # "sidecar": the arguments Sluice sends for bench/rules' fixed_window_allow (its limit may
    # take a runtime override: flags 352 = 32 x the ARGV index of its rule's override field);
    # "bare": the same limit without that field (what scripts before the overrides read).
    shape = sys.argv[6] if len(sys.argv) > 6 else "sidecar"
    # "steady": every client's bucket is written once before (in batches of 32) and the
    # window is an hour, so each measured decision rewrites a state of its own window, as
    # in a loaded run where each client comes back within its window (10k clients at 45k
    # decisions/s: about 4 of 5 decisions); "fresh": most decisions meet an absent key.
    state = sys.argv[7] if len(sys.argv) > 7 else "fresh"
    sock = socket.create_connection(("127.0.0.1", port))
    f = sock.makefile("rb")
    sock.sendall(encode(["SCRIPT", "LOAD", lua_script(lua_dir)]))
    sha = read_reply(f).decode()
    rnd = random.Random(1)
    # bench/rules' fixed_window_allow: L = W = 1 000 000 (us), cost 1, no quota group; the
    # first argument is the test time slot, empty in production.
    if shape == "sidecar":
        args = ["", "0", "1000000", "1000000", "0", "0", "352", "0", "1", "-1",
                "r:bench.op_fixed_window_allow", "1"]
    else:
        args = ["", "0", "1000000", "1000000", "1000000", "0", "0", "0", "1", "-1", "1"]
    if state == "steady":
        args[3] = "3600000000"

    def key():
        c = rnd.randrange(10000)
        return f"sluice:{{b{c:08d}|bench}}:op=fixed_window_allow;i0;fw"

    def call(keys=None, m=m):
        keys = keys or [key() for _ in range(m)]
        if m == 1:
            return ["EVALSHA", sha, 1] + keys + args
        if layout == "per-request":
            return (["EVALSHA", sha, m] + keys + ["batch", m] + [1, len(args)] * m + args * m)
        return ["EVALSHA", sha, m] + keys + ["batch", m, 1] + [1, 1] * m + [len(args)] + args
    if state == "steady":
        every = [f"sluice:{{b{c:08d}|bench}}:op=fixed_window_allow;i0;fw" for c in range(10000)]
        warm = [every[i:i + 32] for i in range(0, len(every), 32)]
        sock.sendall(b"".join(encode(call(k, len(k))) for k in warm))
        for _ in warm:
            read_reply(f)
    sock.sendall(b"".join(encode(call()) for _ in range(calls)))
    for _ in range(calls):
        reply = read_reply(f)
        decisions = reply if m > 1 else [reply]
        for d in decisions:
            if not isinstance(d, list):
                raise SystemExit(f"drive.py: the script answered {d!r}")
    print(f"{calls} calls of {m}: every decision answered")


if __name__ == "__main__":
    main()

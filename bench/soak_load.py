#!/usr/bin/env python3
"""Load for bench/soak.sh: keep-alive HTTP/1.1 clients posting decisions at a fixed total
rate (or as fast as they can with --rate 0), writing one CSV line per second:
  t,sent,ok,degraded,denied,errors
ok: 200 answered by the store; degraded: 200 with X-Sluice-Degraded (a failure mode);
denied: 429; errors: anything else (another status, a timeout, a connection error).
Stops after --seconds, or at SIGTERM."""
import argparse
import http.client
import json
import signal
import sys
import threading
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--rate", type=float, default=0, help="requests/s in total; 0: as fast as possible")
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--clients", type=int, default=1000, help="distinct client ids")
    p.add_argument("--out", required=True)
    a = p.parse_args()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    lock = threading.Lock()
    counts = {"sent": 0, "ok": 0, "degraded": 0, "denied": 0, "errors": 0}

    def worker(index):
        conn = None
        per_thread = a.rate / a.threads if a.rate > 0 else 0
        next_at = time.monotonic()
        i = index
        while not stop.is_set():
            if per_thread > 0:
                now = time.monotonic()
                if now < next_at:
                    time.sleep(min(next_at - now, 0.05))
                    continue
                next_at += 1.0 / per_thread
                if now - next_at > 1.0:  # fell behind by more than a second: do not burst
                    next_at = now
            i += a.threads
            body = json.dumps({"domain": "soak", "clientId": f"c{i % a.clients}",
                               "descriptors": [[{"key": "op", "value": "read"}]]})
            kind = "errors"
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=5)
                conn.request("POST", "/shouldAllowRequest", body,
                             {"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                if r.status == 200:
                    kind = "degraded" if r.getheader("X-Sluice-Degraded") == "true" else "ok"
                elif r.status == 429:
                    kind = "denied"
            except Exception:
                conn = None
            with lock:
                counts["sent"] += 1
                counts[kind] += 1

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(a.threads)]
    for t in threads:
        t.start()
    start = time.monotonic()
    last = dict(counts)
    with open(a.out, "w") as out:
        out.write("t,sent,ok,degraded,denied,errors\n")
        second = 1
        while not stop.is_set() and time.monotonic() - start < a.seconds:
            time.sleep(max(0.0, start + second - time.monotonic()))
            with lock:
                now = dict(counts)
            out.write(f"{time.time():.3f}," + ",".join(
                str(now[k] - last[k]) for k in ("sent", "ok", "degraded", "denied", "errors")) + "\n")
            out.flush()
            last = now
            second += 1
    stop.set()
    for t in threads:
        t.join(timeout=6)
    total = counts
    print(json.dumps(total))
    return 0


if __name__ == "__main__":
    sys.exit(main())

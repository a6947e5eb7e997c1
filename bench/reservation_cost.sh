#!/usr/bin/env bash
# What a reservation costs the server, in instructions (valgrind's callgrind: repeatable
# whatever else the machine does): a reserve + commit pair over HTTP against one plain
# decision (POST /shouldAllowRequest), on the memory store, one I/O thread.
#
# Three runs of build/sluice under callgrind, each driven over one keep-alive connection
# (each request written in one piece): no requests (start-up and shutdown alone), N plain
# decisions, N reserve + commit pairs.
# The cost of one operation is (run - idle run) / N. Prints both and their ratio (docs/
# benchmarks.md, "Reservations: what a reserve + commit costs"), and the pair split into
# its reserve and its commit: each step's own handler (serveReserve, serveCommit in
# src/http/reservation_routes.cpp: parsing, deciding, the answer; inclusive costs from
# callgrind_annotate) plus half of what the pair spends outside them (reading the two
# requests, routing, writing the two answers).
#
# Usage: bench/reservation_cost.sh [--requests N] [--sluice PATH]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
sluice=$root/${SLUICE_BUILD_DIR:-build}/sluice
requests=2000
while (($#)); do
  case $1 in
    --requests) requests=$2; shift ;;
    --sluice) sluice=$2; shift ;;
    *) echo "bench/reservation_cost.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
command -v valgrind > /dev/null || { echo "valgrind is not installed (scripts/deps.sh bench)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/rules"
cat > "$work/rules/llm.yaml" <<'EOF'
domain: llm
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
EOF

# One run: sluice under callgrind, `mode` requests, then SIGTERM; prints the instructions.
run() {
  local mode=$1
  local port
  port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  valgrind --tool=callgrind --callgrind-out-file="$work/$mode.out" "$sluice" --rules "$work/rules" \
    --listen "127.0.0.1:$port" --threads 1 --log-level warn > "$work/$mode.log" 2>&1 &
  local pid=$!
  /usr/bin/python3 - "$port" "$mode" "$requests" <<'EOF'
import http.client, socket, sys, time
port, mode, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
deadline = time.monotonic() + 120
while True:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", "/healthz")
        c.getresponse().read()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("sluice did not start")
        time.sleep(0.2)
c.close()
# Each request in one write, as a proxy sends a small one (http.client writes the head and
# the body apart, and whether the server reads them in one go or two varied run to run).
s = socket.create_connection(("127.0.0.1", port), timeout=60)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
pending = b""
def post(path, body):
    global pending
    b = body.encode()
    s.sendall(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(b), b))
    while b"\r\n\r\n" not in pending:
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("%s: the connection closed" % path)
        pending += chunk
    head, pending = pending.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ", 2)[1])
    length = int(next(l.split(b":", 1)[1] for l in head.split(b"\r\n")
                      if l.lower().startswith(b"content-length:")))
    while len(pending) < length:
        pending += s.recv(65536)
    data, pending = pending[:length], pending[length:]
    if status != 200:
        sys.exit("%s answered %d: %s" % (path, status, data))
    return data
who = '"domain":"llm","descriptors":[[{"key":"user","value":"u1"}]]'
plain = "{%s,\"hits\":300}" % who
reserve = "{%s,\"amount\":500}" % who
commit_head = "{%s,\"reservation_id\":\"" % who
commit_tail = "\",\"actual\":300}"
for i in range(n if mode != "idle" else 0):
    if mode == "plain":
        post("/shouldAllowRequest", plain)
    else:
        # The id is cut out of the answer, not parsed: the less the client does between the
        # two steps, the less often the server waits for the commit (a wait costs it ~200).
        answer = post("/reserve", reserve)
        at = answer.index(b'"reservation_id":"') + 18
        post("/commit", commit_head + answer[at:answer.index(b'"', at)].decode() + commit_tail)
EOF
  kill -TERM "$pid"
  wait "$pid" || true
  awk '/^summary:/ {print $2}' "$work/$mode.out"
}

# The inclusive cost of the function named $1 in the pair run (empty if not found).
handler() {
  callgrind_annotate --inclusive=yes --threshold=100 "$work/pair.out" |
    awk -v f="::$1(" '!found && index($0, f) { gsub(",", "", $1); print $1; found = 1 }'
}

idle=$(run idle)
plain=$(run plain)
pair=$(run pair)
reserve=$(handler serveReserve)
commit=$(handler serveCommit)
/usr/bin/python3 - "$idle" "$plain" "$pair" "$requests" "${reserve:-0}" "${commit:-0}" <<'EOF'
import sys
idle, plain, pair, n, reserve, commit = (int(x) for x in sys.argv[1:])
one = (plain - idle) / n
two = (pair - idle) / n
print("instructions per plain decision:        %10.0f" % one)
if reserve and commit:
    outside = (two - reserve / n - commit / n) / 2
    print("instructions per reserve:               %10.0f" % (reserve / n + outside))
    print("instructions per commit:                %10.0f" % (commit / n + outside))
print("instructions per reserve + commit pair: %10.0f" % two)
print("ratio:                                   %10.2f" % (two / one))
EOF

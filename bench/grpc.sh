#!/usr/bin/env bash
# gRPC decisions per second per core (Envoy's ShouldRateLimit) beside the HTTP path
# (/shouldAllowRequest), same binary, same rules, same load generator.
#
#   bench/grpc.sh [--duration S] [--connections N] [--build-dir DIR]
#
# Sluice runs with one I/O thread, pinned with all its threads (grpc++ adds its own) to
# CPU 0; h2load (nghttp2-client) runs on CPU 1 with N connections, one request in flight
# on each: HTTP/2 with a pre-framed gRPC body for gRPC, --h1 for HTTP. Workload: bench's
# "1 hot key" (domain bench, op=fixed_window_allow, every request allowed, memory store).
# Each path is run 3 times, alternated; the median is reported, with Sluice's CPU time per
# decision (from /proc/<pid>/stat), so the figure does not depend on an idle CPU 0.
# Needs: h2load, protoc, taskset (scripts/deps.sh bench).
set -euo pipefail
cd "$(dirname "$0")/.."

duration=4
connections=64
build_dir=${SLUICE_BUILD_DIR:-build}
while (($#)); do
  case $1 in
    --duration) duration=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    *) echo "usage: $0 [--duration S] [--connections N] [--build-dir DIR]" >&2; exit 2 ;;
  esac
done
sluice=$build_dir/sluice
for tool in h2load protoc taskset; do
  command -v $tool >/dev/null || { echo "$tool is missing (scripts/deps.sh bench)" >&2; exit 1; }
done
[[ -x $sluice ]] || { echo "no $sluice (build it first)" >&2; exit 1; }

work=$(mktemp -d)
pid=""
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The gRPC body: RateLimitRequest in protobuf, behind gRPC's 5-byte frame header
# (uncompressed flag, big-endian length).
printf 'domain: "bench"\ndescriptors { entries { key: "op" value: "fixed_window_allow" } }\n' |
  protoc -I proto -I /usr/include --encode=envoy.service.ratelimit.v3.RateLimitRequest \
    envoy/service/ratelimit/v3/rls.proto >"$work/message.bin"
python3 - "$work/message.bin" "$work/grpc.bin" <<'EOF'
import struct, sys
message = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(b"\x00" + struct.pack(">I", len(message)) + message)
EOF
printf '{"domain":"bench","descriptors":[{"entries":[{"key":"op","value":"fixed_window_allow"}]}]}' \
  >"$work/http.json"

http_port=$(free_port)
grpc_port=$(free_port)
taskset -c 0 "$sluice" --threads 1 --rules bench/rules --listen "127.0.0.1:$http_port" \
  --grpc-listen "127.0.0.1:$grpc_port" --log-level warn >"$work/sluice.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$http_port/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$http_port/healthz" >/dev/null || { cat "$work/sluice.log"; exit 1; }
# Pin every thread, including those grpc++ started after exec.
for task in /proc/$pid/task/*; do taskset -pc 0 "${task##*/}" >/dev/null; done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)

run() {  # <label> <h2load args...>: prints "<label> <requests/s> <cpu us per request>"
  local label=$1
  shift
  local before after out rps done
  before=$(cpu_ticks)
  out=$(taskset -c 1 h2load -t 1 -c "$connections" -m 1 -D "$duration" --warm-up-time=1 "$@")
  after=$(cpu_ticks)
  rps=$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
  done=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' <<<"$out")
  [[ -n $rps && -n $done && $done -gt 0 ]] || { echo "$out" >&2; exit 1; }
  python3 -c "import sys; t=($after-$before)/$hz; print('$label', '$rps', round(t*1e6/$done, 1))"
}

results=$work/results
for round in 1 2 3; do
  run grpc -d "$work/grpc.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
    "http://127.0.0.1:$grpc_port/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" \
    >>"$results"
  run http --h1 -d "$work/http.json" -H 'content-type: application/json' \
    "http://127.0.0.1:$http_port/shouldAllowRequest" >>"$results"
done

python3 - "$results" "$connections" "$duration" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def median(label, column):
    return statistics.median(float(r[column]) for r in rows if r[0] == label)
grpc, http = median("grpc", 1), median("http", 1)
grpc_cpu, http_cpu = median("grpc", 2), median("http", 2)
print("h2load -c %s -m 1, %s s x 3 runs each, Sluice --threads 1 on CPU 0, h2load on CPU 1"
      % (sys.argv[2], sys.argv[3]))
print("| path | decisions/s (median) | Sluice CPU per decision | decisions per CPU-second |")
print("|---|---:|---:|---:|")
for label, rps, cpu in (("gRPC ShouldRateLimit", grpc, grpc_cpu),
                        ("HTTP /shouldAllowRequest", http, http_cpu)):
    print("| %s | %s | %.1f us | %s |" % (label, format(int(rps), ","), cpu,
                                          format(int(1e6 / cpu), ",") if cpu else "-"))
print("gRPC / HTTP: %.2fx (throughput), %.2fx (per CPU-second)"
      % (grpc / http, http_cpu / grpc_cpu if grpc_cpu else 0))
EOF

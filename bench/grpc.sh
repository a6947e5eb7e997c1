#!/usr/bin/env bash
# gRPC decisions per second per core (Envoy's ShouldRateLimit) beside the HTTP path
# (/shouldAllowRequest), same binary, same rules, same load generator.
#
#   bench/grpc.sh [--duration S] [--connections N] [--rounds R] [--build-dir DIR]...
#
# Sluice runs with one I/O thread, pinned with all its threads (grpc++ adds its own) to
# CPU 0; h2load (nghttp2-client) runs on CPU 1 with N connections, one request in flight
# on each: HTTP/2 with a pre-framed gRPC body for gRPC, --h1 for HTTP. Workload: bench's
# "1 hot key" (domain bench, op=fixed_window_allow, every request allowed, memory store).
# Each path is run R times (default 3), alternated; the median is reported, with Sluice's
# CPU time per decision (from /proc/<pid>/stat), so the figure does not depend on an idle
# CPU 0. With several --build-dir (e.g. a build of the previous commit and one of this
# commit), one Sluice of each runs and every round loads each in turn: before/after in one
# run, under the same load from the rest of the machine.
# Needs: h2load, protoc, taskset (scripts/deps.sh bench).
set -euo pipefail
cd "$(dirname "$0")/.."

duration=4
connections=64
rounds=3
build_dirs=()
while (($#)); do
  case $1 in
    --duration) duration=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --build-dir) build_dirs+=("$2"); shift 2 ;;
    *) echo "usage: $0 [--duration S] [--connections N] [--rounds R] [--build-dir DIR]..." >&2
       exit 2 ;;
  esac
done
((${#build_dirs[@]})) || build_dirs=("${SLUICE_BUILD_DIR:-build}")
for tool in h2load protoc taskset; do
  command -v $tool >/dev/null || { echo "$tool is missing (scripts/deps.sh bench)" >&2; exit 1; }
done
for dir in "${build_dirs[@]}"; do
  [[ -x $dir/sluice ]] || { echo "no $dir/sluice (build it first)" >&2; exit 1; }
done

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
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

http_ports=()
grpc_ports=()
for i in "${!build_dirs[@]}"; do
  http_port=$(free_port)
  grpc_port=$(free_port)
  taskset -c 0 "${build_dirs[$i]}/sluice" --threads 1 --rules bench/rules \
    --listen "127.0.0.1:$http_port" --grpc-listen "127.0.0.1:$grpc_port" --log-level warn \
    >"$work/sluice-$i.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$http_port/healthz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fsS "http://127.0.0.1:$http_port/healthz" >/dev/null || { cat "$work/sluice-$i.log"; exit 1; }
  # Pin every thread, including those grpc++ started after exec.
  for task in /proc/${pids[$i]}/task/*; do taskset -pc 0 "${task##*/}" >/dev/null; done
  http_ports+=("$http_port")
  grpc_ports+=("$grpc_port")
done

hz=$(getconf CLK_TCK)

run() {  # <pid> <label> <h2load args...>: prints "<label> <requests/s> <cpu us per request>"
  local pid=$1 label=$2
  shift 2
  local before after out rps done
  before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  out=$(taskset -c 1 h2load -t 1 -c "$connections" -m 1 -D "$duration" --warm-up-time=1 "$@")
  after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  rps=$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
  done=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' <<<"$out")
  [[ -n $rps && -n $done && $done -gt 0 ]] || { echo "$out" >&2; exit 1; }
  python3 -c "import sys; t=($after-$before)/$hz; print('$label', '$rps', round(t*1e6/$done, 1))"
}

results=$work/results
for round in $(seq "$rounds"); do
  for i in "${!build_dirs[@]}"; do
    run "${pids[$i]}" "grpc:$i" -d "$work/grpc.bin" -H 'content-type: application/grpc' \
      -H 'te: trailers' \
      "http://127.0.0.1:${grpc_ports[$i]}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" \
      >>"$results"
    run "${pids[$i]}" "http:$i" --h1 -d "$work/http.json" -H 'content-type: application/json' \
      "http://127.0.0.1:${http_ports[$i]}/shouldAllowRequest" >>"$results"
  done
done

python3 - "$results" "$connections" "$duration" "$rounds" "${build_dirs[@]}" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
connections, duration, rounds, dirs = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
def median(label, column):
    return statistics.median(float(r[column]) for r in rows if r[0] == label)
print("h2load -c %s -m 1, %s s x %s runs each, Sluice --threads 1 on CPU 0, h2load on CPU 1"
      % (connections, duration, rounds))
print("| build | path | decisions/s (median) | Sluice CPU per decision | decisions per CPU-second |")
print("|---|---|---:|---:|---:|")
summary = []
for i, name in enumerate(dirs):
    grpc, http = median("grpc:%d" % i, 1), median("http:%d" % i, 1)
    grpc_cpu, http_cpu = median("grpc:%d" % i, 2), median("http:%d" % i, 2)
    for label, rps, cpu in (("gRPC ShouldRateLimit", grpc, grpc_cpu),
                            ("HTTP /shouldAllowRequest", http, http_cpu)):
        print("| %s | %s | %s | %.1f us | %s |" % (name, label, format(int(rps), ","), cpu,
                                                   format(int(1e6 / cpu), ",") if cpu else "-"))
    summary.append("%s: gRPC / HTTP %.2fx (throughput), %.2fx (per CPU-second)"
                   % (name, grpc / http, http_cpu / grpc_cpu if grpc_cpu else 0))
print("\n".join(summary))
EOF

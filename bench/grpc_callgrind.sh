#!/usr/bin/env bash
# What a gRPC answer costs beside an HTTP one, in instructions (valgrind's callgrind: user
# space only, repeatable whatever else the machine does), the companion of bench/grpc.sh's
# CPU times:
#   gRPC ShouldRateLimit / HTTP/1.1 /shouldAllowRequest, gRPC health Check / HTTP /healthz.
#
#   bench/grpc_callgrind.sh [--calls N] [--build-dir DIR]... [--paths "grpc http health healthz"]
#                           [--keep DIR]
#
# For each build and path: `sluice --threads 1` under callgrind, WARM (200) calls from h2load
# (4 connections, one request in flight each, the same pre-framed bodies as bench/grpc.sh),
# counters zeroed, N (default 2000) calls, counters dumped: instructions per answer = the
# dump's total / N. With --keep DIR, the dumps stay there (callgrind_annotate DIR/<path>.out).
# Needs: valgrind, h2load, protoc (scripts/deps.sh bench).
set -euo pipefail
cd "$(dirname "$0")/.."

calls=2000
warm=200
build_dirs=()
keep=
paths="grpc http health healthz"
while (($#)); do
  case $1 in
    --calls) calls=$2; shift 2 ;;
    --build-dir) build_dirs+=("$2"); shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --paths) paths=$2; shift 2 ;;
    *) echo "usage: $0 [--calls N] [--build-dir DIR]... [--paths LIST] [--keep DIR]" >&2
       exit 2 ;;
  esac
done
((${#build_dirs[@]})) || build_dirs=("${SLUICE_BUILD_DIR:-build}")
for tool in valgrind callgrind_control h2load protoc; do
  command -v $tool >/dev/null || { echo "$tool is missing (scripts/deps.sh bench)" >&2; exit 1; }
done

work=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
[[ -n $keep ]] && mkdir -p "$keep"

source bench/grpc_bodies.sh  # free_port; $work/grpc.bin, health.grpc, http.json; grpc_call

load() {  # <n> <path> <http port> <grpc port>
  local n=$1 path=$2 http=$3 grpc=$4 out
  case $path in
    grpc) out=$(h2load -t 1 -c 4 -m 1 -n "$n" -d "$work/grpc.bin" "${grpc_call[@]}" \
      "http://127.0.0.1:$grpc/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit") ;;
    http) out=$(h2load -t 1 -c 4 -m 1 -n "$n" --h1 -d "$work/http.json" \
      -H 'content-type: application/json' "http://127.0.0.1:$http/shouldAllowRequest") ;;
    health) out=$(h2load -t 1 -c 4 -m 1 -n "$n" -d "$work/health.grpc" "${grpc_call[@]}" \
      "http://127.0.0.1:$grpc/grpc.health.v1.Health/Check") ;;
    healthz) out=$(h2load -t 1 -c 4 -m 1 -n "$n" --h1 "http://127.0.0.1:$http/healthz") ;;
  esac
  grep -q "^status codes: $n 2xx" <<<"$out" || { echo "$out" >&2; exit 1; }
}

echo "| build | what | instructions per answer |"
echo "|---|---|---:|"
for dir in "${build_dirs[@]}"; do
  [[ -x $dir/sluice ]] || { echo "no $dir/sluice (build it first)" >&2; exit 1; }
  declare -A per=()
  for path in $paths; do
    http_port=$(free_port)
    grpc_port=$(free_port)
    out=$work/$path.out
    valgrind --tool=callgrind --callgrind-out-file="$out" "$dir/sluice" --threads 1 \
      --rules bench/rules --listen "127.0.0.1:$http_port" --grpc-listen "127.0.0.1:$grpc_port" \
      --log-level warn >"$work/sluice.log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do
      curl -fsS "http://127.0.0.1:$http_port/healthz" >/dev/null 2>&1 && break
      sleep 0.1
    done
    load "$warm" "$path" "$http_port" "$grpc_port"
    callgrind_control --zero "$pid" >/dev/null 2>&1
    load "$calls" "$path" "$http_port" "$grpc_port"
    callgrind_control --dump=measured "$pid" >/dev/null 2>&1
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
    # The dump taken on demand is <out>.<n>; its "summary:" line is the total.
    dump=$(grep -l "^desc: Trigger: dump measured" "$out".* | head -1)
    total=$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$dump")
    per[$path]=$((total / calls))
    printf '| %s | %s | %s |\n' "$dir" "$path" "${per[$path]}"
    if [[ -n $keep ]]; then
      cp "$dump" "$keep/$(basename "$dir")-$path.out"
    fi
    rm -f "$out" "$out".*
  done
  if [[ -n ${per[grpc]:-} && -n ${per[http]:-} ]]; then
    python3 -c "print('$dir: gRPC decision / HTTP decision %.2fx' % (${per[grpc]} / ${per[http]}))"
  fi
  if [[ -n ${per[health]:-} && -n ${per[healthz]:-} ]]; then
    python3 -c "print('$dir: gRPC health / HTTP /healthz %.2fx' % (${per[health]} / ${per[healthz]}))"
  fi
done

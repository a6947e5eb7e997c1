#!/usr/bin/env bash
# Redis memory per bucket key for each algorithm, as the Redis store writes it.
#
#   bench/redis_memory.sh [keys=20000] [--out FILE]
#
# Starts its own redis-server (free loopback port, temp dir, no persistence), composes the
# request script exactly as src/store/redis/redis_store.cpp does (00_time_redis.lua, the
# algorithm files in name order, 99_evaluate.lua), charges `keys` distinct buckets per
# algorithm with one EVALSHA each (keys shaped like the server's:
# "sluice:{<client>|<domain>}<rest of the bucket key>", see BucketKey), and reports:
#   - MEMORY USAGE of one key (value + key + per-key overhead, as Redis accounts it), and
#   - used_memory growth / keys (includes the main dictionary and expires dictionary).
# sliding_window_log grows with its log: one key is also measured with 10 and 100 entries.
set -euo pipefail

KEYS=20000
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    *) KEYS="$1"; shift ;;
  esac
done

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LUA="$ROOT/src/store/redis/lua"
for tool in redis-server redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "redis_memory.sh: $tool is required" >&2; exit 1; }
done

DIR="$(mktemp -d -t sluice-redis-memory-XXXXXX)"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
redis-server --port "$PORT" --bind 127.0.0.1 --dir "$DIR" --save "" --appendonly no \
  --daemonize no --logfile "$DIR/redis.log" &
PID=$!
cleanup() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT
cli() { redis-cli -p "$PORT" "$@"; }
for _ in $(seq 1 100); do
  cli PING >/dev/null 2>&1 && break
  sleep 0.05
done

# The production script, composed as the store composes it.
SCRIPT="$DIR/script.lua"
{
  cat "$LUA/00_time_redis.lua"; echo
  for f in $(ls "$LUA"/*.lua | sort); do
    name="$(basename "$f" .lua)"
    [[ "$name" == 00_* || "$name" == 99_evaluate ]] && continue
    cat "$f"; echo
  done
  cat "$LUA/99_evaluate.lua"
} > "$SCRIPT"
SHA="$(cli -x SCRIPT LOAD < "$SCRIPT")"

used_memory() { cli INFO memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r'; }

# RESP for: EVALSHA sha 1 key "" alg L W 0 0 0 0 1 -1 1 (test time, then per limit: algorithm,
# L, W, burst, min_interval, flags, warmup, cost, quota group; last the number of limits;
# see docs/redis.md)
resp_commands() {  # alg_code alg_name count
  python3 - "$SHA" "$1" "$2" "$3" <<'EOF'
import sys
sha, code, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
out = sys.stdout.buffer
def cmd(*args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    out.write(b"".join(parts))
for i in range(count):
    client = "user-%09d" % i
    key = "sluice:{%s|bench}:k=v;i0;%s" % (client, name)
    cmd("EVALSHA", sha, "1", key, "", code, "100", "3600000000", "0", "0", "0", "0", "1", "-1", "1")
EOF
}

printf '%-24s %14s %18s\n' "algorithm" "MEMORY USAGE" "used_memory/key" | tee "$DIR/result.txt"
code=0
for name in fixed_window sliding_window_log sliding_window_counter token_bucket leaky_bucket; do
  cli FLUSHALL >/dev/null
  before="$(used_memory)"
  resp_commands "$code" "$name" "$KEYS" | cli --pipe >/dev/null
  after="$(used_memory)"
  count="$(cli DBSIZE)"
  sample="sluice:{user-000000000|bench}:k=v;i0;$name"
  usage="$(cli MEMORY USAGE "$sample" SAMPLES 0)"
  per_key=$(( (after - before) / count ))
  printf '%-24s %12s B %16s B\n' "$name" "$usage" "$per_key" | tee -a "$DIR/result.txt"
  code=$((code + 1))
done

# sliding_window_log with more entries in one bucket (one entry per request).
for entries in 10 100; do
  cli FLUSHALL >/dev/null
  key="sluice:{user-1|bench}:k=v;i0;swl"
  for _ in $(seq 1 "$entries"); do
    cli EVALSHA "$SHA" 1 "$key" "" 1 1000 3600000000 0 0 0 0 1 -1 1 >/dev/null
  done
  usage="$(cli MEMORY USAGE "$key" SAMPLES 0)"
  printf '%-24s %12s B %16s\n' "sliding_window_log x$entries" "$usage" "-" | tee -a "$DIR/result.txt"
done

echo "keys per algorithm: $KEYS; redis $(redis-server --version | awk '{print $3}')" |
  tee -a "$DIR/result.txt"
if [[ -n "$OUT" ]]; then
  cp "$DIR/result.txt" "$OUT"
fi

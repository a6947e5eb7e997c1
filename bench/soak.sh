#!/usr/bin/env bash
# Soak (issue 13; not in CI): Sluice on the Redis store under steady load at half of its
# maximum rate for --minutes (default 30), Redis restarted every --restart-every seconds
# (default 120) and the rules reloaded every 10 s. Reports RSS, open file descriptors and
# threads over time (and their slope), errors outside the failure-mode windows (goal 0),
# and whether a probe key's count is exact after every restart.
#
# Usage: bench/soak.sh [--minutes N] [--restart-every S] [--threads N] [--out DIR]
#                      [--sluice PATH (default build/sluice)] [--rate R (default: half the max)]
# Needs: build/sluice (Release), redis-server, redis-cli, curl, python3; builds the load
# generator (bench_soak_load, bench/soak_load.cpp) in the build directory of --sluice.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=30
restart_every=120
threads=2
out=bench/results/soak
sluice_bin=build/sluice
rate=
while (($#)); do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --restart-every) restart_every=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --sluice) sluice_bin=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    -h|--help) sed -n 2,11p "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done

[[ -x $sluice_bin ]] || { echo "build $sluice_bin first (scripts/build.sh)" >&2; exit 1; }
build_dir=$(dirname "$sluice_bin")
cmake --build "$build_dir" --target bench_soak_load >/dev/null
load_bin=$build_dir/bench/bench_soak_load
mkdir -p "$out"
work=$(mktemp -d /tmp/sluice-soak.XXXXXX)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
redis_port=$(free_port)
http_port=$(free_port)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

start_redis() {
  # Persistence on (SHUTDOWN SAVE, then loaded again): the counts survive each restart.
  redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$work" --save "" --appendonly no \
    --daemonize yes --logfile "$work/redis.log" >/dev/null
  for _ in $(seq 100); do
    redis-cli -p "$redis_port" ping 2>/dev/null | grep -q PONG && return 0
    sleep 0.05
  done
  echo "redis did not start" >&2; exit 1
}

mkdir -p "$work/rules"
write_rules() {
  cat >"$work/rules/soak.yaml.tmp" <<EOF
# reload $1
domain: soak
descriptors:
  - key: op
    value: read
    rate_limit: {unit: second, requests_per_unit: $((1000000 + $1 % 2))}
  - key: probe
    rate_limit: {unit: day, requests_per_unit: 1000000}
EOF
  mv "$work/rules/soak.yaml.tmp" "$work/rules/soak.yaml"
}
write_rules 0
start_redis
"$sluice_bin" --listen "127.0.0.1:$http_port" --rules "$work/rules" --store redis \
  --redis "redis://127.0.0.1:$redis_port/0" --failure-mode open --threads "$threads" \
  >"$work/sluice.log" 2>&1 &
sluice_pid=$!
pids+=("$sluice_pid")
for _ in $(seq 200); do
  curl -fs "http://127.0.0.1:$http_port/readyz" >/dev/null 2>&1 && break
  sleep 0.05
done
curl -fs "http://127.0.0.1:$http_port/readyz" >/dev/null || { echo "sluice not ready" >&2; exit 1; }

probe_ok=0       # probe requests answered by Redis: each counted there once
probe_unsure=0   # answered by the failure mode: counted in Redis or not (a timed-out script may have run)
probe() {  # $1 requests with hits 1 on the probe key
  local i status
  for ((i = 0; i < $1; i++)); do
    status=$(curl -s -o /dev/null -D - -X POST "http://127.0.0.1:$http_port/shouldAllowRequest" \
      -H 'Content-Type: application/json' \
      -d '{"domain":"soak","clientId":"probe","descriptors":[[{"key":"probe","value":"p"}]]}' |
      tr -d '\r' | awk 'NR==1{s=$2} /^X-Sluice-Degraded: true/{d=1} END{print (s==200 && !d) ? "ok" : "no"}')
    if [[ $status == ok ]]; then
      probe_ok=$((probe_ok + 1))
    else
      probe_unsure=$((probe_unsure + 1))
    fi
  done
}
probe_count() {  # the probe's count as Redis holds it (hits 0 charges nothing: safe to repeat)
  local i answer
  for ((i = 0; i < 50; i++)); do
    answer=$(curl -s -D - -o /dev/null -X POST "http://127.0.0.1:$http_port/shouldAllowRequest" \
      -H 'Content-Type: application/json' \
      -d '{"domain":"soak","clientId":"probe","hits":0,"descriptors":[[{"key":"probe","value":"p"}]]}' |
      tr -d '\r' | awk '/^X-Sluice-Degraded: true/{d=1} /^X-Ratelimit-Remaining:/{r=$2}
                        END{if (!d && r != "") print 1000000 - r}')
    [[ -n $answer ]] && { echo "$answer"; return 0; }
    sleep 0.1
  done
  echo ""
}

echo "measuring the maximum rate (10 s, unpaced, 64 connections)..."
max_json=$("$load_bin" --target "127.0.0.1:$http_port" --connections 64 --seconds 10 \
  --out "$out/max.csv")
max_rate=$(python3 -c "import json,sys; j=json.loads(sys.argv[1]); print(int(j['ok'] / j['seconds']))" "$max_json")
[[ -n $rate ]] || rate=$((max_rate / 2))
echo "max ${max_rate}/s answered by Redis ($max_json); soaking at ${rate}/s for ${minutes} min"

seconds=$((minutes * 60))
"$load_bin" --target "127.0.0.1:$http_port" --rate "$rate" --seconds "$seconds" \
  --connections 32 --out "$out/load.csv" >"$out/load.json" &
load_pid=$!
pids+=("$load_pid")

echo "t,rss_kb,fds,threads,load1" >"$out/resources.csv"
echo "t_down,t_healthy,probe_expected,probe_unsure,probe_in_redis" >"$out/restarts.csv"
start=$(date +%s)
next_restart=$((start + restart_every))
next_reload=$((start + 10))
reloads=0
while (($(date +%s) < start + seconds)) && kill -0 "$sluice_pid" 2>/dev/null; do
  now=$(date +%s)
  echo "$now,$(awk '/VmRSS/{print $2}' /proc/$sluice_pid/status),$(ls /proc/$sluice_pid/fd | wc -l),$(awk '/Threads/{print $2}' /proc/$sluice_pid/status),$(cut -d' ' -f1 /proc/loadavg)" >>"$out/resources.csv"
  if ((now >= next_reload)); then
    reloads=$((reloads + 1))
    write_rules "$reloads"
    kill -HUP "$sluice_pid"
    next_reload=$((now + 10))
  fi
  if ((now >= next_restart && now + 20 < start + seconds)); then
    probe 20
    expected=$probe_ok
    down=$(date +%s.%N)
    redis-cli -p "$redis_port" shutdown save >/dev/null 2>&1 || true
    start_redis
    for _ in $(seq 1200); do  # 60 s at most
      curl -s "http://127.0.0.1:$http_port/readyz" | grep -q '"store":"healthy"' && break
      sleep 0.05
    done
    healthy=$(date +%s.%N)
    in_redis=$(probe_count)
    echo "$down,$healthy,$expected,$probe_unsure,$in_redis" >>"$out/restarts.csv"
    echo "restart: healthy again after $(python3 -c "print(round($healthy - $down, 2))") s; probe $in_redis in Redis, $expected expected"
    next_restart=$(($(date +%s) + restart_every))
  fi
  sleep 5
done
kill -TERM "$load_pid" 2>/dev/null || true
wait "$load_pid" 2>/dev/null || true
alive=yes
kill -0 "$sluice_pid" 2>/dev/null || alive=no
cp "$work/sluice.log" "$out/sluice.log"

python3 - "$out" "$rate" "$max_rate" "$minutes" "$alive" "$reloads" <<'EOF' | tee "$out/summary.md"
import csv, statistics, sys
out, rate, max_rate, minutes, alive, reloads = sys.argv[1:7]
res = list(csv.DictReader(open(f"{out}/resources.csv")))
load = list(csv.DictReader(open(f"{out}/load.csv")))
restarts = list(csv.DictReader(open(f"{out}/restarts.csv")))
def slope(key, rows):
    xs = [float(r["t"]) for r in rows]; ys = [float(r[key]) for r in rows]
    n = len(xs); mx = sum(xs) / n; my = sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    return (sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var * 3600) if var else 0.0
# A failure-mode window: from Redis going down to the store healthy again, plus 1 s either
# side (the generator's one-second buckets).
windows = [(float(r["t_down"]) - 1, float(r["t_healthy"]) + 1) for r in restarts]
inside = lambda t: any(a <= t <= b for a, b in windows)
tot = {k: sum(int(r[k]) for r in load) for k in ("sent", "ok", "degraded", "denied", "errors")}
outside = [r for r in load if not inside(float(r["t"]))]
err_out = sum(int(r["errors"]) for r in outside)
deg_out = sum(int(r["degraded"]) for r in outside)
deg_seconds = sum(1 for r in outside if int(r["degraded"]) > 0)
in_windows = sum(int(r["degraded"]) + int(r["errors"]) for r in load if inside(float(r["t"])))
# No probe request lost or charged twice: Redis holds at least the probe requests it
# answered, and at most every probe request sent (an answer from the failure mode, past the
# deadline, may have run in Redis, once). "All sent": equal to every probe request sent.
sent = lambda r: int(r["probe_expected"]) + int(r["probe_unsure"])
held = lambda r: int(r["probe_in_redis"] or -1)
all_sent = sum(1 for r in restarts if held(r) == sent(r))
in_range = sum(1 for r in restarts if int(r["probe_expected"]) <= held(r) <= sent(r))
rates = [int(r["sent"]) for r in load]
slow = max(float(r["max_ms"]) for r in outside) if outside else 0.0
loads = [float(r["load1"]) for r in res]
first, last = res[0], res[-1]
late = res[len(res) // 2:]
print(f"## Soak: {minutes} min, {rate} req/s (half of the {max_rate}/s measured), "
      f"{len(restarts)} Redis restarts, {reloads} rule reloads\n")
print(f"- sluice alive at the end: {alive}")
print(f"- requests: {tot['sent']} answered ({statistics.median(rates):.0f}/s median, "
      f"{min(rates)} to {max(rates)} per second): {tot['ok']} by Redis, {tot['degraded']} by "
      f"the failure mode, {tot['denied']} denied, {tot['errors']} errors")
print(f"- inside the failure-mode windows: {in_windows} answers by the failure mode or errors")
print(f"- outside the failure-mode windows: {err_out} errors (goal 0), {deg_out} degraded "
      f"answers in {deg_seconds} second(s); slowest answer {slow:.0f} ms")
print(f"- probe count in Redis: between the probe requests Redis answered and all those sent "
      f"after {in_range} of {len(restarts)} restarts; equal to all those sent after {all_sent}")
for key, unit in (("rss_kb", "KiB"), ("fds", "fds"), ("threads", "threads")):
    print(f"- {key}: {first[key]} -> {last[key]} {unit}, min {min(int(r[key]) for r in res)}, "
          f"max {max(int(r[key]) for r in res)}; slope {slope(key, res):+.1f} {unit}/hour "
          f"over the run, {slope(key, late):+.1f} over its second half")
print(f"- machine load (1-minute load average, 2 cores): median {statistics.median(loads):.1f}, "
      f"max {max(loads):.1f}")
print("\n| restart | down -> healthy (s) | probe answered by Redis (total) | by the failure "
      "mode (total) | probe in Redis |\n|---|---|---|---|---|")
for i, r in enumerate(restarts, 1):
    print(f"| {i} | {float(r['t_healthy']) - float(r['t_down']):.2f} | {r['probe_expected']} | "
          f"{r['probe_unsure']} | {r['probe_in_redis']} |")
EOF

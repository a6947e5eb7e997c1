#!/usr/bin/env bash
# What a gRPC answer costs beside an HTTP one, as CPU time of the server per answer (utime +
# stime of the whole process from /proc/<pid>/stat, so the figure does not depend on an idle
# core), in one run that prints the ratios:
#   gRPC ShouldRateLimit / HTTP/1.1 /shouldAllowRequest   the same decision (goal <= 1.5x)
#   gRPC grpc.health.v1 Check / HTTP /healthz             answers deciding nothing (<= 1.2x)
#   each of them / nginx `return 200`                     an HTTP answer doing no work, to
#                                                         the HTTP decision's own POST
#
#   bench/grpc.sh [--duration S] [--connections N] [--rounds R] [--build-dir DIR]... [--json FILE]
#
# Sluice runs with one I/O thread, pinned with all its threads to CPU 0, nginx (one worker)
# too; h2load (nghttp2-client) runs on CPU 1 with N connections, one request in flight on
# each: HTTP/2 with a pre-framed gRPC body for gRPC, --h1 for HTTP. Workload: bench's "1 hot
# key" (domain bench, op=fixed_window_allow, every request allowed, memory store). Paths are
# alternated within each round, R rounds (default 3) after an unrecorded round of 1 s runs that
# warms every path up, and the median is reported. With several
# --build-dir (e.g. a build of the previous commit and one of this commit), one Sluice of
# each runs and every round loads each in turn: before/after in one run, under the same load
# from the rest of the machine.
# Needs: h2load, protoc, taskset, nginx (scripts/deps.sh bench).
set -euo pipefail
cd "$(dirname "$0")/.."

duration=4
connections=64
rounds=3
build_dirs=()
json_out=""
while (($#)); do
  case $1 in
    --duration) duration=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --build-dir) build_dirs+=("$2"); shift 2 ;;
    --json) json_out=$2; shift 2 ;;
    *) echo "usage: $0 [--duration S] [--connections N] [--rounds R] [--build-dir DIR]... [--json FILE]" >&2
       exit 2 ;;
  esac
done
((${#build_dirs[@]})) || build_dirs=("${SLUICE_BUILD_DIR:-build}")
for tool in h2load protoc taskset nginx; do
  command -v $tool >/dev/null || { echo "$tool is missing (scripts/deps.sh bench)" >&2; exit 1; }
done
for dir in "${build_dirs[@]}"; do
  [[ -x $dir/sluice ]] || { echo "no $dir/sluice (build it first)" >&2; exit 1; }
done

source bench/scratch.sh  # $work, $pids (stopped at exit), answers URL

source bench/grpc_bodies.sh  # free_port; $work/grpc.bin, health.grpc, http.json; grpc_call

http_ports=()
grpc_ports=()
for i in "${!build_dirs[@]}"; do
  http_port=$(free_port)
  grpc_port=$(free_port)
  taskset -c 0 "${build_dirs[$i]}/sluice" --threads 1 --rules bench/rules \
    --listen "127.0.0.1:$http_port" --grpc-listen "127.0.0.1:$grpc_port" --log-level warn \
    >"$work/sluice-$i.log" 2>&1 &
  pids+=($!)
  answers "http://127.0.0.1:$http_port/healthz" || { cat "$work/sluice-$i.log"; exit 1; }
  # Pin every thread, including any a library started after exec.
  for task in /proc/${pids[$i]}/task/*; do taskset -pc 0 "${task##*/}" >/dev/null; done
  http_ports+=("$http_port")
  grpc_ports+=("$grpc_port")
done

# nginx `return 200`: one worker, pinned beside Sluice, no logging. It is sent the HTTP decision's
# request (the same POST and body), so that the request's bytes and h2load's work are the same.
nginx_port=$(free_port)
mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
master_process off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  client_body_temp_path $work/nginx;
  proxy_temp_path $work/nginx;
  fastcgi_temp_path $work/nginx;
  uwsgi_temp_path $work/nginx;
  scgi_temp_path $work/nginx;
  server {
    listen 127.0.0.1:$nginx_port backlog=4096;
    location / { return 200 "ok\n"; }
  }
}
EOF
taskset -c 0 nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" >"$work/nginx/out.log" 2>&1 &
nginx_pid=$!
pids+=($nginx_pid)
answers "http://127.0.0.1:$nginx_port/" || { cat "$work/nginx/out.log"; exit 1; }

hz=$(getconf CLK_TCK)

# The CPU and the answers are counted over the same interval: the whole h2load run, connections
# included (64 connection setups are a few ms of a 4 s run). h2load's --warm-up-time would leave
# its first second's answers out of the count but not the server's CPU of that second, which
# overstated every figure by a quarter; each path gets an unrecorded warm-up run instead.
run() {  # <pid> <label> <h2load args...>: prints "<label> <requests/s> <cpu us per request>"
  local pid=$1 label=$2
  shift 2
  local before after out rps answered
  before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  out=$(taskset -c 1 h2load -t 1 -c "$connections" -m 1 -D "$run_for" "$@")
  after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  rps=$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
  answered=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' <<<"$out")
  [[ -n $rps && -n $answered && $answered -gt 0 ]] || { echo "$out" >&2; exit 1; }
  python3 -c "t=($after-$before)/$hz; print('$label', '$rps', round(t*1e6/$answered, 1))"
}

results=$work/results
for round in $(seq 0 "$rounds"); do
  # Round 0 warms every path up (1 s each) and is not recorded.
  sink=$results run_for=$duration
  ((round)) || { sink=/dev/null; run_for=1; }
  for i in "${!build_dirs[@]}"; do
    run "${pids[$i]}" "grpc:$i" -d "$work/grpc.bin" "${grpc_call[@]}" \
      "http://127.0.0.1:${grpc_ports[$i]}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" \
      >>"$sink"
    run "${pids[$i]}" "http:$i" --h1 -d "$work/http.json" -H 'content-type: application/json' \
      "http://127.0.0.1:${http_ports[$i]}/shouldAllowRequest" >>"$sink"
    run "${pids[$i]}" "health:$i" -d "$work/health.grpc" "${grpc_call[@]}" \
      "http://127.0.0.1:${grpc_ports[$i]}/grpc.health.v1.Health/Check" >>"$sink"
    run "${pids[$i]}" "healthz:$i" --h1 "http://127.0.0.1:${http_ports[$i]}/healthz" >>"$sink"
  done
  run "$nginx_pid" "nginx" --h1 -d "$work/http.json" -H 'content-type: application/json' \
    "http://127.0.0.1:$nginx_port/shouldAllowRequest" >>"$sink"
done

python3 - "$results" "$connections" "$duration" "$rounds" "$json_out" "${build_dirs[@]}" <<'EOF'
import json, statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
connections, duration, rounds, json_out, dirs = (sys.argv[2], sys.argv[3], sys.argv[4],
                                                 sys.argv[5], sys.argv[6:])
def median(label, column):
    return statistics.median(float(r[column]) for r in rows if r[0] == label)
print("h2load -c %s -m 1, %s s x %s alternated rounds, servers on CPU 0 (Sluice --threads 1, "
      "nginx one worker), h2load on CPU 1; CPU = utime+stime of the server per answer"
      % (connections, duration, rounds))
print("| build | what | answers/s (median) | server CPU per answer |")
print("|---|---|---:|---:|")
nginx_cpu = median("nginx", 2)
summary = []
for i, name in enumerate(dirs):
    cpu = {}
    for key, label in (("grpc", "gRPC ShouldRateLimit"), ("http", "HTTP/1.1 /shouldAllowRequest"),
                       ("health", "gRPC health Check"), ("healthz", "HTTP/1.1 /healthz")):
        cpu[key] = median("%s:%d" % (key, i), 2)
        rate = format(int(median("%s:%d" % (key, i), 1)), ",")
        print("| %s | %s | %s | %.1f us |" % (name, label, rate, cpu[key]))
    summary.append("%s: gRPC decision / HTTP decision %.2fx (goal <= 1.5x); gRPC health / "
                   "HTTP /healthz %.2fx (goal <= 1.2x); HTTP decision / nginx return 200 %.2fx; "
                   "gRPC decision / nginx %.2fx"
                   % (name, cpu["grpc"] / cpu["http"], cpu["health"] / cpu["healthz"],
                      cpu["http"] / nginx_cpu, cpu["grpc"] / nginx_cpu))
print("| nginx | return 200 | %s | %.1f us |" % (format(int(median("nginx", 1)), ","), nginx_cpu))
print("\n".join(summary))
# Each round measures a build's paths back to back: the ratio within a round pairs runs under
# the same load from the rest of the machine, and the median of those ratios moves less than
# the ratio of the medians on a busy machine.
def paired(i, a, b):
    runs_a = [float(r[2]) for r in rows if r[0] == "%s:%d" % (a, i)]
    runs_b = [float(r[2]) for r in rows if r[0] == "%s:%d" % (b, i)]
    return statistics.median(x / y for x, y in zip(runs_a, runs_b))
for i, name in enumerate(dirs):
    print("%s, median of the rounds' own ratios: gRPC decision / HTTP decision %.2fx; "
          "gRPC health / HTTP /healthz %.2fx"
          % (name, paired(i, "grpc", "http"), paired(i, "health", "healthz")))
if json_out:
    def point(label):
        return {"rps": median(label, 1), "cpu_us_per_answer": median(label, 2),
                "runs": [{"rps": float(r[1]), "cpu_us_per_answer": float(r[2])}
                         for r in rows if r[0] == label]}
    doc = {"connections": int(connections), "duration_s": float(duration),
           "rounds": int(rounds), "nginx_return_200": point("nginx"),
           "builds": [dict({"build_dir": name},
                           **{key: point("%s:%d" % (key, i))
                              for key in ("grpc", "http", "health", "healthz")})
                      for i, name in enumerate(dirs)]}
    with open(json_out, "w") as f:
        json.dump(doc, f, indent=1)
EOF

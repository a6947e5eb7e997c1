"""Markdown table and PNG plot of a benchmark result (bench/bench.py's latest.json).

Usage on its own: python3 bench/report.py bench/results/latest.json [out-dir]
"""

import json
import os
import shutil
import statistics
import subprocess
import sys

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
SYSTEMS = ["sluice-memory", "nginx", "haproxy", "sluice-redis", "sluice-eventual", "node",
           "redis-benchmark", "redis-benchmark-P16", "redis-benchmark-shared", "nginx-null",
           "nginx-null-get"]
TITLES = {"sluice-memory": "Sluice memory", "nginx": "nginx limit_req",
          "haproxy": "HAProxy stick table", "sluice-redis": "Sluice Redis",
          "node": "Node RLF+ioredis", "redis-benchmark": "redis-benchmark EVALSHA",
          "redis-benchmark-P16": "redis-benchmark EVALSHA -P16",
          "redis-benchmark-shared": "redis-benchmark EVALSHA, Redis sharing CPU 1",
          "nginx-null": "nginx return 200 to the same POST (null answer)",
          "nginx-null-get": "nginx return 200 to a GET",
          "sluice-eventual": "Sluice Redis eventual"}
# CPU per answer: (numerator, its figure, denominator, its figure, goal: at most this ratio,
# workloads). A figure is "server" (the system's process) or "redis" (its redis-server).
CPU_GOALS = [
    ("sluice-memory", "server", "haproxy", "server", 1.0, ["10k_allow", "10k_deny"]),
    ("sluice-memory", "server", "nginx-null", "server", 1.15, ["hot_allow", "10k_allow"]),
    ("sluice-redis", "redis", "redis-benchmark", "redis", 0.5, ["10k_allow"]),
]
# (numerator, denominator, target ratio or None)
RATIOS = [("sluice-memory", "nginx", 1.0), ("sluice-memory", "haproxy", None),
          ("sluice-redis", "redis-benchmark", 1.0), ("sluice-redis", "node", 3.0),
          ("sluice-redis", "redis-benchmark-P16", None),
          ("sluice-redis", "redis-benchmark-shared", None),
          ("sluice-eventual", "sluice-memory", 0.8)]
# The gRPC answers (bench/grpc.sh): (numerator, denominator, label, goal: at most this ratio).
GRPC_GOALS = [("grpc", "http", "gRPC `ShouldRateLimit` / HTTP/1.1 `/shouldAllowRequest`", 1.5),
              ("health", "healthz", "gRPC health `Check` / HTTP `/healthz`", 1.2),
              ("http", "nginx", "HTTP/1.1 decision / nginx `return 200`", None),
              ("grpc", "nginx", "gRPC decision / nginx `return 200`", None)]
GRPC_TITLES = {"grpc": "gRPC `ShouldRateLimit` (Envoy's RLS)",
               "http": "HTTP/1.1 `/shouldAllowRequest`, the same decision",
               "health": "gRPC `grpc.health.v1.Health/Check`", "healthz": "HTTP/1.1 `/healthz`"}


def med(point, key="rps"):
    if not point:
        return None
    s = point["summary"].get(key)
    return s["median"] if s else None


def fmt_rps(point):
    if not point:
        return "—"
    s = point["summary"]["rps"]
    return f"{s['median']:,.0f} ±{s['spread_pct'] / 2:.0f}%"


def fmt_ms(us):
    return "—" if us is None else f"{us / 1000:.3f}"


def ratio(a, b):
    if a is None or not b:
        return None
    return a / b


def paired(pa, pb, key):
    """The median of the runs' own ratios, run i of one system beside run i of the other: the
    runs are alternated, so the two of one round are seconds apart and share the machine's
    speed at that moment, which moves by more than these ratios' margins within a run. The
    ratio of the medians (the goal's figure) compares runs made at different moments."""
    if not pa or not pb:
        return None
    rs = [x[key] / y[key] for x, y in zip(pa.get("runs", []), pb.get("runs", []))
          if x.get(key) is not None and y.get(key)]
    return statistics.median(rs) if rs else None


def bound_lines(doc, wls, present):
    """Which core each system's rate was bound by: a ratio of two rates measured while the
    load generator's core was full is a ratio of the load generator's costs, not of the
    systems'. Runs of bench.py before the load generator's CPU was recorded have none."""
    tp = doc["throughput"]
    st = doc["settings"]
    if not any(med(tp[w["id"]].get(s), "load_cpu_share") is not None for w in wls
               for s in present):
        return []
    lines = ["", f"## What bounds each rate: busy share of CPU {st['server_cpu']} (the system) "
             f"and CPU {st['load_cpu']} (wrk, and redis-server for Redis-backed systems)", "",
             "| workload | " + " | ".join(TITLES[s] for s in present
                                      if not s.startswith("redis-benchmark")) + " |",
             "|---|" + "---:|" * len([s for s in present if not s.startswith("redis-benchmark")])]
    full = 0.95
    for w in wls:
        row = tp[w["id"]]
        cells = []
        for s in present:
            if s.startswith("redis-benchmark"):
                continue
            p = row.get(s)
            server = med(p, "cpu_share")
            load = med(p, "load_cpu_share")
            if server is None or load is None:
                cells.append("—")
                continue
            redis_us = med(p, "redis_cpu_us_per_decision") or 0.0
            load += redis_us * med(p) / 1e6
            verdict = ("CPU " + st["load_cpu"] if load >= full and load >= server
                       else "CPU " + st["server_cpu"] if server >= full else "neither")
            cells.append(f"{server * 100:.0f}% / {load * 100:.0f}%: {verdict}")
        lines.append(f"| {w['label']} | " + " | ".join(cells) + " |")
    lines += ["", f"Each cell: CPU {st['server_cpu']} / CPU {st['load_cpu']} busy (medians of "
              f"utime+stime over the run), then the core at ≥ {full * 100:.0f}% that bounds the "
              f"rate. Where it is CPU {st['load_cpu']}, the rate is what wrk (and redis-server) "
              "can offer, and a ratio between two such rates compares the load generator's cost "
              "for each protocol (Sluice's JSON POST and its answer against a GET with a header "
              "and a status line), not the systems; compare their CPU per decision instead. "
              "wrk's CPU per request: " + "; ".join(
                  f"{TITLES[s]} " + "/".join(
                      f"{med(tp[w['id']].get(s), 'load_cpu_us_per_request'):.1f}"
                      for w in wls if med(tp[w["id"]].get(s), "load_cpu_us_per_request"))
                  for s in present if not s.startswith("redis-benchmark")
                  and any(med(tp[w["id"]].get(s), "load_cpu_us_per_request") for w in wls))
              + " µs (workloads in the table's order)."]
    return lines


def cpu_lines(doc, wls, present):
    """The headline: CPU time of each server process per answer, and the ratios with goals."""
    tp = doc["throughput"]
    shown = [s for s in present if s not in ("redis-benchmark-P16", "redis-benchmark-shared")]
    lines = ["## CPU per answer (the yardstick)", "",
             "µs of CPU time of the server process per answer (utime+stime from /proc over each "
             "run, medians); for Redis-backed systems `server + redis-server`. On this machine "
             "the load generator and redis-server share a core, so a rate says which core "
             "bounded the run (below); CPU per answer says what an answer costs.", "",
             "| workload | " + " | ".join(TITLES[s] for s in shown) + " |",
             "|---|" + "---:|" * len(shown)]
    for w in wls:
        row = tp[w["id"]]
        cells = []
        for s in shown:
            a = med(row.get(s), "cpu_us_per_decision")
            r = med(row.get(s), "redis_cpu_us_per_decision")
            if a is None and r is None:
                cells.append("—")
            elif a is None:
                cells.append(f"{r:.1f} (redis-server)")
            elif r is None:
                cells.append(f"{a:.1f}")
            else:
                cells.append(f"{a:.1f} + {r:.1f}")
        lines.append(f"| {w['label']} | " + " | ".join(cells) + " |")
    lines += ["", "Ratios of CPU per answer [goal: at most]:", "",
              "| ratio | " + " | ".join(w["label"] for w in wls
                                      if any(w["id"] in g[5] for g in CPU_GOALS)) + " |",
              "|---|" + "---:|" * len([w for w in wls
                                       if any(w["id"] in g[5] for g in CPU_GOALS)])]
    key = {"server": "cpu_us_per_decision", "redis": "redis_cpu_us_per_decision"}
    for a, fa, b, fb, goal, ids in CPU_GOALS:
        cells = []
        for w in wls:
            if not any(w["id"] in g[5] for g in CPU_GOALS):
                continue
            row = tp[w["id"]]
            r = ratio(med(row.get(a), key[fa]), med(row.get(b), key[fb])) if w["id"] in ids \
                else None
            # Paired only where both figures are the alternated servers' own.
            rr = paired(row.get(a), row.get(b), key[fa]) \
                if r is not None and fa == fb == "server" else None
            cells.append("—" if r is None else f"{r:.2f}× " + ("✓" if r <= goal else "✗")
                         + ("" if rr is None else f" ({rr:.2f}×)"))
        label = (f"{TITLES[a]}{' (redis-server)' if fa == 'redis' else ''} / "
                 f"{TITLES[b]}{' (redis-server)' if fb == 'redis' else ''} [≤ {goal:g}×]")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Each ratio is of the two systems' medians; in brackets, the median of the runs' "
              "own ratios, each run beside the other system's run of the same round (seconds "
              "apart, on the same machine speed), shown without a verdict."]
    return lines + grpc_lines(doc)


def grpc_lines(doc):
    """The gRPC answers beside HTTP ones and nginx's null answer (bench/grpc.sh's medians)."""
    g = doc.get("grpc") or {}
    if not g.get("builds"):
        why = (doc.get("skipped") or {}).get("grpc")
        return ["", "gRPC answers: not measured in this run" + (f" ({why})." if why else
                                                              " (`--no-grpc` or `--smoke`)."), ""]
    b = g["builds"][0]
    fig = dict(b, nginx=g["nginx_return_200"])
    lines = ["", "### gRPC answers beside HTTP ones", "",
             f"`bench/grpc.sh` in the same run: h2load (one thread, {g['connections']} "
             f"connections, one call in flight each) on CPU 1, Sluice (`--threads 1`) and nginx "
             f"(one worker, `return 200`) on CPU 0; {g['rounds']} round{'s' if g['rounds'] != 1 else ''} of "
             f"{g['duration_s']:g} s after an unrecorded round of 1 s runs, the paths alternated "
             f"within each round; medians.", "",
             "| answer | answers/s | µs CPU / answer (server) |", "|---|---:|---:|"]
    for key in ("grpc", "http", "health", "healthz"):
        lines.append(f"| {GRPC_TITLES[key]} | {fig[key]['rps']:,.0f} | "
                     f"{fig[key]['cpu_us_per_answer']:.1f} |")
    lines.append(f"| {TITLES['nginx-null']} | {fig['nginx']['rps']:,.0f} | "
                 f"{fig['nginx']['cpu_us_per_answer']:.1f} |")
    lines += ["", "| ratio of CPU per answer [goal: at most] | |", "|---|---:|"]
    for a, b_, label, goal in GRPC_GOALS:
        r = ratio(fig[a]["cpu_us_per_answer"], fig[b_]["cpu_us_per_answer"])
        rr = paired(fig[a], fig[b_], "cpu_us_per_answer")
        cell = "—" if r is None else f"{r:.2f}×" + ("" if goal is None
                                                   else (" ✓" if r <= goal else " ✗"))
        cell += "" if r is None or rr is None else f" ({rr:.2f}×)"
        lines.append(f"| {label}" + (f" [≤ {goal:g}×]" if goal else "") + f" | {cell} |")
    return lines + ["", "In brackets, as above: the median of the rounds' own ratios.", ""]


def markdown(doc):
    tp = doc["throughput"]
    wls = [w for w in doc["workloads"] if w["id"] in tp]
    present = [s for s in SYSTEMS if any(s in tp[w["id"]] for w in wls)]
    m = doc["machine"]
    st = doc["settings"]
    lines = [
        "# Sluice benchmark: decisions per second, latency, CPU and memory against peers",
        "",
        f"Generated {doc['generated_at']} at commit `{doc['git_commit']}` by `{doc['command']}` "
        f"({doc['profile']} profile, {doc['elapsed_s']:.0f} s).",
        f"Machine: {m.get('cpu')}, {m.get('cores')} cores, Linux {m.get('kernel')}; "
        f"{m.get('nginx')}; {m.get('haproxy')}; {m.get('redis')}; node {m.get('node')} with "
        + ", ".join(f"{k} {v}" for k, v in (m.get("node_packages") or {}).items()) + "; "
        f"{m.get('wrk')}.",
        f"Each point: {st['runs']} runs of {st['duration_s']} s, systems alternated run by run; "
        f"median, and ± half the spread (max − min) between runs. wrk -t1 -c{st['connections']} "
        f"on CPU {st['load_cpu']}; the system under test on CPU {st['server_cpu']} with one "
        f"thread/worker; redis-server (Redis-backed systems) on CPU {st['redis_cpu']}.",
        f"Load average (1/5/15 min) before the run: "
        f"{' / '.join(str(x) for x in doc.get('load_average_before', []))}, after: "
        f"{' / '.join(str(x) for x in doc.get('load_average_after', []))} (2 cores; other work "
        f"on the machine shows in the spread).",
        "",
    ] + cpu_lines(doc, wls, present) + [
        "## Decisions per second",
        "",
        "| workload | " + " | ".join(TITLES[s] for s in present) + " |",
        "|---|" + "---:|" * len(present),
    ]
    for w in wls:
        row = tp[w["id"]]
        lines.append(f"| {w['label']} | " + " | ".join(fmt_rps(row.get(s)) for s in present) + " |")
    lines += ["", "Ratios (medians; target in brackets):", "",
              "| workload | " + " | ".join(
                  f"{TITLES[a]} / {TITLES[b]}" + (f" [≥ {t:g}×]" if t else "")
                  for a, b, t in RATIOS) + " |",
              "|---|" + "---:|" * len(RATIOS)]
    for w in wls:
        row = tp[w["id"]]
        cells = []
        for a, b, t in RATIOS:
            r = ratio(med(row.get(a)), med(row.get(b)))
            if r is None:
                cells.append("—")
            else:
                mark = "" if t is None else (" ✓" if r >= t else " ✗")
                cells.append(f"{r:.2f}×{mark}")
        lines.append(f"| {w['label']} | " + " | ".join(cells) + " |")

    bound = bound_lines(doc, wls, present)
    if bound:
        lines += bound
    deny = tp.get("10k_deny", {})
    if deny:
        lines += ["", "Denied share in the mostly-denied workload: " + ", ".join(
            f"{TITLES[s]} {med(deny[s], 'denied_share') * 100:.1f}%" for s in present
            if s in deny and med(deny[s], "denied_share") is not None) + "."]

    lat = doc.get("latency", {})
    if lat:
        lines += ["", "## Latency at half of each system's maximum (10k clients, all allowed)", "",
                  "| system | offered req/s | achieved req/s | p50 ms | p99 ms | p99.9 ms | "
                  "target p99 | Sluice's own p99 |", "|---|---:|---:|---:|---:|---:|---|---:|"]
        for s in SYSTEMS:
            if s not in lat:
                continue
            p = lat[s]
            target = {"sluice-memory": 1000, "sluice-redis": 2000}.get(s)
            p99 = med(p, "p99_us")
            tcell = "" if target is None else (
                f"≤ {target / 1000:g} ms " + ("✓" if p99 is not None and p99 <= target else "✗"))
            own_summary = p["summary"].get("server_p99_le_us")  # the worst run: bounds, not values
            own = own_summary["max"] if own_summary else None
            ocell = "" if own is None else (f"≤ {own / 1000:g} ms" if own >= 1000
                                            else f"≤ {own:g} µs")
            lines.append(f"| {TITLES[s]} | {p['offered_rps']:,.0f} | {med(p):,.0f} | "
                         f"{fmt_ms(med(p, 'p50_us'))} | {fmt_ms(p99)} | "
                         f"{fmt_ms(med(p, 'p999_us'))} | {tcell} | {ocell} |")
        lines += ["", "Constant rate without wrk2 (not in Debian): the wrk script hands out send "
                  "slots every 1/rate s on a monotonic clock (LuaJIT FFI); latency is wrk's, from "
                  "the moment a request is written to its response (no coordinated-omission "
                  "correction). Sluice's own p99: from its `http_request_duration_seconds` "
                  "histogram (/metrics) over the same runs, the bucket bound under which 99 % of "
                  "the decisions were ready (from the complete request to the answer, before the "
                  "kernel and the load generator)."]

    for wid, title in (("10k_allow", "10k clients, all allowed"),
                       ("10k_deny", "10k clients, mostly denied")):
        base = tp.get(wid, {})
        if not base:
            continue
        lines += ["", f"## CPU per decision ({title}, at maximum load)", "",
                  "| system | µs CPU / decision (server) | µs CPU / decision (redis-server) | "
                  "total |", "|---|---:|---:|---:|"]
        for s in SYSTEMS:
            if s not in base:
                continue
            a = med(base[s], "cpu_us_per_decision")
            r = med(base[s], "redis_cpu_us_per_decision")
            tot = (a or 0) + (r or 0)
            lines.append(f"| {TITLES[s]} | {'—' if a is None else f'{a:.1f}'} | "
                         f"{'—' if r is None else f'{r:.1f}'} | {tot:.1f} |")
    if tp.get("10k_allow") or tp.get("10k_deny"):
        lines += ["", "From utime+stime in /proc/<pid>/stat over each run, divided by the "
                  "requests answered (redis-benchmark: redis-server only)."]

    mem = doc.get("memory", {})
    if mem:
        lines += ["", "## Memory per tracked key", ""]
        sm = mem.get("sluice-memory")
        if sm:
            ok = "✓" if sm["bytes_per_key"] <= 100 else "✗"
            lines.append(f"- Sluice memory store: **{sm['bytes_per_key']:.0f} bytes/key** "
                         f"(RSS growth over {sm['keys']:,} fixed_window keys; target ≤ 100 {ok}).")
        for s in ("sluice-redis", "node"):
            e = mem.get(s)
            if not e:
                continue
            per = ", ".join(f"{a} {v['bytes']:.0f} B" for a, v in
                            e["per_algorithm_memory_usage"].items() if v["bytes"] is not None)
            lines.append(f"- {TITLES[s]}: Redis `MEMORY USAGE` per key: {per}; used_memory "
                         f"growth {e['bytes_per_key_used_memory']:.0f} B/key over "
                         f"{e['keys']:,} keys.")
        lines.append("- nginx limit_req (not measured: its zone is preallocated shared memory): "
                     "128 bytes per state for these 12-byte keys, derived from nginx 1.22's "
                     "structures (rbtree node 32 B + limit_req node 48 B + key = 92 B, rounded up "
                     "to the slab allocator's 128-byte class); its documentation says 64–128.")

    if doc.get("ceiling_script_sha"):
        same = doc.get("ceiling_script_is_sluices")
        lines += ["", f"The ceiling ran script `{doc['ceiling_script_sha'][:12]}…` composed from "
                  "src/store/redis/lua as the Redis store does"
                  + (" — the Redis store had loaded the very same SHA." if same else
                     (" (the Redis store's SHA differed!)." if same is False else "."))]
    if doc.get("skipped"):
        lines += ["", "Skipped: " + "; ".join(f"{k}: {v}" for k, v in doc["skipped"].items())]
    lines += ["", "Peers' semantics differ: nginx's limit_req is a leaky bucket "
              "(its smallest rate is 1 per minute), HAProxy's http_req_rate a sliding counter that "
              "counts denied requests; both get the client in a header and parse no body. Sluice "
              "and the Node peer parse the same JSON request. The Node peer's three limits are "
              "RateLimiterUnion (three Redis calls, not all-or-nothing); Sluice's Redis store "
              "sends the decisions of one event-loop turn in one EVALSHA (up to "
              "--redis-max-batch, 32) and denies locally while a key is known to be over its "
              "limit.", "", "![benchmark](latest.png)", ""]
    return "\n".join(lines)


GNUPLOT = r"""
set terminal pngcairo size 1600,1000 font "DejaVu Sans,10" noenhanced
set output "{png}"
set multiplot layout 2,2 title "Sluice vs peers, decisions per second (median; bars: min-max of {runs} runs) - {title}"
set style data histograms
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key below horizontal
set format y "%.1s%c"
set xtics nomirror
set yrange [0:*]
set style histogram clustered gap 1 errorbars lw 1
set title "State in the process"
plot for [i=0:{nmem}-1] "{dat}" index 0 using (column(2+3*i)):(column(3+3*i)):(column(4+3*i)):xtic(1) title columnhead(2+3*i)
set title "State in Redis (redis-benchmark: the script alone, no HTTP)"
plot for [i=0:{nred}-1] "{dat}" index 1 using (column(2+3*i)):(column(3+3*i)):(column(4+3*i)):xtic(1) title columnhead(2+3*i)
set title "Sluice per algorithm (10k clients, all allowed)"
plot for [i=0:{nalg}-1] "{dat}" index 2 using (column(2+3*i)):(column(3+3*i)):(column(4+3*i)):xtic(1) title columnhead(2+3*i)
set title "Latency at half of each system's maximum (10k clients), ms, log scale"
set style histogram clustered gap 1
set format y "%g"
set logscale y
set yrange [0.01:*]
set xtics rotate by 0
plot "{dat}" index 3 using 2:xtic(1) title "p50", "" index 3 using 3 title "p99", "" index 3 using 4 title "p99.9"
unset multiplot
"""


def _block(f, tp, wls, systems):
    f.write('"workload" ' + " ".join(f'"{TITLES.get(s, s)}" "lo" "hi"' for s in systems) + "\n")
    for w in wls:
        cells = []
        for s in systems:
            p = tp[w["id"]].get(s)
            if p:
                r = p["summary"]["rps"]
                cells += [f"{r['median']:.0f}", f"{r['min']:.0f}", f"{r['max']:.0f}"]
            else:
                cells += ["0", "0", "0"]
        label = w["label"].replace("10k clients, ", "").replace("sliding_window_", "sliding ")
        label = label.replace("_", " ")
        f.write(f'"{label}" ' + " ".join(cells) + "\n")
    if not wls:
        f.write('"none" ' + " ".join("0 0 0" for _ in systems) + "\n")
    f.write("\n\n")


def plot(doc, out):
    if not shutil.which("gnuplot"):
        print("[bench] gnuplot is not installed (Debian: gnuplot-nox): no latest.png",
              flush=True)
        return False
    tp = doc["throughput"]
    wls = [w for w in doc["workloads"] if w["id"] in tp]
    peer_wls = [w for w in wls if "nginx" in w["systems"]]
    alg_wls = [w for w in wls if w["id"] == "10k_allow" or "nginx" not in w["systems"]]
    mem_sys = [s for s in ("sluice-memory", "nginx", "haproxy")
               if any(s in tp[w["id"]] for w in peer_wls)] or ["sluice-memory"]
    red_sys = [s for s in ("sluice-redis", "sluice-eventual", "node", "redis-benchmark",
                           "redis-benchmark-P16",
                           "redis-benchmark-shared")
               if any(s in tp[w["id"]] for w in peer_wls)] or ["sluice-redis"]
    alg_sys = [s for s in ("sluice-memory", "sluice-redis")
               if any(s in tp[w["id"]] for w in alg_wls)] or ["sluice-memory"]
    dat = os.path.join(out, "latest.dat")
    with open(dat, "w") as f:
        _block(f, tp, peer_wls, mem_sys)
        _block(f, tp, peer_wls, red_sys)
        _block(f, tp, [dict(w, label="fixed_window") if w["id"] == "10k_allow" else w
                       for w in alg_wls], alg_sys)
        lat = doc.get("latency", {})
        for s in SYSTEMS:
            if s in lat:
                p = lat[s]
                f.write(f'"{TITLES[s]}" {med(p, "p50_us") / 1000:.4f} '
                        f'{med(p, "p99_us") / 1000:.4f} {med(p, "p999_us") / 1000:.4f}\n')
        if not lat:
            f.write('"none" 0.01 0.01 0.01\n')
    png = os.path.join(out, "latest.png")
    script = GNUPLOT.format(png=png, dat=dat, nmem=len(mem_sys), nred=len(red_sys),
                            nalg=len(alg_sys), runs=doc["settings"]["runs"],
                            title=f"{doc['generated_at']} ({doc['profile']})")
    res = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
    os.remove(dat)
    if res.returncode != 0:
        print("[bench] gnuplot failed: " + res.stderr, flush=True)
        return False
    return True


def write(doc, out):
    with open(os.path.join(out, "latest.md"), "w") as f:
        f.write(markdown(doc))
    plot(doc, out)


if __name__ == "__main__":
    path = sys.argv[1]
    with open(path) as f:
        d = json.load(f)
    write(d, sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(path))

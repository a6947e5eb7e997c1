#!/usr/bin/env python3
"""Sluice's benchmark against its peers, in one run (driven by bench/run.sh).

Starts every system on loopback, drives each with wrk (bench/wrk/decision.lua), alternates the
systems run by run, and writes <out>/latest.json, latest.md and latest.png (gnuplot).

Systems: nginx limit_req, HAProxy stick tables, Sluice (memory store), a Node.js service with
rate-limiter-flexible over ioredis, Sluice (Redis store), the ceiling: redis-benchmark
running Sluice's own Lua script with EVALSHA, unpipelined and with -P 16, and the null
answer: nginx `return 200` (an HTTP answer doing no work), whose CPU per answer is the floor
the others' CPU per decision is compared with. CPU time of the server process per answer
(utime+stime from /proc) is the yardstick: a rate on this 2-core machine says which core
bounds the run.

CPU placement (2 cores): CPU 0 runs the system under test (its only process, or redis-server
for the redis-benchmark ceiling); CPU 1 runs the load generator and, for the systems that keep
their state in Redis, redis-server. Every system gets one thread or one worker.

Only the Python standard library is used.
"""

import argparse
import datetime
import http.client
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH_DIR)
WRK_SCRIPT = os.path.join(BENCH_DIR, "wrk", "decision.lua")
RULES_DIR = os.path.join(BENCH_DIR, "rules")
NODE_DIR = os.path.join(BENCH_DIR, "peers", "node")
LUA_DIR = os.path.join(ROOT, "src", "store", "redis", "lua")
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

SERVER_CPU = "0"
LOAD_CPU = "1"

ALGORITHMS = ["sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket"]
ALGORITHM_CODES = {"fixed_window": 0, "sliding_window_log": 1, "sliding_window_counter": 2,
                   "token_bucket": 3, "leaky_bucket": 4}

# Workloads: distinct clients, the op descriptor's value, descriptors per request, who runs it.
PEERS = ["nginx", "haproxy", "sluice-memory", "node", "sluice-redis"]
# The null answer: nginx `return 200` to the very request Sluice is sent (the JSON POST), measured
# beside the peers where it is a fair floor; and the same to the peers' GET, shown beside it.
NULL = "nginx-null"
NULL_GET = "nginx-null-get"
# Sluice on Redis with the workloads' limit `consistency: eventual` (bench/eventual/rules),
# measured where every request is far from its limit, against the memory store's rate.
EVENTUAL = "sluice-eventual"
EVENTUAL_RULES_DIR = os.path.join(BENCH_DIR, "eventual", "rules")
WORKLOADS = [
    {"id": "hot_allow", "label": "1 hot key", "clients": 1, "op": "fixed_window_allow",
     "desc": 1, "systems": PEERS + [NULL, NULL_GET, EVENTUAL], "ceiling": True},
    {"id": "10k_allow", "label": "10k clients", "clients": 10_000, "op": "fixed_window_allow",
     "desc": 1, "systems": PEERS + [NULL, NULL_GET, EVENTUAL], "ceiling": True},
    {"id": "1m_allow", "label": "1M clients", "clients": 1_000_000, "op": "fixed_window_allow",
     "desc": 1, "systems": PEERS, "ceiling": True},
    {"id": "10k_deny", "label": "10k clients, mostly denied", "clients": 10_000,
     "op": "fixed_window_deny", "desc": 1, "systems": PEERS, "ceiling": False},
    {"id": "10k_allow_3desc", "label": "10k clients, 3 descriptors", "clients": 10_000,
     "op": "fixed_window_allow", "desc": 3, "systems": PEERS, "ceiling": False},
] + [
    {"id": f"10k_{a}", "label": f"10k clients, {a}", "clients": 10_000, "op": f"{a}_allow",
     "desc": 1, "systems": ["sluice-memory", "sluice-redis"], "ceiling": False}
    for a in ALGORITHMS
]

PROFILES = {
    # duration of one wrk run (s), runs per point, bench/grpc.sh's rounds, keys for the
    # memory-per-key measurement. This machine's speed dips for seconds at a time (another
    # guest on the host), and one run's CPU per answer can land 20 % from its neighbours':
    # more, shorter alternated runs let the median pass over dips that a median of fewer
    # could land on (9 × 2 s since 2026-11-27, 15:00 UTC; 5 × 3 s before).
    "full": {"duration": 2, "runs": 9, "grpc_rounds": 9, "mem_keys": 1_000_000,
             "redis_mem_keys": 100_000, "workloads": None, "connections": 64, "warmup": 1},
    "quick": {"duration": 2, "runs": 2, "grpc_rounds": 2, "mem_keys": 200_000,
              "redis_mem_keys": 20_000, "workloads": None, "connections": 64, "warmup": 1},
    "smoke": {"duration": 1, "runs": 1, "grpc_rounds": 1, "mem_keys": 5_000,
              "redis_mem_keys": 1_000, "workloads": ["10k_allow"], "connections": 16,
              "warmup": 0},
}


EXIT_SKIPPED = 77  # smoke mode without a load generator


def on_sigterm(signum, frame):
    # Unwind through the finally blocks so that every process started here is stopped.
    raise KeyboardInterrupt(f"signal {signum}")


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class BenchError(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=15.0, proc=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except OSError:
        return 0


def children_cpu_s():
    """User + system CPU seconds of this process' waited-for children so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def rss_bytes(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def post(port, body, path="/shouldAllowRequest", method="POST", headers=None, timeout=5):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        hdrs = {"Content-Type": "application/json"}
        hdrs.update(headers or {})
        conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def taskset(cpu, cmd):
    if shutil.which("taskset"):
        return ["taskset", "-c", cpu] + cmd
    return cmd


class Proc:
    """A child process in its own session, killed (group-wide) on stop()."""

    def __init__(self, name, cmd, workdir, env=None):
        self.name = name
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.log_file = open(self.log_path, "w")
        self.p = subprocess.Popen(cmd, stdout=self.log_file, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        self.pid = self.p.pid

    def alive(self):
        return self.p.poll() is None

    def tail(self, n=15):
        try:
            with open(self.log_path) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def stop(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.p.wait()
        self.log_file.close()


class RedisServer:
    def __init__(self, workdir, cpu):
        self.port = free_port()
        self.proc = Proc("redis", taskset(cpu, [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", workdir, "--databases", "4", "--protected-mode", "no",
            "--maxmemory-policy", "noeviction"]), workdir)
        if not wait_port(self.port, proc=self.proc.p):
            raise BenchError("redis-server did not start:\n" + self.proc.tail())

    def cli(self, *args, db=0, stdin=None):
        out = subprocess.run(["redis-cli", "-p", str(self.port), "-n", str(db)] + list(args),
                             input=stdin, capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise BenchError(f"redis-cli {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout.strip()

    def info_memory(self):
        for line in self.cli("INFO", "memory").splitlines():
            if line.startswith("used_memory:"):
                return int(line.split(":")[1])
        return 0

    def stop(self):
        self.proc.stop()


class System:
    """One system under test: started on loopback, driven by wrk."""
    name = ""
    mode = "json"  # wrk script mode
    uses_redis = False
    null = False  # a null answer: no latency or memory measurement

    def __init__(self, ctx):
        self.ctx = ctx
        self.proc = None
        self.port = None

    def available(self):
        """None when the system can run, else why not (the system is skipped)."""
        return None

    def start(self):
        raise NotImplementedError

    def cpu_pids(self):
        return [self.proc.pid] + children(self.proc.pid)

    def check(self):
        """One real decision: raises BenchError when the system does not answer properly."""
        if self.mode == "json":
            body = json.dumps({"domain": "bench", "clientId": "probe", "descriptors": [
                {"entries": [{"key": "op", "value": "fixed_window_allow"}]}]})
            status, data = post(self.port, body)
        else:
            status, data = post(self.port, None, path="/fixed_window_allow/1", method="GET",
                                headers={"X-Client": "probe"})
        if status not in (200, 429):
            raise BenchError(f"{self.name}: probe decision answered {status}: {data[:200]!r}")

    def stop(self):
        if self.proc:
            self.proc.stop()
            self.proc = None

    def reset_state(self):
        """Forget every bucket (restart, or flush the Redis database)."""
        self.stop()
        self.start()


class Nginx(System):
    name = "nginx"
    mode = "header"

    def available(self):
        return None if shutil.which("nginx") else "nginx is not installed (Debian: nginx-light)"

    def start(self):
        d = os.path.join(self.ctx.workdir, "nginx")
        os.makedirs(os.path.join(d, "www"), exist_ok=True)
        os.chmod(d, 0o755)
        os.chmod(os.path.join(d, "www"), 0o755)
        with open(os.path.join(d, "www", "ok.txt"), "w") as f:
            f.write("ok\n")
        os.chmod(os.path.join(d, "www", "ok.txt"), 0o644)
        self.port = free_port()
        with open(os.path.join(BENCH_DIR, "peers", "nginx.conf")) as f:
            conf = f.read()
        conf = conf.replace("@PORT@", str(self.port)).replace("@DIR@", d).replace(
            "@ZONE@", "256m" if not self.ctx.smoke else "16m")
        path = os.path.join(d, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        self.proc = Proc("nginx", taskset(SERVER_CPU, ["nginx", "-p", d, "-c", path]),
                         self.ctx.workdir)
        if not wait_port(self.port, proc=self.proc.p):
            raise BenchError("nginx did not start:\n" + self.proc.tail())


class NginxNull(System):
    """nginx answering `return 200` to everything: an HTTP answer with no decision in it. It is
    sent Sluice's request (mode json: the same bytes in, the same work for wrk per request), so
    that what Sluice costs beyond it is the decision; NginxNullGet sends it the peers' GET."""
    name = NULL
    mode = "json"
    null = True

    def available(self):
        return None if shutil.which("nginx") else "nginx is not installed (Debian: nginx-light)"

    def start(self):
        d = os.path.join(self.ctx.workdir, self.name)
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o755)
        self.port = free_port()
        with open(os.path.join(BENCH_DIR, "peers", "nginx-null.conf")) as f:
            conf = f.read().replace("@PORT@", str(self.port)).replace("@DIR@", d)
        path = os.path.join(d, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        self.proc = Proc(self.name, taskset(SERVER_CPU, ["nginx", "-p", d, "-c", path]),
                         self.ctx.workdir)
        if not wait_port(self.port, proc=self.proc.p):
            raise BenchError("nginx (return 200) did not start:\n" + self.proc.tail())


class NginxNullGet(NginxNull):
    """The same null answer to the GET the peers are sent (a header and a status line): the
    yardstick of the runs before the null answer got Sluice's request, kept beside it."""
    name = NULL_GET
    mode = "header"


class Haproxy(System):
    name = "haproxy"
    mode = "header"

    def available(self):
        return None if shutil.which("haproxy") else "haproxy is not installed (Debian: haproxy)"

    def start(self):
        self.port = free_port()
        with open(os.path.join(BENCH_DIR, "peers", "haproxy.cfg")) as f:
            conf = f.read().replace("@PORT@", str(self.port))
        path = os.path.join(self.ctx.workdir, "haproxy.cfg")
        with open(path, "w") as f:
            f.write(conf)
        self.proc = Proc("haproxy", taskset(SERVER_CPU, ["haproxy", "-db", "-f", path]),
                         self.ctx.workdir)
        if not wait_port(self.port, proc=self.proc.p):
            raise BenchError("haproxy did not start:\n" + self.proc.tail())


class Sluice(System):
    def __init__(self, ctx, store, name=None, rules=RULES_DIR, db=2):
        super().__init__(ctx)
        self.store = store
        self.name = name or f"sluice-{store}"
        self.uses_redis = store == "redis"
        self.rules = rules
        self.db = db
        self.extra = []

    def available(self):
        if not os.access(self.ctx.sluice, os.X_OK):
            # Sluice itself is never skipped: the run fails.
            raise BenchError(f"no Sluice binary at {self.ctx.sluice} (build it: scripts/build.sh)")
        return None

    def start(self):
        self.port = free_port()
        cmd = [self.ctx.sluice, "--listen", f"127.0.0.1:{self.port}", "--rules", self.rules,
               "--threads", "1", "--log-level", "warn", "--store", self.store] + self.extra
        if self.store == "redis":
            cmd += ["--redis", f"redis://127.0.0.1:{self.ctx.redis.port}/{self.db}"]
            self.ctx.redis.cli("FLUSHDB", db=self.db)
        self.proc = Proc(self.name, taskset(SERVER_CPU, cmd), self.ctx.workdir)
        if not wait_port(self.port, proc=self.proc.p):
            raise BenchError(f"{self.name} did not start:\n" + self.proc.tail())
        # Readiness: the Redis store connects asynchronously.
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                status, _ = post(self.port, None, path="/readyz", method="GET")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise BenchError(f"{self.name} never became ready (/readyz):\n" + self.proc.tail())

    def check(self):
        try:
            super().check()
        except (OSError, http.client.HTTPException) as e:
            raise BenchError(f"{self.name} does not answer decisions: {e}\n" + self.proc.tail())


class Node(System):
    name = "node"
    uses_redis = True

    def available(self):
        if not shutil.which("node"):
            return "node is not installed (Debian: nodejs)"
        if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "rate-limiter-flexible")):
            return ("bench/peers/node/node_modules is missing (bench/run.sh installs it with "
                    "npm ci; --no-install skips that)")
        return None

    def start(self):
        self.port = free_port()
        self.ctx.redis.cli("FLUSHDB", db=1)
        cmd = ["node", os.path.join(NODE_DIR, "server.js"), "--port", str(self.port),
               "--redis", f"redis://127.0.0.1:{self.ctx.redis.port}/1"]
        self.proc = Proc("node", taskset(SERVER_CPU, cmd), self.ctx.workdir)
        if not wait_port(self.port, proc=self.proc.p):
            raise BenchError("node peer did not start:\n" + self.proc.tail())


def run_wrk(ctx, system, wl, duration, rate=0, connections=None, prefix=None, seq=False,
            seq_start=0, clients=None):
    """One wrk run against a system; returns the parsed summary plus CPU and rate figures."""
    out = os.path.join(ctx.workdir, "wrk-out.json")
    if os.path.exists(out):
        os.remove(out)
    env = dict(os.environ)
    env.update({
        "BENCH_MODE": system.mode, "BENCH_CLIENTS": str(clients or wl["clients"]),
        "BENCH_OP": wl["op"], "BENCH_DESC": str(wl["desc"]), "BENCH_RATE": str(rate),
        "BENCH_THREADS": "1", "BENCH_OUT": out,
        "BENCH_PREFIX": prefix or f"r{ctx.next_prefix()}_", "BENCH_SEQ": "1" if seq else "0",
        "BENCH_SEQ_START": str(seq_start)})
    conns = connections or ctx.profile["connections"]
    cmd = taskset(LOAD_CPU, ["wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--timeout", "5s",
                             "-s", WRK_SCRIPT, f"http://127.0.0.1:{system.port}"])
    pids = system.cpu_pids()
    redis_pid = ctx.redis.proc.pid if (ctx.redis and system.uses_redis) else None
    c0 = sum(cpu_ticks(p) for p in pids)
    r0 = cpu_ticks(redis_pid) if redis_pid else 0
    w0 = children_cpu_s()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=duration + 60)
    w1 = children_cpu_s()
    c1 = sum(cpu_ticks(p) for p in pids)
    r1 = cpu_ticks(redis_pid) if redis_pid else 0
    if res.returncode != 0 or not os.path.exists(out):
        raise BenchError(f"wrk failed against {system.name}: {res.stderr.strip()}\n{res.stdout}")
    with open(out) as f:
        s = json.load(f)
    if s["requests"] == 0:
        why = f"{system.name} answered no request in {duration} s"
        if not ctx.smoke:
            # A figure of nothing: the run fails, its process logs kept (the work directory
            # is kept on failure).
            tail = system.proc.tail() if system.proc else ""
            raise BenchError(f"{why}:\n{res.stdout}\n{tail}")
        # The smoke run (1 s, no warm-up, beside other tests) only proves the harness: a
        # machine that stalls for a second leaves a run empty. Said, and the caller (the smoke
        # test) judges what it checks.
        log(f"WARNING: {why} (smoke run)")
    secs = s["duration_us"] / 1e6
    n = max(s["requests"], 1)
    errors = s["connect_errors"] + s["read_errors"] + s["write_errors"] + s["timeouts"]
    s.update({
        "rps": s["requests"] / secs,
        "denied_share": s["non2xx"] / n,
        "socket_errors": errors,
        "cpu_us_per_decision": (c1 - c0) / CLK_TCK * 1e6 / n,
        "cpu_share": (c1 - c0) / CLK_TCK / secs,
        "redis_cpu_us_per_decision": ((r1 - r0) / CLK_TCK * 1e6 / n) if redis_pid else None,
        # wrk's own CPU (taskset execs it: it is the waited-for child). Near 1.0 of its core,
        # the rate is the load generator's, not the system's.
        "load_cpu_us_per_request": (w1 - w0) * 1e6 / n,
        "load_cpu_share": (w1 - w0) / secs,
    })
    return s


def summarize(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    med = statistics.median(values)
    return {"median": med, "min": min(values), "max": max(values),
            "spread_pct": (max(values) - min(values)) / med * 100 if med else 0.0,
            "runs": len(values)}


class Context:
    def __init__(self, args):
        self.args = args
        self.smoke = args.profile == "smoke"
        self.profile = PROFILES[args.profile]
        if args.duration:
            self.profile["duration"] = args.duration
        if args.runs:
            self.profile["runs"] = args.runs
        self.sluice = os.path.abspath(args.sluice)
        self.workdir = tempfile.mkdtemp(prefix="sluice-bench-")
        os.chmod(self.workdir, 0o755)
        self.redis = None
        self.prefix_counter = 0
        self.skipped = {}

    def next_prefix(self):
        self.prefix_counter += 1
        return self.prefix_counter


def lua_script(lua_dir=LUA_DIR):
    """Sluice's production script, composed as src/store/redis/redis_store.cpp does."""
    names = sorted(f[:-4] for f in os.listdir(lua_dir) if f.endswith(".lua"))

    def read(n):
        with open(os.path.join(lua_dir, n + ".lua")) as f:
            return f.read()
    out = read("00_time_redis") + "\n"
    for n in names:
        if n.startswith("00_") or n == "99_evaluate":
            continue
        out += read(n) + "\n"
    return out + read("99_evaluate")


def redis_benchmark(ctx, wl, pipeline, requests, rb_redis):
    """The ceiling: redis-benchmark calling Sluice's script with EVALSHA."""
    sha = ctx.script_sha
    # The store's keys: sluice:{client|domain}:key=value;i0;algorithm.
    key = ("sluice:{b__rand_int__|bench}:op=fixed_window_allow;i0;fw"
           if wl["clients"] > 1 else
           "sluice:{b00000000|bench}:op=fixed_window_allow;i0;fw")
    code = ALGORITHM_CODES["fixed_window"]
    # KEYS[1]; ARGV: test time (empty in production), then algorithm, L, W us, burst,
    # min_interval, flags, warmup, cost, quota group, the rule's override field, and last
    # the number of limits: the arguments Sluice sends for one decision of bench.yaml's
    # fixed_window_allow rule (seen with MONITOR; its limit may take a runtime override, so
    # flags = 32 x the ARGV index of that field, 11, and the script looks the override up).
    args = ["EVALSHA", sha, "1", key, "", str(code), "1000000", "1000000", "0",
            "0", "352", "0", "1", "-1", "r:bench.op_fixed_window_allow", "1"]
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(rb_redis.port), "--dbnum", "3",
           "-c", "50", "-n", str(requests), "-P", str(pipeline), "--csv"]
    if wl["clients"] > 1:
        cmd += ["-r", str(wl["clients"])]
    r0 = cpu_ticks(rb_redis.proc.pid)
    t0 = time.time()
    res = subprocess.run(taskset(LOAD_CPU, cmd + args), capture_output=True, text=True,
                         timeout=300)
    wall = time.time() - t0
    r1 = cpu_ticks(rb_redis.proc.pid)
    rows = [line for line in res.stdout.splitlines() if line.startswith('"EVALSHA')]
    if res.returncode != 0 or not rows:
        raise BenchError(f"redis-benchmark failed: {res.stderr.strip()} {res.stdout[-300:]}")
    cols = [c.strip('"') for c in rows[-1].split(",")]
    rps = float(cols[1])
    out = {"rps": rps, "requests": requests, "wall_s": wall,
           "cpu_us_per_decision": None,
           "redis_cpu_us_per_decision": (r1 - r0) / CLK_TCK * 1e6 / requests}
    if len(cols) >= 7:
        out.update({"p50_us": float(cols[4]) * 1000, "p99_us": float(cols[6]) * 1000})
    return out


CEILINGS = [
    # name, pipeline, CPU of its redis-server, workloads ("all" = every ceiling workload)
    ("redis-benchmark", 1, SERVER_CPU, "all"),
    ("redis-benchmark-P16", 16, SERVER_CPU, "all"),
    # Like for like with Sluice and Node, whose redis-server shares CPU 1 with wrk.
    ("redis-benchmark-shared", 1, LOAD_CPU, {"10k_allow"}),
]


def bench_ceiling(ctx, results):
    """redis-benchmark calling Sluice's script on its own redis-server (CPU 0, alone; and
    once on CPU 1 shared with redis-benchmark, as Sluice's and Node's Redis shares it)."""
    if not shutil.which("redis-benchmark"):
        ctx.skipped["redis-benchmark"] = "redis-benchmark is not installed (Debian: redis-tools)"
        log("SKIP redis-benchmark: " + ctx.skipped["redis-benchmark"])
        return
    servers = {}
    try:
        for cpu in sorted({c[2] for c in CEILINGS}):
            d = os.path.join(ctx.workdir, f"rb{cpu}")
            os.makedirs(d, exist_ok=True)
            servers[cpu] = RedisServer(d, cpu)
            ctx.script_sha = servers[cpu].cli("SCRIPT", "LOAD", lua_script())
        for wl in WORKLOADS:
            if not wl["ceiling"] or not ctx.wanted(wl):
                continue
            for name, pipeline, cpu, which in CEILINGS:
                if which != "all" and wl["id"] not in which:
                    continue
                rb_redis = servers[cpu]
                probe = redis_benchmark(ctx, wl, pipeline, 5000 if ctx.smoke else 20000, rb_redis)
                n = int(max(5000, probe["rps"] * ctx.profile["duration"]))
                runs = []
                for i in range(ctx.profile["runs"]):
                    rb_redis.cli("FLUSHDB", db=3)
                    runs.append(redis_benchmark(ctx, wl, pipeline, n, rb_redis))
                    log(f"{wl['id']:<28} {name:<20} run {i + 1}: {runs[-1]['rps']:>10,.0f} calls/s")
                results.setdefault(wl["id"], {})[name] = point(runs)
    finally:
        for srv in servers.values():
            srv.stop()


def point(runs):
    keys = ["rps", "p50_us", "p99_us", "p999_us", "cpu_us_per_decision",
            "redis_cpu_us_per_decision", "denied_share", "server_p99_le_us", "cpu_share",
            "load_cpu_us_per_request", "load_cpu_share"]
    return {"summary": {k: summarize([r.get(k) for r in runs]) for k in keys}, "runs": runs}


def bench_throughput(ctx, systems, results):
    for wl in WORKLOADS:
        if not ctx.wanted(wl):
            continue
        active = [s for s in systems if s.name in wl["systems"]]
        for s in active:
            s.reset_state()
            s.check()
            if ctx.profile["warmup"]:
                # Not recorded: lets Node's JIT and every allocator reach a steady state.
                run_wrk(ctx, s, wl, ctx.profile["warmup"])
        runs = {s.name: [] for s in active}
        for i in range(ctx.profile["runs"]):
            # Alternate: every system once per round, in a rotating order.
            order = active[i % len(active):] + active[:i % len(active)] if active else []
            for s in order:
                r = run_wrk(ctx, s, wl, ctx.profile["duration"])
                runs[s.name].append(r)
                log(f"{wl['id']:<28} {s.name:<20} run {i + 1}: {r['rps']:>10,.0f} req/s "
                    f"p99 {r['p99_us'] / 1000:6.2f} ms  denied {r['denied_share'] * 100:5.1f}%  "
                    f"cpu {r['cpu_us_per_decision']:6.1f} us/req, "
                    f"wrk {r['load_cpu_us_per_request']:5.1f} us/req "
                    f"({r['load_cpu_share'] * 100:3.0f}% of CPU {LOAD_CPU})"
                    + (f" socket errors {r['socket_errors']}" if r["socket_errors"] else ""))
                if s.name.startswith("sluice") and r["requests"] == 0:
                    raise BenchError(f"{s.name} answered no request under load")
                if (s.name.startswith("sluice") and wl["op"].endswith("_allow")
                        and r["denied_share"] > 0.01):
                    raise BenchError(f"{s.name} answered {r['denied_share'] * 100:.1f}% non-2xx "
                                     f"in the all-allowed workload {wl['id']}:\n"
                                     + s.proc.tail())
        for name, rs in runs.items():
            results.setdefault(wl["id"], {})[name] = point(rs)


def server_histogram(port):
    """Sluice's own latency histogram for /shouldAllowRequest (time from a complete request
    to its answer being ready, from /metrics): {upper bound in s: cumulative count}."""
    try:
        status, body = post(port, None, path="/metrics", method="GET")
    except OSError:
        return None
    if status != 200:
        return None
    buckets = {}
    for line in body.decode(errors="replace").splitlines():
        if (line.startswith("sluice_http_request_duration_seconds_bucket{")
                and 'endpoint="/shouldAllowRequest"' in line):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[float("inf") if le == "+Inf" else float(le)] = float(line.rsplit(" ", 1)[1])
    return buckets


def server_quantile_bound(before, after, q):
    """The smallest histogram bound (µs) under which a share q of the requests between two
    scrapes were answered: Sluice's own p99 is at most this."""
    if not before or not after:
        return None
    total = after.get(float("inf"), 0) - before.get(float("inf"), 0)
    if total <= 0:
        return None
    for bound in sorted(after):
        if after[bound] - before.get(bound, 0) >= q * total:
            return None if bound == float("inf") else bound * 1e6
    return None


def bench_latency(ctx, systems, results, latency):
    """Latency at a fixed offered rate: half of each system's median maximum (10k clients)."""
    wl = next(w for w in WORKLOADS if w["id"] == "10k_allow")
    if "10k_allow" not in results:
        return
    targets = {}
    for s in systems:
        point_ = results["10k_allow"].get(s.name)
        if point_ and not s.null:
            targets[s.name] = 0.5 * point_["summary"]["rps"]["median"]
    active = [s for s in systems if s.name in targets]
    for s in active:
        s.reset_state()
        if ctx.profile["warmup"]:
            run_wrk(ctx, s, wl, ctx.profile["warmup"], rate=targets[s.name],
                    connections=max(8, min(256, int(targets[s.name] / 200))))
    runs = {s.name: [] for s in active}
    for i in range(ctx.profile["runs"]):
        for s in active[i % len(active):] + active[:i % len(active)]:
            # Enough connections that each waits several ms between sends at this rate.
            conns = max(8, min(256, int(targets[s.name] / 200)))
            own = s.name.startswith("sluice")
            h0 = server_histogram(s.port) if own else None
            r = run_wrk(ctx, s, wl, ctx.profile["duration"], rate=targets[s.name],
                        connections=conns)
            if own:
                r["server_p99_le_us"] = server_quantile_bound(h0, server_histogram(s.port), 0.99)
            runs[s.name].append(r)
            log(f"latency@{targets[s.name]:>9,.0f}/s {s.name:<20} run {i + 1}: achieved "
                f"{r['rps']:>9,.0f}/s p50 {r['p50_us'] / 1000:.3f} p99 {r['p99_us'] / 1000:.3f} "
                f"p99.9 {r['p999_us'] / 1000:.3f} ms")
    for name, rs in runs.items():
        p = point(rs)
        p["offered_rps"] = targets[name]
        latency[name] = p


def bench_memory(ctx, systems, memory):
    """Bytes per tracked key: Sluice memory store RSS growth; Redis MEMORY USAGE."""
    # Keys that live an hour (bench.yaml's *_hour rules): the *_allow ones expire within 1 s.
    wl = dict(next(w for w in WORKLOADS if w["id"] == "10k_allow"), op="fixed_window_hour")
    by_name = {s.name: s for s in systems}
    n = ctx.profile["mem_keys"]
    s = by_name.get("sluice-memory")
    if s:
        s.extra = ["--memory-max-keys", str(2 * n + 10_000)]
        s.reset_state()
        run_wrk(ctx, s, wl, 1, prefix="warm_", seq=True, clients=5_000)
        time.sleep(0.3)
        rss0 = rss_bytes(s.proc.pid)
        done = 0
        t0 = time.time()
        while done < n and time.time() - t0 < 120:
            r = run_wrk(ctx, s, wl, max(1, min(20, int((n - done) / 40_000) + 1)), prefix="mem_",
                        seq=True, seq_start=done, clients=n)
            done += r["requests"]
        done = min(done, n)
        time.sleep(0.3)
        rss1 = rss_bytes(s.proc.pid)
        memory["sluice-memory"] = {"keys": done, "rss_before": rss0, "rss_after": rss1,
                                   "bytes_per_key": (rss1 - rss0) / max(done, 1),
                                   "method": "RSS growth of the sluice process over N new "
                                             "fixed_window keys (one request each)"}
        log(f"memory: sluice-memory {done:,} keys: {memory['sluice-memory']['bytes_per_key']:.1f}"
            " bytes/key (RSS growth)")
        s.extra = []
        s.stop()
    if ctx.redis is None:
        return
    redis_systems = [by_name[x] for x in ("sluice-redis", "node") if x in by_name]
    for s in redis_systems:
        db = 2 if s.name == "sluice-redis" else 1
        ops = (["fixed_window"] + ALGORITHMS) if s.name == "sluice-redis" else ["fixed_window"]
        entry = {"per_algorithm_memory_usage": {}}
        for alg in ops:
            s.reset_state()
            for i in range(5):
                body = json.dumps({"domain": "bench", "clientId": f"m{i:08d}", "descriptors": [
                    {"entries": [{"key": "op", "value": f"{alg}_hour"}]}]})
                post(s.port, body)
            keys = [k for k in ctx.redis.cli("--scan", db=db).splitlines() if k]
            sizes = [int(ctx.redis.cli("MEMORY", "USAGE", k, "SAMPLES", "0", db=db))
                     for k in keys]
            entry["per_algorithm_memory_usage"][alg] = {
                "bytes": statistics.median(sizes) if sizes else None,
                "example_key": keys[0] if keys else None}
        # used_memory growth over N fixed_window keys.
        rn = ctx.profile["redis_mem_keys"]
        s.reset_state()
        m0 = ctx.redis.info_memory()
        done = 0
        t0 = time.time()
        while done < rn and time.time() - t0 < 60:
            r = run_wrk(ctx, s, wl, 1, prefix="mem_", seq=True, seq_start=done, clients=rn)
            done += r["requests"]
        done = min(done, rn)
        m1 = ctx.redis.info_memory()
        dbsize = int(ctx.redis.cli("DBSIZE", db=db))
        entry.update({"keys": dbsize, "used_memory_before": m0, "used_memory_after": m1,
                      "bytes_per_key_used_memory": (m1 - m0) / max(dbsize, 1)})
        memory[s.name] = entry
        log(f"memory: {s.name} MEMORY USAGE "
            + ", ".join(f"{a}={v['bytes']}" for a, v in entry["per_algorithm_memory_usage"].items())
            + f"; used_memory growth {entry['bytes_per_key_used_memory']:.0f} B/key over {dbsize:,}")
        s.stop()


def bench_grpc(ctx, doc_grpc):
    """The gRPC answers beside HTTP ones (bench/grpc.sh, h2load on the same placement): a
    decision over Envoy's RLS against the same decision over HTTP/1.1, the gRPC health check
    against /healthz, and nginx `return 200`, as CPU of the server per answer."""
    missing = [t for t in ("h2load", "protoc", "nginx") if not shutil.which(t)]
    if missing:
        ctx.skipped["grpc"] = f"{', '.join(missing)} not installed (scripts/deps.sh bench)"
        log(f"SKIP grpc: {ctx.skipped['grpc']}")
        return
    out = os.path.join(ctx.workdir, "grpc.json")
    build_dir = os.path.dirname(ctx.sluice)
    cmd = ["bash", os.path.join(BENCH_DIR, "grpc.sh"), "--duration",
           str(ctx.profile["duration"]), "--rounds", str(ctx.profile["grpc_rounds"]),
           "--build-dir", build_dir, "--json", out]
    log("grpc: " + " ".join(cmd[1:]))
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if res.returncode != 0:
        raise BenchError(f"bench/grpc.sh failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    for line in res.stdout.splitlines():
        log("grpc: " + line)
    with open(out) as f:
        doc_grpc.update(json.load(f))


def versions():
    def cmd(c):
        try:
            r = subprocess.run(c, capture_output=True, text=True, timeout=10)
            return (r.stdout + r.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return None
    cpu = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    node_pkgs = {}
    lock = os.path.join(NODE_DIR, "package-lock.json")
    if os.path.exists(lock):
        with open(lock) as f:
            pk = json.load(f).get("packages", {})
        for name in ("rate-limiter-flexible", "ioredis"):
            node_pkgs[name] = pk.get(f"node_modules/{name}", {}).get("version")
    def short(text, cut):
        return text.split(cut)[0].strip() if text else text
    redis = cmd(["redis-server", "--version"])
    if redis and "v=" in redis:
        redis = "Redis " + redis.split("v=")[1].split()[0]
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "nginx": short(cmd(["nginx", "-v"]), "\n").replace("nginx version: ", ""),
            "haproxy": short(cmd(["haproxy", "-v"]), " - "),
            "node": cmd(["node", "--version"]), "redis": redis,
            "wrk": short(cmd(["wrk", "--version"]), "["), "node_packages": node_pkgs}


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=PROFILES, default="full")
    ap.add_argument("--sluice", default=os.path.join(ROOT, "build", "sluice"))
    ap.add_argument("--out", default=None, help="directory for latest.json/.md/.png")
    ap.add_argument("--only", default="", help="comma-separated systems to run")
    ap.add_argument("--workloads", default="", help="comma-separated workload ids")
    ap.add_argument("--duration", type=int, default=0)
    ap.add_argument("--runs", type=int, default=0)
    ap.add_argument("--no-ceiling", action="store_true")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--no-grpc", action="store_true",
                    help="skip the gRPC answers (bench/grpc.sh) of full and quick runs")
    ap.add_argument("--command", default="", help="the command line to record in the results")
    args = ap.parse_args()

    ctx = Context(args)
    wanted_wl = set(filter(None, args.workloads.split(","))) or (
        set(ctx.profile["workloads"]) if ctx.profile["workloads"] else None)
    ctx.wanted = lambda wl: wanted_wl is None or wl["id"] in wanted_wl
    out = args.out or (os.path.join(BENCH_DIR, "results") if args.profile == "full"
                       else os.path.join(BENCH_DIR, "results", "tmp", args.profile))
    os.makedirs(out, exist_ok=True)
    if not shutil.which("wrk"):
        if ctx.smoke:
            # Still prove that Sluice answers, then tell the caller the load part was skipped.
            for c in (Sluice(ctx, "memory"),):
                c.available()
                try:
                    c.start()
                    c.check()
                finally:
                    c.stop()
            log("SKIP: wrk is not installed (Debian: wrk; scripts/deps.sh bench installs it); "
                "Sluice answered decisions, no load was driven")
            return EXIT_SKIPPED
        raise BenchError("wrk is not installed (Debian: wrk): the benchmark cannot drive load")

    only = set(filter(None, args.only.split(",")))
    candidates = [Nginx(ctx), Haproxy(ctx), Sluice(ctx, "memory"), Node(ctx),
                  Sluice(ctx, "redis"), NginxNull(ctx), NginxNullGet(ctx),
                  Sluice(ctx, "redis", name=EVENTUAL, rules=EVENTUAL_RULES_DIR, db=3)]
    systems = []
    started = time.time()
    load_before = os.getloadavg()
    try:
        need_redis = any(c.uses_redis for c in candidates if not only or c.name in only)
        if need_redis:
            if shutil.which("redis-server") and shutil.which("redis-cli"):
                ctx.redis = RedisServer(ctx.workdir, LOAD_CPU)
            else:
                ctx.skipped["redis"] = "redis-server is not installed (Debian: redis-server)"
        for c in candidates:
            if only and c.name not in only:
                continue
            why = c.available()
            if why is None and c.uses_redis and ctx.redis is None:
                why = ctx.skipped["redis"]
            if why is not None:
                if c.name.startswith("sluice"):
                    log(f"SKIP {c.name}: {why}")
                else:
                    log(f"SKIP peer {c.name}: {why}")
                ctx.skipped[c.name] = why
                continue
            try:
                c.start()
                c.check()
            except (BenchError, OSError, http.client.HTTPException) as e:
                c.stop()
                if c.name.startswith("sluice"):
                    raise
                ctx.skipped[c.name] = f"did not start or answer: {e}"
                log(f"SKIP peer {c.name}: {ctx.skipped[c.name]}")
                continue
            log(f"{c.name} answers on 127.0.0.1:{c.port}")
            systems.append(c)
        if not any(s.name.startswith("sluice") for s in systems):
            raise BenchError("no Sluice system ran")

        results, latency, memory, grpc = {}, {}, {}, {}
        bench_throughput(ctx, systems, results)
        ctx.script_sha = None
        if not args.no_ceiling and (not only or "redis-benchmark" in only or
                                    "sluice-redis" in only):
            bench_ceiling(ctx, results)
        bench_latency(ctx, systems, results, latency)
        if not args.no_memory:
            bench_memory(ctx, systems, memory)
        if not ctx.smoke and not args.no_grpc and (not only or "grpc" in only):
            for s in systems:
                s.stop()  # grpc.sh starts its own servers on the same CPU
            bench_grpc(ctx, grpc)
        if ctx.redis and ctx.script_sha:
            same = ctx.redis.cli("SCRIPT", "EXISTS", ctx.script_sha)
            ctx.same_script = same.strip() == "1"
        else:
            ctx.same_script = None
    finally:
        for s in systems:
            s.stop()
        if ctx.redis:
            ctx.redis.stop()

    doc = {
        "generated_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": args.command or " ".join(sys.argv),
        "git_commit": git_commit(),
        "profile": args.profile,
        "settings": {"duration_s": ctx.profile["duration"], "runs": ctx.profile["runs"],
                     "connections": ctx.profile["connections"], "wrk_threads": 1,
                     "server_cpu": SERVER_CPU, "load_cpu": LOAD_CPU,
                     "sluice_threads": 1, "redis_cpu": LOAD_CPU},
        "machine": versions(),
        "workloads": [{k: v for k, v in w.items()} for w in WORKLOADS if ctx.wanted(w)],
        "skipped": ctx.skipped,
        "throughput": results,
        "latency": latency,
        "memory": memory,
        "grpc": grpc,
        "ceiling_script_sha": ctx.script_sha,
        "ceiling_script_is_sluices": ctx.same_script,
        "elapsed_s": round(time.time() - started, 1),
        # Other work on the machine disturbs the figures: the 1/5/15-minute load averages.
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    with open(os.path.join(out, "latest.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
    import report  # bench/report.py: Markdown table and plot
    report.write(doc, out)
    log(f"wrote {out}/latest.json, latest.md, latest.png in {doc['elapsed_s']} s")
    shutil.rmtree(ctx.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        sys.exit(main())
    except BenchError as e:
        log(f"FAILED: {e}")
        log("process logs are kept in /tmp/sluice-bench-*/ (the newest one)")
        sys.exit(1)
    except KeyboardInterrupt as e:
        log(f"interrupted ({e}): every process started was stopped")
        sys.exit(130)

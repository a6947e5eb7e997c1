# Writes the fixed log of tests/integration/simulate_exact_test.cpp (a replay's exact report
# is pinned against it): `python3 make_log.py 2500 | gzip -n -9 > access.log.gz`. Seeded: the
# same lines every time. The lines vary what a replay must keep exact: every algorithm, a
# shadow limit, a candidate, two domains and an unknown one, client ids and descriptor
# identities, escapes, late lines (within the reorder window and beyond it), other time
# forms, extra hits, per-descriptor hits and limits, refunds, charges, logged decisions and
# rules hashes, members out of order, spaces, blank and malformed lines.
import random, json, sys, datetime
rng = random.Random(7)
base = datetime.datetime(2026, 11, 26, 3, 0, 0, tzinfo=datetime.timezone.utc)
t = 0.0
paths = ["/login", "/search", "/checkout", "/items", "/log", "/sk", "/nomatch"]
def fmt(us, style):
    dt = base + datetime.timedelta(microseconds=us)
    if style == 0:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if style == 1:
        return (dt + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+01:00"
    if style == 2:
        return dt.strftime("%Y-%m-%d %H:%M:%S.%f") + "z"
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")
out = []
n = int(sys.argv[1])
for i in range(n):
    t += rng.expovariate(300.0)
    us = int(t * 1e6)
    r = rng.random()
    if r < 0.05:
        us -= int(rng.random() * 0.9e6)
    elif r < 0.055:
        us -= int(2.5e6)
    us = max(us, 0)
    w = rng.random()
    who = f"user-{int(rng.paretovariate(1.2)) % 60}"
    if rng.random() < 0.02:
        who = "m\u00e9l\"ory"
    rec = {}
    style = 0 if rng.random() < 0.9 else rng.randrange(1, 4)
    rec["time"] = fmt(us, style)
    if w < 0.8:
        rec["domain"] = "api"
        rec["client"] = who if rng.random() < 0.2 else ""
        d = [{"path": rng.choice(paths), "user": who}]
        if rng.random() < 0.3:
            d.append({"tenant": f"t{rng.randrange(3)}"})
        if rng.random() < 0.2:
            d.append({"region": rng.choice(["eu", "us"])})
        rec["descriptors"] = d
    elif w < 0.95:
        rec["domain"] = "other"
        rec["client"] = ""
        rec["descriptors"] = [{"ip": f"10.0.0.{rng.randrange(20)}"}]
    else:
        rec["domain"] = "unknown"
        rec["client"] = who
        rec["descriptors"] = [{"k": "v"}]
    rec["hits"] = 1 if rng.random() < 0.9 else rng.randrange(0, 4)
    x = rng.random()
    if x < 0.02 and len(rec["descriptors"]) > 1:
        rec["descriptor_hits"] = [None, 2] + [None] * (len(rec["descriptors"]) - 2)
    elif x < 0.03:
        rec["descriptor_limits"] = [{"requests_per_unit": 2, "unit": "second"}] + [None] * (len(rec["descriptors"]) - 1)
    elif x < 0.04:
        rec["refund"] = True
    elif x < 0.05:
        rec["charge"] = rng.choice(["every", "report", "all_or_nothing"])
    rec["rule"] = rng.choice(["", "login_per_user", "search_per_user"])
    rec["decision"] = rng.choice(["allowed", "allowed", "allowed", "denied", "", "error"]) if rng.random() < 0.5 else ""
    rec["degraded"] = False
    rec["latency_us"] = rng.randrange(100)
    rec["rules"] = "16caecf92d60b432" if rng.random() < 0.7 else ""
    if rng.random() < 0.03:
        items = list(rec.items()); rng.shuffle(items); rec = dict(items)
    sep = (",", ":") if rng.random() < 0.95 else (", ", " : ")
    line = json.dumps(rec, separators=sep, ensure_ascii=rng.random() < 0.5)
    m = rng.random()
    if m < 0.002: line = "not json"
    elif m < 0.004: line = line[: len(line) // 2]
    elif m < 0.005: line = line.replace('"time"', '"tim"')
    elif m < 0.006: line = line.replace('"hits":1', '"hits":-1')
    elif m < 0.007: line = ""
    elif m < 0.008: line = "  " + line + "  "
    elif m < 0.009: line = line.replace('"api"', '"api\\u0041"')
    out.append(line)
sys.stdout.write("\n".join(out) + "\n")

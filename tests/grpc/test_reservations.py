"""Reservations through the real binary (docs/reservations.md): POST /reserve, /commit and
/release over HTTP, on the memory store, Redis, Redis Cluster and sidecars sharing one Redis;
the race of 64 clients against a 1,000-token limit, with the Report-after-work contrast; a
sidecar killed while holding reservations.

Run with Debian's /usr/bin/python3 (see rls_support.py).
"""

import json
import random
import signal
import threading
import time
import unittest
import urllib.error
import urllib.request

from rls_support import Redis, RedisCluster, Sluice, wait_for

RULES = {"llm.yaml": """domain: llm
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000}
    descriptors:
      - key: model
        rate_limit: {unit: hour, requests_per_unit: 5000}
  - key: pool
    rate_limit: {unit: day, requests_per_unit: 1000}
  - key: bucket
    rate_limit: {unit: minute, requests_per_unit: 1000, algorithm: token_bucket}
  - key: ip
    rate_limit:
      unit: minute
      requests_per_unit: 100
      algorithm: sketch
      sketch: {expected_requests: 1000}
"""}


def post(port, path, body, method="POST"):
    data = json.dumps(body).encode()
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data,
                                 method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


# Correctness, not latency: on a busy test machine Redis's answer may take longer than the
# default 20 ms, and a reservation step never degrades to a failure mode's answer (nor may a
# check read as the store's: a degraded answer says the whole limit remains).
SHARED_MACHINE = ["--redis-timeout-ms", "2000"]


def user(value, key="user"):
    return {"domain": "llm", "descriptors": [[{"key": key, "value": value}]]}


class ReservationsOverHttp:
    """The HTTP calls and their errors; subclasses choose the store (store_args)."""

    store_args = ()

    def setUp(self):
        self.sluice = Sluice(RULES, args=list(self.store_args) + ["--max-reservation-ttl", "30s"],
                             admin=True)
        self.admin_port = self.sluice.admin_port
        self.port = self.sluice.http_port
        wait_for(self.ready, 15, "the store to be ready (/readyz)")

    def ready(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % self.port, timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def tearDown(self):
        self.sluice.close()

    def call(self, path, body):
        return post(self.port, path, body)

    def remaining(self, who="u1", key="user"):
        status, body = self.call("/shouldAllowRequest", dict(user(who, key), hits=0))
        self.assertEqual(status, 200, body)
        self.assertNotIn("degraded", body)  # a failure mode's answer is no reading of the store
        return body["descriptors"][0]["limits"][0]["remaining"]

    def test_reserve_commit_release(self):
        status, held = self.call("/reserve", dict(user("u1"), amount=600, ttl_ms=20000))
        self.assertEqual(status, 200, held)
        self.assertEqual(held["status"], "reserved")
        self.assertEqual(held["amount"], 600)
        self.assertEqual(held["ttl_ms"], 20000)
        self.assertEqual(held["descriptors"][0]["limits"][0]["remaining"], 400)
        self.assertEqual(self.remaining(), 400)
        status, denied = self.call("/reserve", dict(user("u1"), amount=401))
        self.assertEqual(status, 429, denied)
        self.assertEqual(denied["status"], "denied")
        status, done = self.call("/commit", dict(user("u1"), reservation_id=held["reservation_id"],
                                                 actual=250))
        self.assertEqual(status, 200, done)
        self.assertEqual((done["status"], done["reserved"], done["actual"]),
                         ("committed", 600, 250))
        self.assertEqual(self.remaining(), 750)
        status, again = self.call("/commit", dict(user("u1"),
                                                  reservation_id=held["reservation_id"],
                                                  actual=250))
        self.assertEqual(status, 409, again)
        self.assertIn("already committed or released", again["error"])
        self.assertEqual(self.remaining(), 750)

        status, second = self.call("/reserve", dict(user("u1"), amount=700))
        self.assertEqual(status, 200, second)
        self.assertEqual(self.remaining(), 50)
        status, released = self.call("/release", dict(user("u1"),
                                                      reservation_id=second["reservation_id"]))
        self.assertEqual((status, released["status"]), (200, "released"), released)
        self.assertEqual(self.remaining(), 750)
        status, twice = self.call("/release", dict(user("u1"),
                                                   reservation_id=second["reservation_id"]))
        self.assertEqual(status, 409, twice)
        self.assertEqual(self.remaining(), 750)

    def test_bad_input_touches_no_counter(self):
        status, held = self.call("/reserve", dict(user("u1"), amount=100))
        self.assertEqual(status, 200, held)
        rid = held["reservation_id"]
        cases = [
            ("/reserve", dict(user("u1"), amount=10, ttl_ms=-1), 400, "ttl_ms"),
            ("/reserve", dict(user("u1"), amount=10, ttl_ms=31000), 400,
             "--max-reservation-ttl"),
            ("/reserve", dict(user("u1"), amount=0), 400, "amount"),
            ("/reserve", dict(user("u1"), hits=5), 400, "hits"),
            ("/reserve", dict(user("1.2.3.4", "ip"), amount=5), 400, "sketch limit"),
            ("/commit", dict(user("u1"), reservation_id=rid, actual=1001), 400,
             "larger than any matched limit"),
            ("/commit", dict(user("u2"), reservation_id=rid, actual=10), 400,
             "was made for another"),
            ("/commit", dict(user("u1"), reservation_id="r1.x", actual=10), 400,
             "not a reservation id"),
            ("/commit", dict(user("u1"), actual=10), 400, "reservation_id"),
            ("/release", dict(user("u1"), reservation_id=rid[:-2] + "zz"), 400,
             "not a reservation id"),
        ]
        parts = rid.split(".")
        unknown = ".".join([parts[0], parts[1], "0123456789abcdef", parts[3]])
        cases.append(("/commit", dict(user("u1"), reservation_id=unknown, actual=10), 404,
                      "holds nothing"))
        for path, body, code, words in cases:
            status, answer = self.call(path, body)
            self.assertEqual(status, code, (path, body, answer))
            self.assertIn(words, answer.get("error", ""), (path, body, answer))
        self.assertEqual(self.remaining(), 900)

    def test_expired_hold_returns_and_late_commit_reports(self):
        # 2 s: long enough that a stalled machine still sees the hold before it expires.
        status, held = self.call("/reserve", dict(user("u1"), amount=900, ttl_ms=2000))
        self.assertEqual(status, 200, held)
        self.assertEqual(self.remaining(), 100)
        wait_for(lambda: self.remaining() == 1000, 10, "the hold to expire")
        status, late = self.call("/commit", dict(user("u1"), reservation_id=held["reservation_id"],
                                                 actual=950))
        self.assertEqual((status, late["status"]), (200, "late"), late)
        self.assertEqual(self.remaining(), 50)
        metrics = self.sluice.metrics()
        self.assertIn('sluice_reservation_settlements_total{domain="llm",rule="llm.user",'
                      'how="expired"} 1', metrics)
        self.assertIn('sluice_reservation_settlements_total{domain="llm",rule="llm.user",'
                      'how="late"} 1', metrics)

    def test_every_matched_limit_holds_all_or_nothing(self):
        both = {"domain": "llm", "descriptors": [[{"key": "user", "value": "u1"}],
                                                 [{"key": "user", "value": "u1"},
                                                  {"key": "model", "value": "m"}]]}
        status, held = self.call("/reserve", dict(both, amount=800))
        self.assertEqual(status, 200, held)
        limits = [d["limits"][0]["remaining"] for d in held["descriptors"]]
        self.assertEqual(limits, [200, 4200])
        status, denied = self.call("/reserve", dict(both, amount=300))
        self.assertEqual(status, 429, denied)
        status, check = self.call("/shouldAllowRequest", dict(both, hits=0))
        self.assertEqual([d["limits"][0]["remaining"] for d in check["descriptors"]], [200, 4200])

    def test_metrics_and_admin_reset_clear_holds(self):
        status, held = self.call("/reserve", dict(user("u1"), amount=600))
        self.assertEqual(status, 200, held)
        status, done = self.call("/commit", dict(user("u1"), reservation_id=held["reservation_id"],
                                                 actual=650))
        self.assertEqual(status, 200, done)
        status, other = self.call("/reserve", dict(user("u1"), amount=300))
        self.assertEqual(status, 200, other)
        self.assertEqual(self.remaining(), 50)
        metrics = self.sluice.metrics()
        for line in ['sluice_reservations_total{domain="llm",rule="llm.user",outcome="reserved"} 2',
                     'sluice_reservation_amount_total{domain="llm",rule="llm.user"} 900',
                     'sluice_reservation_holds{domain="llm",rule="llm.user"} 1',
                     'sluice_reservation_actual_minus_reserved_bucket{domain="llm",'
                     'rule="llm.user",le="100"} 1',
                     'sluice_reservation_actual_minus_reserved_bucket{domain="llm",'
                     'rule="llm.user",le="10"} 0']:
            self.assertIn(line, metrics)
        status, reset = post(self.admin_port, "/limits", {"domain": "llm", "clientId": ""},
                             method="DELETE")
        self.assertEqual(status, 200, reset)
        self.assertEqual(self.remaining(), 1000)
        status, gone = self.call("/release", dict(user("u1"), reservation_id=other["reservation_id"]))
        self.assertEqual(status, 404, gone)


class HttpOnMemory(ReservationsOverHttp, unittest.TestCase):
    store_args = ("--store", "memory")


class RedisFixture:
    @classmethod
    def setUpClass(cls):
        cls.redis = Redis()  # started, on a free port

    @classmethod
    def tearDownClass(cls):
        cls.redis.close()

    def setUp(self):
        self.redis.command("FLUSHALL")
        self.store_args = ("--store", "redis", "--redis", self.redis.url(), *SHARED_MACHINE)
        super().setUp()


class HttpOnRedis(RedisFixture, ReservationsOverHttp, unittest.TestCase):
    pass


class HttpOnRedisCluster(ReservationsOverHttp, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = RedisCluster()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def setUp(self):
        for port in self.cluster.ports:
            self.cluster.cli(port, "FLUSHALL")
        self.store_args = ("--store", "redis_cluster", "--redis", self.cluster.url(),
                           *SHARED_MACHINE)
        super().setUp()


# The race: 64 clients, a 1,000-token limit that does not refill during the run (a day's
# fixed window), estimates of 20..120 tokens, actual costs of 0..estimate, work of 0..20 ms.
CLIENTS = 64
LIMIT = 1000
class Ledger:
    """What the clients saw, to check what the server must have held: at every instant,
    the holds known admitted and not yet committed plus the actuals known committed."""

    def __init__(self):
        self.lock = threading.Lock()
        self.events = []  # (time, +amount or -amount)
        self.admitted = 0

    def add(self, at, delta):
        with self.lock:
            self.events.append((at, delta))

    def peak(self):
        level, peak = 0, 0
        # At equal times, releases first: a lower bound of what the server held.
        for _, delta in sorted(self.events, key=lambda e: (e[0], e[1])):
            level += delta
            peak = max(peak, level)
        return peak


def run_race(ports, mode, seconds=2.0):
    """64 clients over `ports` (round robin, and a commit goes to the next sidecar). `mode`
    is "reserve" (reserve, work, commit) or "report" (check, work, report: the peers' way).
    Returns (ledger peak, admitted work count, final used)."""
    ledger = Ledger()
    stop = time.monotonic() + seconds
    errors = []

    def client(index):
        rng = random.Random(index)
        body = {"domain": "llm", "descriptors": [[{"key": "pool", "value": "race"}]]}
        turn = index
        refused = 0  # in a row: the limit is spent, give the CPU back
        while time.monotonic() < stop and refused < 20:
            estimate = rng.randint(20, 120)
            actual = rng.randint(0, estimate)
            port = ports[turn % len(ports)]
            turn += 1
            if mode == "reserve":
                status, answer = post(port, "/reserve", dict(body, amount=estimate, ttl_ms=20000))
                if status == 429:
                    refused += 1
                    time.sleep(0.005)
                    continue
                refused = 0
                if status != 200:
                    errors.append(answer)
                    return
                ledger.add(time.monotonic(), estimate)
                time.sleep(rng.random() * 0.02)
                before = time.monotonic()
                status, answer = post(ports[turn % len(ports)], "/commit",
                                      dict(body, reservation_id=answer["reservation_id"],
                                           actual=actual))
                if status != 200 or answer["status"] != "committed":
                    errors.append(answer)
                    return
                ledger.add(before, -estimate)
                ledger.add(time.monotonic(), actual)
            else:
                status, answer = post(port, "/shouldAllowRequest", dict(body, hits=0))
                if status != 200 or answer["descriptors"][0]["limits"][0]["remaining"] <= 0:
                    refused += 1
                    time.sleep(0.005)
                    continue
                refused = 0
                ledger.add(time.monotonic(), actual)  # the work runs and spends
                time.sleep(rng.random() * 0.02)
                status, answer = post(ports[turn % len(ports)], "/shouldAllowRequest",
                                      dict(body, hits=actual, report=True))
                if status != 200:
                    errors.append(answer)
                    return
            with ledger.lock:
                ledger.admitted += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise AssertionError("a client failed: %s" % errors[:3])
    status, check = post(ports[0], "/shouldAllowRequest",
                         {"domain": "llm", "descriptors": [[{"key": "pool", "value": "race"}]],
                          "hits": 0})
    used = LIMIT - check["descriptors"][0]["limits"][0]["remaining"]
    return ledger.peak(), ledger.admitted, used, ledger


class Race:
    """The race on one or more sidecars of one store; subclasses start them (self.ports)."""

    def test_reservations_never_admit_beyond_the_limit(self):
        peak, admitted, used, ledger = run_race(self.ports, "reserve")
        actuals = sum(d for _, d in ledger.events if d > 0) - sum(
            -d for _, d in ledger.events if d < 0)
        print("reserve: %d admitted, ledger peak %d, used %d" % (admitted, peak, used))
        self.assertGreater(admitted, 5)
        self.assertLessEqual(peak, LIMIT)
        self.assertLessEqual(actuals, LIMIT)

    def test_report_after_work_overspends(self):
        peak, admitted, used, ledger = run_race(self.ports, "report")
        spent = sum(d for _, d in ledger.events)
        print("report: %d admitted, %d spent against %d" % (admitted, spent, LIMIT))
        self.assertGreater(spent, LIMIT)


class RaceOnMemory(Race, unittest.TestCase):
    def setUp(self):
        self.sluice = Sluice(RULES, args=["--threads", "2"])
        self.ports = [self.sluice.http_port]

    def tearDown(self):
        self.sluice.close()


class RaceOnRedis(RedisFixture, Race, unittest.TestCase):
    def setUp(self):
        self.redis.command("FLUSHALL")
        self.sluice = Sluice(RULES, args=["--store", "redis", "--redis", self.redis.url()] +
                             SHARED_MACHINE)
        self.ports = [self.sluice.http_port]

    def tearDown(self):
        self.sluice.close()


class RaceOnThreeSidecars(RedisFixture, Race, unittest.TestCase):
    def setUp(self):
        self.redis.command("FLUSHALL")
        self.sidecars = [Sluice(RULES, args=["--store", "redis", "--redis", self.redis.url()] +
                                SHARED_MACHINE) for _ in range(3)]
        self.ports = [s.http_port for s in self.sidecars]

    def tearDown(self):
        for s in self.sidecars:
            s.close()


class RaceOnRedisCluster(Race, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = RedisCluster()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def setUp(self):
        for port in self.cluster.ports:
            self.cluster.cli(port, "FLUSHALL")
        self.sluice = Sluice(RULES, args=["--store", "redis_cluster", "--redis",
                                          self.cluster.url()] + SHARED_MACHINE)
        self.ports = [self.sluice.http_port]

    def tearDown(self):
        self.sluice.close()


class KilledSidecar(RedisFixture, unittest.TestCase):
    """A sidecar killed (SIGKILL) while holding reservations: they return within their TTL,
    in Redis itself; what was committed stays."""

    def setUp(self):
        self.redis.command("FLUSHALL")
        args = ["--store", "redis", "--redis", self.redis.url()] + SHARED_MACHINE
        self.doomed = Sluice(RULES, args=args)
        self.survivor = Sluice(RULES, args=args)

    def tearDown(self):
        self.doomed.close()
        self.survivor.close()

    def test_holds_return_within_their_ttl(self):
        body = user("u1")
        # The final check counts the commit below in the limit's one-minute window: start
        # the test early enough in a window that it ends in the same one (it takes ~6 s, and
        # longer on a loaded machine).
        def window_left_ms():  # charged to another user: only a counted bucket has a reset
            _, probe = post(self.survivor.http_port, "/shouldAllowRequest", user("probe"))
            return probe["descriptors"][0]["limits"][0]["reset_after_ms"]
        if window_left_ms() < 25000:
            wait_for(lambda: window_left_ms() > 35000, 40, "the next one-minute window")
        status, committed = post(self.doomed.http_port, "/reserve", dict(body, amount=100))
        self.assertEqual(status, 200, committed)
        status, _ = post(self.doomed.http_port, "/commit",
                         dict(body, reservation_id=committed["reservation_id"], actual=100))
        self.assertEqual(status, 200)
        # The holds' ttl is long enough that the survivor still sees them after the kill on a
        # stalled machine; they must be back within that ttl (plus the polling) of being made.
        ttl = 4.0
        held_at = time.monotonic()
        for _ in range(4):
            status, held = post(self.doomed.http_port, "/reserve",
                                dict(body, amount=200, ttl_ms=int(ttl * 1000)))
            self.assertEqual(status, 200, held)
        self.doomed.signal(signal.SIGKILL)
        self.doomed.wait(10)
        status, denied = post(self.survivor.http_port, "/reserve", dict(body, amount=200))
        self.assertEqual(status, 429, denied)
        wait_for(lambda: post(self.survivor.http_port, "/reserve",
                              dict(body, amount=900, ttl_ms=20000))[0] == 200, 10,
                 "the dead sidecar's holds to return")
        self.assertLess(time.monotonic() - held_at, ttl + 1.5)
        # The commit made before the kill is still charged: 1000 - 100 - 900 held.
        status, check = post(self.survivor.http_port, "/shouldAllowRequest", dict(body, hits=0))
        self.assertEqual(check["descriptors"][0]["limits"][0]["remaining"], 0)


if __name__ == "__main__":
    unittest.main()

"""Replay equals live: a recorded run of the real sluice binary (HTTP and gRPC, every
algorithm, several clients, a rules change in between), replayed by `sluice simulate`
against the rules that were in force, reproduces every logged decision."""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from rls_support import BINARY, Sluice, request, wait_for

ALGORITHMS = ["fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket",
              "leaky_bucket", "sketch"]


def rules(limit):
    """One rule per algorithm, each keyed per user; `limit` requests per second."""
    text = "domain: replay\ndescriptors:\n"
    for algorithm in ALGORITHMS:
        text += (f"  - key: {algorithm}\n"
                 f"    descriptors:\n"
                 f"      - key: user\n"
                 f"        rate_limit: {{name: {algorithm}, unit: second, "
                 f"requests_per_unit: {limit}, algorithm: {algorithm}")
        if algorithm == "sketch":
            text += ", sketch: {width: 4096, depth: 4}"
        text += "}\n"
    return text


def rules_hash(sluice):
    with urllib.request.urlopen("http://127.0.0.1:%d/rules" % sluice.http_port, timeout=5) as r:
        return json.loads(r.read())["hash"]


class ReplayEqualsLiveTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sluice-replay-")
        self.access = os.path.join(self.dir, "access.log")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write_rules(self, name, text):
        path = os.path.join(self.dir, name)
        os.mkdir(path)
        with open(os.path.join(path, "replay.yaml"), "w") as f:
            f.write(text)
        return path

    def test_replay_reproduces_every_logged_decision(self):
        before, after = rules(5), rules(3)
        sluice = Sluice({"replay.yaml": before},
                        args=["--access-log", self.access, "--access-log-format", "json"])
        try:
            stub = sluice.stub()
            first_hash = rules_hash(sluice)
            rng = random.Random(7)
            users = ["alice", "bob", "carol", "dave"]
            sent = 0

            def burst(count):
                nonlocal sent
                for _ in range(count):
                    algorithm = rng.choice(ALGORITHMS)
                    user = rng.choice(users)
                    if rng.random() < 0.5:
                        stub.ShouldRateLimit(
                            request("replay", [[(algorithm, "on"), ("user", user)]]), timeout=5)
                    else:
                        status, _, _ = sluice.post_json("/shouldAllowRequest", {
                            "domain": "replay", "clientId": "http-" + user,
                            "descriptors": [{"entries": [{"key": algorithm, "value": "on"},
                                                         {"key": "user", "value": user}]}]})
                        self.assertIn(status, (200, 429))
                    sent += 1

            for _ in range(3):
                burst(120)
                time.sleep(0.3)
            # The rules change: tighter limits, picked up at once on SIGHUP.
            with open(os.path.join(sluice.rules_dir, "replay.yaml"), "w") as f:
                f.write(after)
            sluice.signal(signal.SIGHUP)

            wait_for(lambda: rules_hash(sluice) != first_hash, 10, "the rules reload")
            for _ in range(3):
                burst(120)
                time.sleep(0.3)
        finally:
            sluice.close()  # SIGTERM: the access log is flushed before exit

        with open(self.access) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        self.assertEqual(len(lines), sent)
        self.assertEqual(len({line["rules"] for line in lines}), 2)
        self.assertGreater(sum(line["decision"] == "denied" for line in lines), 50)
        self.assertGreater(sum(line["decision"] == "allowed" for line in lines), 50)

        old = self.write_rules("before", before)
        new = self.write_rules("after", after)
        done = subprocess.run([BINARY, "simulate", "--rules", new, "--baseline", old,
                               "--baseline", new, "--log", self.access, "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr.decode())
        report = json.loads(done.stdout)
        summary = report["summary"]
        print(json.dumps(summary), file=sys.stderr)
        self.assertEqual(summary["requests"], sent)
        self.assertEqual(summary["malformed_lines"], 0)
        self.assertEqual(summary["recorded_decisions_compared"], sent)
        # Every algorithm exactly; the sketch within its error, which at this width and
        # four users is none: it too must match.
        self.assertEqual(summary["recorded_decisions_reproduced"], sent,
                         "\n".join(report["differences"]))
        for rule in report["rules"]:
            self.assertEqual(rule["recorded_decisions_differing"], 0, rule)


if __name__ == "__main__":
    unittest.main()

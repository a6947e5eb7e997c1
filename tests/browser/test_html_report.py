"""The what-if HTML report in a real browser: headless Chromium (Debian's `chromium`) loads
a report made by `sluice simulate --html`, the test checks that the charts rendered (their
elements and sizes in the DOM), that no script error happened, that the table sorts, and
saves a screenshot.

Driven with Chromium's --dump-dom: the test loads a copy of the report with a probe script
added (an error listener first, a measuring script last) that writes what it finds into
the DOM, which --dump-dom prints. Exits 77 (CTest's skip) only when Chromium is missing.
"""

import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

BINARY = os.environ.get("SLUICE_BINARY", "build/sluice")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT = os.environ.get("SLUICE_REPORT_SCREENSHOT")

OLD = """domain: api
descriptors:
  - key: path
    value: /login
    descriptors:
      - key: user
        rate_limit: {name: login_per_user, unit: minute, requests_per_unit: 10}
  - key: path
    value: /search
    descriptors:
      - key: user
        rate_limit: {name: search_per_user, unit: second, requests_per_unit: 5, algorithm: token_bucket}
"""
NEW = OLD.replace("requests_per_unit: 10}", "requests_per_unit: 4}").replace(
    "requests_per_unit: 5, algorithm", "requests_per_unit: 3, algorithm")

ERROR_PROBE = """<script>window.__errors=[];
window.addEventListener('error',function(e){window.__errors.push(String(e.message));});
(function(){var c=console.error;console.error=function(){window.__errors.push(
Array.prototype.join.call(arguments,' '));c.apply(console,arguments);};})();</script>"""

MEASURE_PROBE = """<script>(function(){
var out={charts:[],errors:window.__errors,rows:0,sorted:null};
document.querySelectorAll('svg.chart-svg').forEach(function(svg){
  var box=svg.getBoundingClientRect();var paths=svg.querySelectorAll('path.series');
  var lengths=[];paths.forEach(function(p){lengths.push(p.getTotalLength());});
  out.charts.push({id:svg.id,width:box.width,height:box.height,paths:paths.length,
                   lengths:lengths,limit:svg.querySelectorAll('line.limit').length});});
var table=document.getElementById('newly-denied');
if(table){out.rows=table.tBodies[0].rows.length;
  var th=table.querySelectorAll("th")[5];th.click();th.click();
  var values=[];for(var i=0;i<table.tBodies[0].rows.length;i++){
    values.push(parseFloat(table.tBodies[0].rows[i].cells[5].textContent));}
  var ok=true;for(var j=1;j<values.length;j++){if(values[j-1]<values[j]){ok=false;}}
  out.sorted=ok;}
out.summary=(document.getElementById('summary')||{}).textContent||'';
var pre=document.createElement('pre');pre.id='probe';pre.textContent=JSON.stringify(out);
document.body.appendChild(pre);})();</script>"""


def chromium(*args, timeout=90):
    profile = tempfile.mkdtemp(prefix="sluice-chromium-")
    try:
        command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                   "--no-first-run", "--disable-background-networking",
                   "--disable-component-update", "--disable-sync",
                   "--user-data-dir=" + profile] + list(args)
        return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class HtmlReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sluice-report-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def make_report(self):
        rng = random.Random(3)
        lines = []
        start = 1795651200  # 2026-11-26T00:00:00Z
        for i in range(6000):
            t = start + i * 0.05  # five minutes, 20 requests per second
            user = "mallory" if rng.random() < 0.15 else "user-%d" % rng.randrange(40)
            path = rng.choice(["/login", "/search"])
            seconds = int(t)
            micros = int(round((t - seconds) * 1e6))
            stamp = "2026-11-26T00:%02d:%02d.%06dZ" % ((seconds - start) // 60,
                                                     (seconds - start) % 60, micros)
            lines.append(json.dumps({"time": stamp, "domain": "api", "client": "",
                                     "descriptors": [{"path": path, "user": user}],
                                     "hits": 1}))
        log = self.write("access.log", "\n".join(lines) + "\n")
        old = self.write("old.yaml", OLD)
        new = self.write("new.yaml", NEW)
        report = os.path.join(self.dir, "report.html")
        done = subprocess.run([BINARY, "simulate", "--rules", new, "--baseline", old, "--log", log,
                               "--html", report], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr.decode())
        return report

    def test_the_report_renders_its_charts_in_chromium(self):
        report = self.make_report()
        with open(report) as f:
            page = f.read()
        # Self-contained: nothing is fetched.
        self.assertIsNone(re.search(r'(src|href)="(https?:)?//', page))
        probed = page.replace("<head>", "<head>" + ERROR_PROBE, 1).replace(
            "</body>", MEASURE_PROBE + "</body>", 1)
        probe_page = self.write("probe.html", probed)
        done = chromium("--virtual-time-budget=5000", "--window-size=900,3000", "--dump-dom",
                        "file://" + probe_page)
        self.assertEqual(done.returncode, 0, done.stderr.decode()[-2000:])
        match = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout.decode(), re.S)
        self.assertIsNotNone(match, done.stdout.decode()[-2000:])
        result = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&")
                            .replace("&lt;", "<").replace("&gt;", ">"))
        self.assertEqual(result["errors"], [])
        self.assertIn("requests replayed", result["summary"])
        charts = {c["id"]: c for c in result["charts"]}
        # The client chart (rate vs limit), its denials, and one chart per rule.
        self.assertIn("chart-client", charts)
        self.assertEqual(charts["chart-client"]["limit"], 1)
        self.assertIn("chart-rule-0", charts)
        self.assertIn("chart-rule-1", charts)
        for chart in result["charts"]:
            self.assertGreater(chart["width"], 500, chart)
            self.assertGreater(chart["height"], 150, chart)
            self.assertGreaterEqual(chart["paths"], 1, chart)
            self.assertTrue(all(length > 0 for length in chart["lengths"]), chart)
        self.assertGreater(result["rows"], 0)
        self.assertTrue(result["sorted"], "the table did not sort by 'newly denied'")

        screenshot = SCREENSHOT or os.path.join(self.dir, "report.png")
        done = chromium("--window-size=900,1800", "--hide-scrollbars",
                        "--screenshot=" + screenshot, "file://" + report)
        self.assertEqual(done.returncode, 0, done.stderr.decode()[-2000:])
        with open(screenshot, "rb") as f:
            png = f.read()
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        self.assertGreater(len(png), 20000)
        print("screenshot: " + screenshot, file=sys.stderr)


if __name__ == "__main__":
    if CHROMIUM is None:
        print("SKIPPED: chromium is not installed (scripts/deps.sh test installs it)")
        sys.exit(77)
    unittest.main()

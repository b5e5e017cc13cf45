# SPDX-License-Identifier: BSD-3-Clause
"""Prometheus for real: Debian's prometheus server scrapes a sigma-udpd and a
sigmad while 4 ranks sum on the sigma-udpd (rank 3 20 ms late on every push),
and the test asks the server's HTTP API, in PromQL, what it saw:

- the pushes of each rank and the rounds completed equal the ranks' own counts;
- the rate of rounds agrees with the ranks' rounds per second;
- histogram_quantile() of rank 3's lateness lies in the log2 bucket of 20 ms,
  the other ranks' far below, and rank 3 is the straggler;
- deploy/prometheus/sigma-alerts.yml loads into the server, every rule
  evaluates, and SigmaRankLate is pending for rank 3 of this job only;
- every query of deploy/grafana/sigma-dashboard.json parses and runs.

Before that, promtool checks the shipped configuration, rules and the rules'
unit tests, and must refuse a broken rule."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

import sgtest
import sigma
from sigma.localnodes import start_local_nodes
from test_straggler import DELAY, N, SLOW, SlowRanks

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(SRC, "deploy")
RULES = os.path.join(DEPLOY, "prometheus", "sigma-alerts.yml")
DASHBOARD = os.path.join(DEPLOY, "grafana", "sigma-dashboard.json")


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        sgtest.skip(f"no {name} here: install Debian's prometheus package (./sigma deps)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_log(path: str, pattern: str, proc: subprocess.Popen, what: str,
             timeout: float = 30.0) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path) as f:
            m = re.search(pattern, f.read())
        if m:
            return m
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    with open(path) as f:
        raise AssertionError(f"{what} did not start (exit {proc.poll()}):\n{f.read()}")


class Prom:
    """The server's HTTP API."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path: str, **params: str) -> dict:
        url = self.base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:  # a bad query answers 400 with a JSON body
            return json.loads(e.read())

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        r = self.get("/api/v1/query", **params)
        if r.get("status") != "success":
            raise AssertionError(f"{expr}: {r.get('errorType')}: {r.get('error')}")
        return r["data"]["result"]

    def value(self, expr: str, at: float | None = None, **labels: str) -> float | None:
        for s in self.query(expr, at):
            if all(s["metric"].get(k) == v for k, v in labels.items()):
                return float(s["value"][1])
        return None


class PromTool(unittest.TestCase):
    def test_shipped_files(self):
        promtool = tool("promtool")
        for args in (["check", "rules", RULES],
                     ["test", "rules", os.path.join(DEPLOY, "prometheus", "sigma-alerts.test.yml")],
                     ["check", "config", os.path.join(DEPLOY, "prometheus", "prometheus.yml")]):
            r = subprocess.run([promtool] + args, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, f"promtool {' '.join(args)}:\n{r.stdout}{r.stderr}")
        with open(DASHBOARD) as f:
            dash = json.load(f)
        self.assertGreater(len(dash_exprs(dash)), 10)
        # the checks can fail: a rule whose expression does not parse
        with tempfile.TemporaryDirectory() as tmp:
            bad = os.path.join(tmp, "bad.yml")
            with open(RULES) as f:
                text = f.read()
            with open(bad, "w") as f:
                f.write(text.replace("> 0.010", "> > 0.010", 1))
            r = subprocess.run([promtool, "check", "rules", bad], capture_output=True,
                               text=True, timeout=60)
            self.assertNotEqual(r.returncode, 0, r.stdout)


def dash_exprs(dash: dict) -> list[str]:
    out = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    # a variable's label_values(SELECTOR, LABEL), as the query Grafana makes of it
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            m = re.fullmatch(r"label_values\((.*), *(\w+)\)", v["query"]["query"])
            assert m is not None, v["query"]["query"]
            out.append(f"group by ({m.group(2)}) ({m.group(1)})")
    return out


class RealPrometheus(unittest.TestCase):
    def setUp(self) -> None:
        self.prometheus = tool("prometheus")
        self.tmp = tempfile.mkdtemp(prefix="sg_prom_")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def start(self, args: list[str], log: str) -> subprocess.Popen:
        p = subprocess.Popen(args, stdout=open(os.path.join(self.tmp, log), "w"),
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)

        def stop() -> None:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        self.addCleanup(stop)
        return p

    def start_sigmad(self) -> int | None:
        """A sigmad with one configured job on net_null (nothing to sum: its
        lcores and job are what the server scrapes); its metrics port."""
        path = os.path.join(os.environ.get("SIGMA_BUILD_DIR", ""), "sigmad", "sigmad")
        if not os.access(path, os.X_OK):
            return None
        conf = os.path.join(self.tmp, "sigmad.ini")
        with open(conf, "w") as f:
            f.write("[layout]\nrtc = (0,0,1)\n[live]\nidle = sleep\n"
                    "[job 1]\nworkers = 2\nkeys = 4\npartition_bytes = 40000\n"
                    f"[control]\nunix = {self.tmp}/sigmad.sock\nmetrics = 127.0.0.1:0\n"
                    "name = promnode\n")
        p = self.start([path, "--no-huge", "--no-shconf", "--no-pci", "-m", "256",
                        "--log-level=lib.eal:error", "--lcores=(0-1)@(0-1)", "--vdev=net_null0",
                        f"--file-prefix=sg_prom_{os.getpid()}", "--", "--config", conf],
                       "sigmad.log")
        m = wait_log(os.path.join(self.tmp, "sigmad.log"), r"metrics port (\d+)", p, "sigmad")
        return int(m.group(1))

    def test_scrape_and_query(self):
        nodes = start_local_nodes(1, extra_args=["--metrics", "127.0.0.1:0"])
        self.addCleanup(nodes.stop)
        with open(nodes.nodes[0].log) as f:
            udpd_port = int(re.search(r"metrics port (\d+)", f.read()).group(1))
        sigmad_port = self.start_sigmad()
        web = free_port()
        conf = os.path.join(self.tmp, "prometheus.yml")
        scrape = [("sigma-udpd", udpd_port)] + ([("sigmad", sigmad_port)] if sigmad_port else [])
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    f"rule_files:\n  - {RULES}\nscrape_configs:\n")
            for name, port in scrape:
                f.write(f"  - job_name: {name}\n    static_configs:\n"
                        f"      - targets: ['127.0.0.1:{port}']\n")
        p = self.start([self.prometheus, f"--config.file={conf}",
                        f"--storage.tsdb.path={self.tmp}/data", f"--web.listen-address=127.0.0.1:{web}",
                        "--log.level=warn"], "prometheus.log")
        prom = Prom(web)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(prom.base + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if p.poll() is not None or time.monotonic() > deadline:
                with open(os.path.join(self.tmp, "prometheus.log")) as f:
                    self.fail(f"prometheus did not get ready (exit {p.poll()}):\n{f.read()}")
            time.sleep(0.2)
        # every target up before the ranks start, so that the first scrape sees 0
        deadline = time.monotonic() + 30
        while len(prom.query("up == 1")) < len(scrape):
            self.assertLess(time.monotonic(), deadline, prom.query("up"))
            time.sleep(0.2)

        job = sigma.create_job(nodes.targets, N, tensors=[("t", 1000)])
        self.addCleanup(sigma.destroy_job, nodes.targets, job.id)
        t0 = time.time()
        ranks = SlowRanks(job)
        try:
            time.sleep(6.0)
        finally:
            ranks.stop()
        t1 = time.time()
        self.assertEqual(ranks.errors, [])
        rounds = ranks.rounds[0]
        self.assertEqual(ranks.rounds, [rounds] * N)
        self.assertGreater(rounds, 20)
        sel = f'job="sigma-udpd",sigma_job="{job.id}"'

        # the server has the final counts once it scraped after the last round
        deadline = time.monotonic() + 20
        while prom.value(f"sigma_job_rounds_completed_total{{{sel}}}") != rounds:
            if time.monotonic() > deadline:
                self.fail(f"prometheus: rounds {prom.query(f'sigma_job_rounds_completed_total')}, "
                          f"the ranks did {rounds}")
            time.sleep(0.2)
        at = time.time()
        for r in range(N):
            self.assertEqual(prom.value(f"sigma_job_push_lateness_seconds_count{{{sel}}}",
                                        rank=str(r)), rounds, f"rank {r}'s pushes")
        self.assertEqual(prom.value(f"sum(sigma_job_push_lateness_seconds_count{{{sel}}})"),
                         N * rounds)
        # rates: over the ranks' run, within half and double of what they did
        span = max(2, int(t1 - t0))
        rate = prom.value(f"rate(sigma_job_rounds_completed_total{{{sel}}}[{span}s])", t1)
        own = rounds / (t1 - t0)
        self.assertIsNotNone(rate)
        self.assertTrue(0.5 * own <= rate <= 2 * own, f"rate {rate}, ranks {own:.1f}/s")
        push_rate = prom.value(f"sum(rate(sigma_job_push_lateness_seconds_count{{{sel}}}"
                               f"[{span}s]))", t1)
        self.assertTrue(0.5 * N * own <= push_rate <= 2 * N * own, push_rate)

        # lateness: rank 3's median in the bucket of 20 ms, the others' far below
        q = ("histogram_quantile(0.5, sum by (rank, le) (rate("
             f"sigma_job_push_lateness_seconds_bucket{{{sel}}}[{span}s])))")
        for r in range(N):
            med = prom.value(q, t1, rank=str(r))
            self.assertIsNotNone(med, f"no median for rank {r}")
            if r == SLOW:
                self.assertTrue(0.016384 <= med <= 0.032768, f"rank {r}: {med}")
            else:
                self.assertLess(med, DELAY / 4, f"rank {r}")
        self.assertEqual(prom.value(f"sigma_job_straggler_rank{{{sel}}}", at), SLOW)
        avg = prom.value(f"sigma_job_rank_lateness_avg_seconds{{{sel}}}", at, rank=str(SLOW))
        self.assertLess(abs(avg - DELAY), 0.2 * DELAY)

        # the shipped alert rules: loaded, evaluated, and SigmaRankLate pending
        # for this job's rank 3 only (its `for` is 5 minutes)
        deadline = time.monotonic() + 20
        while True:
            groups = prom.get("/api/v1/rules")["data"]["groups"]
            rules = [r for g in groups for r in g["rules"]]
            alerts = [a for a in prom.get("/api/v1/alerts")["data"]["alerts"]
                      if a["labels"]["alertname"] == "SigmaRankLate"]
            if (len(rules) == 6 and all(r.get("health") == "ok" for r in rules) and alerts):
                break
            if time.monotonic() > deadline:
                self.fail(f"rules {json.dumps(rules)[:2000]}\nalerts {alerts}")
            time.sleep(0.5)
        self.assertEqual([(a["labels"]["sigma_job"], a["labels"]["rank"], a["state"])
                          for a in alerts], [(str(job.id), str(SLOW), "pending")])
        self.assertEqual(alerts[0]["annotations"]["summary"],
                         f"Sigma job {job.id}: rank {SLOW} is late")

        # sigmad: up, its lcores and its configured job
        if sigmad_port:
            self.assertEqual(prom.value('up{job="sigmad"}'), 1)
            self.assertEqual(prom.value('sigma_job_info{job="sigmad",sigma_job="1"}'), 1)
            lcores = prom.query('sigma_lcore_busy_cycles_total{job="sigmad"}')
            self.assertGreaterEqual(len(lcores), 1)
            self.assertTrue(all(s["metric"].get("role") for s in lcores), lcores)

        # the dashboard: every query runs; the lateness and rounds panels have data
        with open(DASHBOARD) as f:
            dash = json.load(f)
        seen = {}
        for expr in dash_exprs(dash):
            e = (expr.replace("$__rate_interval", f"{span}s").replace("$instance", ".*")
                 .replace("$sigma_job", ".*"))
            seen[expr] = prom.query(e, t1)
        self.assertTrue(any("push_lateness_seconds_bucket" in e and any(
            s["metric"].get("rank") == str(SLOW) for s in v) for e, v in seen.items()))
        self.assertTrue(any("rounds_completed_total" in e and v for e, v in seen.items()))
        print(f"{rounds} rounds in {t1 - t0:.1f} s; rate {rate:.1f}/s against {own:.1f}/s; "
              f"{len(seen)} dashboard queries ran")


if __name__ == "__main__":
    unittest.main()

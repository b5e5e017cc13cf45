# SPDX-License-Identifier: BSD-3-Clause
"""Prometheus for real: Debian's prometheus server scrapes a sigma-udpd and a
sigmad (on kernel sockets) while 4 ranks sum on each (rank 3 20 ms late on
every push), and the test asks the server's HTTP API, in PromQL, what it saw:

- the pushes of each rank and the rounds completed equal the ranks' own counts,
  on both nodes, and rank 3 is the straggler on both;
- the rate of rounds agrees with the ranks' rounds per second;
- histogram_quantile() of rank 3's lateness lies in the log2 bucket of 20 ms,
  the other ranks' far below, and rank 3 is the straggler;
- deploy/prometheus/sigma-alerts.yml loads into the server, every rule
  evaluates, and SigmaRankLate is pending for rank 3 of this job only;
- garbage sent to the node is in sigma_drops_total under its reasons;
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
SHORT, MAGIC = 7, 5  # garbage datagrams sent: too short for a header, and no magic


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

    def start_sigmad(self) -> tuple[int, str] | None:
        """A sigmad on kernel sockets at 127.0.0.1 ([transport] type = socket), so
        that ranks can sum through it too; its metrics port and control target."""
        path = os.path.join(os.environ.get("SIGMA_BUILD_DIR", ""), "sigmad", "sigmad")
        if not os.access(path, os.X_OK):
            return None
        conf = os.path.join(self.tmp, "sigmad.ini")
        with open(conf, "w") as f:
            f.write(f"[net]\nip = 127.0.0.1\nudp_port = {sgtest.free_ports(66)}\n"
                    "[layout]\nrtc = (0,0,1)\n[live]\nidle = sleep\n"
                    "[transport]\ntype = socket\n"
                    f"[control]\nunix = {self.tmp}/sigmad.sock\nmetrics = 127.0.0.1:0\n"
                    "name = promnode\n")
        p = self.start([path, "--no-huge", "--no-shconf", "--no-pci", "-m", "256",
                        "--log-level=lib.eal:error", "--lcores=(0-1)@(0-1)",
                        f"--file-prefix=sg_prom_{os.getpid()}", "--", "--config", conf],
                       "sigmad.log")
        m = wait_log(os.path.join(self.tmp, "sigmad.log"), r"metrics port (\d+)", p, "sigmad")
        return int(m.group(1)), f"unix:{self.tmp}/sigmad.sock"

    def wait_rounds(self, prom: Prom, sel: str, rounds: int) -> None:
        """Until the server's last scrape of @sel's rounds is the ranks' @rounds (20 s)."""
        deadline = time.monotonic() + 20
        while prom.value(f"sigma_job_rounds_completed_total{{{sel}}}") != rounds:
            if time.monotonic() > deadline:
                self.fail(f"{sel}: rounds {prom.query('sigma_job_rounds_completed_total')}, "
                          f"the ranks did {rounds}")
            time.sleep(0.2)

    def test_scrape_and_query(self):
        nodes = start_local_nodes(1, extra_args=["--metrics", "127.0.0.1:0"])
        self.addCleanup(nodes.stop)
        with open(nodes.nodes[0].log) as f:
            udpd_port = int(re.search(r"metrics port (\d+)", f.read()).group(1))
        sigmad = self.start_sigmad()
        sigmad_port = sigmad[0] if sigmad else None
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

        # garbage to the node's port, each kind with its drop reason
        with open(nodes.nodes[0].log) as f:
            udp = int(re.search(r"on 127\.0\.0\.1:(\d+)", f.read()).group(1))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _ in range(SHORT):
                s.sendto(b"short", ("127.0.0.1", udp))
            for _ in range(MAGIC):
                s.sendto(bytes(64), ("127.0.0.1", udp))
        job = sigma.create_job(nodes.targets, N, tensors=[("t", 1000)])
        self.addCleanup(sigma.destroy_job, nodes.targets, job.id)
        # ... and as many ranks summing through the sigmad, rank 3 late there too
        djob = sigma.create_job([sigmad[1]], N, tensors=[("t", 1000)]) if sigmad else None
        if djob is not None:
            self.addCleanup(sigma.destroy_job, [sigmad[1]], djob.id)
        t0 = time.time()
        ranks = SlowRanks(job)
        dranks = SlowRanks(djob) if djob is not None else None
        try:
            time.sleep(6.0)
        finally:
            ranks.stop()
            if dranks is not None:
                dranks.stop()
        t1 = time.time()
        self.assertEqual(ranks.errors, [])
        self.assertEqual(dranks.errors if dranks else [], [])
        rounds = ranks.rounds[0]
        self.assertEqual(ranks.rounds, [rounds] * N)
        self.assertGreater(rounds, 20)
        sel = f'job="sigma-udpd",sigma_job="{job.id}"'

        # the server has the final counts once it scraped after the last round
        self.wait_rounds(prom, sel, rounds)
        at = time.time()
        for r in range(N):
            self.assertEqual(prom.value(f"sigma_job_push_lateness_seconds_count{{{sel}}}",
                                        rank=str(r)), rounds, f"rank {r}'s pushes")
        self.assertEqual(prom.value(f"sum(sigma_job_push_lateness_seconds_count{{{sel}}})"),
                         N * rounds)
        # the payload summed: every rank's 1000 fp32 of every round, once
        self.assertEqual(prom.value(f"sigma_job_pushed_bytes_total{{{sel}}}"),
                         N * rounds * 1000 * 4)
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

        # drops by reason: what was sent, and nothing else dropped
        drops = {d["metric"]["reason"]: float(d["value"][1]) for d in
                 prom.query('sigma_drops_total{job="sigma-udpd"}', at)}
        self.assertEqual(drops.get("engine_short"), SHORT, drops)
        self.assertEqual(drops.get("engine_magic"), MAGIC, drops)
        # ... and no other reason, but the resends of pushes the node already had
        # (rank 3 is late: the others' pushes wait, and their timers fire)
        self.assertEqual(sum(v for k, v in drops.items() if k != "engine_duplicate"),
                         SHORT + MAGIC, drops)
        if sigmad_port:  # sigmad's reasons are there, named as /sigma/drops names them
            self.assertIsNotNone(prom.value('sigma_drops_total{job="sigmad",'
                                            'reason="engine_short"}', at))

        # the shipped alert rules: loaded, evaluated, and SigmaRankLate pending
        # for this job's rank 3 only (its `for` is 5 minutes)
        deadline = time.monotonic() + 20
        while True:
            groups = prom.get("/api/v1/rules")["data"]["groups"]
            rules = [r for g in groups for r in g["rules"]]
            alerts = [a for a in prom.get("/api/v1/alerts")["data"]["alerts"]
                      if a["labels"]["alertname"] == "SigmaRankLate"]
            if (len(rules) == 7 and all(r.get("health") == "ok" for r in rules)
                    and len(alerts) == (2 if djob else 1)):
                break
            if time.monotonic() > deadline:
                self.fail(f"rules {json.dumps(rules)[:2000]}\nalerts {alerts}")
            time.sleep(0.5)
        want = [("sigma-udpd", str(job.id), str(SLOW), "pending")]
        if djob is not None:
            want.append(("sigmad", str(djob.id), str(SLOW), "pending"))
        self.assertEqual(sorted((a["labels"]["job"], a["labels"]["sigma_job"],
                                 a["labels"]["rank"], a["state"]) for a in alerts), sorted(want))
        self.assertIn(f"Sigma job {job.id}: rank {SLOW} is late",
                      [a["annotations"]["summary"] for a in alerts])

        # sigmad: up, its lcore, and its job's rounds and straggler as its ranks saw them
        if dranks is not None:
            drounds = dranks.rounds[0]
            self.assertEqual(dranks.rounds, [drounds] * N)
            dsel = f'job="sigmad",sigma_job="{djob.id}"'
            self.wait_rounds(prom, dsel, drounds)
            self.assertEqual(prom.value('up{job="sigmad"}'), 1)
            self.assertEqual(prom.value(f"sigma_job_pushed_bytes_total{{{dsel}}}"),
                             N * drounds * 1000 * 4)
            self.assertEqual(prom.value(f"sigma_job_straggler_rank{{{dsel}}}"), SLOW)
            for r in range(N):
                self.assertEqual(prom.value(f"sigma_job_push_lateness_seconds_count{{{dsel}}}",
                                            rank=str(r)), drounds, f"sigmad, rank {r}")
            lcores = prom.query('sigma_lcore_packets_total{job="sigmad"}')
            self.assertEqual([s["metric"].get("role") for s in lcores], ["rtc"], lcores)
            self.assertGreaterEqual(float(lcores[0]["value"][1]), N * drounds)

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
        print(f"{rounds} rounds in {t1 - t0:.1f} s on sigma-udpd"
              + (f", {dranks.rounds[0]} on sigmad" if dranks else "")
              + f"; rate {rate:.1f}/s against {own:.1f}/s; {len(seen)} dashboard queries ran")


if __name__ == "__main__":
    unittest.main()

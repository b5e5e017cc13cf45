#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench/chaos.sh for 60 s (seed 11, 3 nodes, 4 workers, an event every 5-10 s:
# kills and restarts, drains, added nodes, an etcd member stopped): every sum
# checked bit for bit, none wrong, no operation failed, rounds done through
# the events, and the report has what it says. Skipped without etcd.
# Usage: test_chaos.sh BUILD_DIR
set -u
command -v etcd >/dev/null && command -v etcdctl >/dev/null ||
	{ echo "SKIP: no etcd/etcdctl (Debian packages etcd-server, etcd-client)"; exit 77; }
OUT=$(mktemp /tmp/sg_chaos_test.XXXXXX)
trap 'rm -f "$OUT"' EXIT
"$(dirname "$0")/../../bench/chaos.sh" "$1" 60 11 3 4 5 10 >"$OUT" 2>/dev/null
python3 - "$OUT" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = [e for e in d.get("events", []) if "to_first_round_ms" in e]
fails = []
def check(ok, what):
    if not ok:
        fails.append(what)
check("error" not in d, f"error: {d.get('error')}")
check(d.get("workers_exit") == 0, f"workers exit {d.get('workers_exit')}: {d.get('failures')}")
check(d.get("wrong_sums") == 0, f"wrong sums: {d.get('wrong_sums')}")
check(d.get("failed_ops") == 0, f"failed operations: {d.get('failures')}")
check((d.get("rounds") or 0) > 100, f"only {d.get('rounds')} rounds")
check(len(ev) >= 3, f"only {len(ev)} events: {d.get('events')}")
check(all(e["to_first_round_ms"] is not None for e in ev), "an event with no round after it")
check(len(d.get("capacity", [])) > 20, "no capacity over time")
print(f"chaos 60 s: {d.get('rounds')} rounds, {len(ev)} events "
      f"({', '.join(e['event'] + ' ' + e['what'] for e in ev)}), recovery p50 "
      f"{d.get('recovery_ms_p50')} ms p99 {d.get('recovery_ms_p99')} ms "
      f"({d.get('recovery_p99_over_ttl')} TTL), wrong {d.get('wrong_sums')}, failed "
      f"{d.get('failed_ops')}, workers' RSS {d['rss_kb']['workers']} kB")
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY

"""Checks the Chrome trace a run wrote for log.trace_steps, with nothing but the json module.

Usage: check_trace.py TRACE_DIR RANKS FIRST LAST MICRO_BATCHES [comm] [pipeline] [checkpoint]

TRACE_DIR holds rank-N.json for each of RANKS ranks and trace.json merging them. Passes
(exit 0) when every file parses as {"traceEvents": [...]}; trace.json holds exactly the
events of the rank files; every rank is a process named "rank N" with named tracks; every
"X" event has ts, dur >= 0 and a step in FIRST..LAST (nothing from other steps); every rank
has, for each traced step, a "step N" span, data and optimizer spans, a forward and a
backward action for each of its MICRO_BATCHES micro-batches, and per-layer spans inside
them; the ranks' clocks share their origin (every rank's first traced step starts within a
few seconds of zero). With "comm": every rank has communication events on tracks of their
own, every one with bytes, and some with bytes > 0; with "pipeline": sends and receives with
a peer rank; with "checkpoint": a checkpoint span. Otherwise prints each discrepancy and
exits 1.
"""
import json
import os
import sys
from collections import defaultdict

problems = []


def check(condition, message):
    if not condition:
        problems.append(message)
    return condition


def load(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise SystemExit(f"FAIL: {path} is not a Chrome trace (no traceEvents array)")
    return doc["traceEvents"]


def main():
    trace_dir, ranks, first, last, micro = sys.argv[1], *map(int, sys.argv[2:6])
    flags = set(sys.argv[6:])
    traced = set(range(first, last + 1))
    merged = load(os.path.join(trace_dir, "trace.json"))
    per_rank = [load(os.path.join(trace_dir, f"rank-{r}.json")) for r in range(ranks)]
    check(sorted(map(json.dumps, merged)) == sorted(json.dumps(e) for doc in per_rank for e in doc),
          "trace.json does not hold exactly the events of the rank files")

    threads = defaultdict(dict)  # pid -> tid -> name
    names = {}
    spans = defaultdict(list)  # pid -> X events
    for e in merged:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[e["pid"]][e["tid"]] = e["args"]["name"]
        elif e.get("ph") == "X":
            spans[e["pid"]].append(e)
    check(sorted(spans) == list(range(ranks)), f"events come from ranks {sorted(spans)}, expected 0..{ranks - 1}")
    for rank in range(ranks):
        check(names.get(rank) == f"rank {rank}", f"process {rank} is named {names.get(rank)!r}")
        events = spans[rank]
        where = f"rank {rank}"
        for e in events:
            check(e["tid"] in threads[rank], f"{where}: {e['name']} is on an unnamed track {e['tid']}")
            check(e["ts"] >= 0 and e["dur"] >= 0, f"{where}: {e['name']} has ts {e['ts']} dur {e['dur']}")
            check(e["args"].get("step") in traced,
                  f"{where}: {e['name']} ({e['cat']}) is from step {e['args'].get('step')}, outside {first}-{last}")
        for step in sorted(traced):
            of_step = [e for e in events if e["args"]["step"] == step]
            kinds = {e["cat"] for e in of_step}
            check(any(e["name"] == f"step {step}" and e["cat"] == "step" for e in of_step),
                  f"{where}: no span 'step {step}'")
            for kind in ("data", "optimizer", "layer"):
                check(kind in kinds, f"{where}: no {kind} span in step {step}")
            for m in range(micro):
                actions = [e["name"] for e in of_step if e["cat"] == "compute" and e["args"].get("micro") == m]
                check(any(a.startswith("forward") for a in actions), f"{where}: no forward of micro-batch {m} in step {step}")
                check(any(a.startswith("backward") for a in actions),
                      f"{where}: no backward of micro-batch {m} in step {step}")
            check(not any(e["cat"] == "compute" and e["args"].get("micro", -1) >= micro for e in of_step),
                  f"{where}: a compute action of a micro-batch beyond {micro} in step {step}")
        starts = [e["ts"] for e in events if e["name"] == f"step {first}"]
        check(starts and starts[0] < 5e6, f"{where}: step {first} starts at {starts} us, not near the common zero")
        comm = [e for e in events if e["cat"] == "comm"]
        if "comm" in flags:
            check(comm, f"{where}: no communication events")
            check(all("bytes" in e["args"] for e in comm), f"{where}: a communication event without bytes")
            check(any(e["args"].get("bytes", 0) > 0 for e in comm), f"{where}: no communication event moved bytes")
            check(all(threads[rank].get(e["tid"]) != "training loop" for e in comm),
                  f"{where}: communication on the training loop's track")
        else:
            check(not comm, f"{where}: {len(comm)} communication events on a single rank")
        if "pipeline" in flags:
            for op in ("send", "recv"):
                check(any(e["name"] == op and e["args"].get("peer_rank", -1) >= 0 for e in comm),
                      f"{where}: no pipeline {op} with a peer rank")
        if "checkpoint" in flags:
            check(any(e["cat"] == "checkpoint" for e in events), f"{where}: no checkpoint span")
    for p in problems:
        print(f"FAIL: {p}")
    if problems:
        sys.exit(1)
    total = sum(len(v) for v in spans.values())
    print(f"trace ok: {ranks} rank(s), {total} spans, steps {first}-{last}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Where each training step's GPU time goes, from a kernel timeline.

Reads the CSV that libustrain_kernel_trace.so writes (kernels/cuda/tools/kernel_trace.cpp: kind,
start_ns, end_ns, stream, name for every kernel, copy and memset, timed by the GPU while the
program ran at full speed), cuts it into training steps, and prints per step: the busy time
of each op class (scripts/kernel-classes.py's rules), the time the GPU sat idle, and the
largest idle gaps with the kernels on either side (what the GPU waited for: a host
synchronisation, a slow launch, the host's own work between steps).

    scripts/kernel-timeline.py TRACE.csv [--marker REGEX] [--per-step N] [--skip K] [--gaps 12] [--top 20]

A step starts at every N-th launch of the marker kernel (default: the embedding lookup, once
per micro-batch, so N is the step's gradient-accumulation count); the first K steps are left
out (warm-up), and the last, whose end the trace does not show, too.
"""
import argparse
import csv
import importlib.util
import os
import re
import sys

_spec = importlib.util.spec_from_file_location(
    "kernel_classes", os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel-classes.py"))
kernel_classes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kernel_classes)


def read_trace(path):
    with open(path, newline="") as f:
        rows = [(r["kind"], int(r["start_ns"]), int(r["end_ns"]), r["name"]) for r in csv.DictReader(f)]
    if not rows:
        sys.exit(f"kernel-timeline: {path}: no records")
    return sorted(rows, key=lambda r: r[1])


def class_of(kind, name):
    return "copy/cast" if kind != "kernel" else kernel_classes.classify(name)


def short(name, width=60):
    for scope in ("(anonymous namespace)::", "<unnamed>::", "ustrain::"):
        name = name.replace(scope, "")
    name = re.sub(r"\(.*", "", name)  # no argument lists
    name = re.sub(r"^void ", "", name)
    return name if len(name) <= width else name[: width - 3] + "..."


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace")
    p.add_argument("--marker", default=r"embedding_forward_kernel", help="regex of the kernel that starts a micro-batch")
    p.add_argument("--per-step", type=int, default=1, help="marker launches per step (gradient accumulation)")
    p.add_argument("--skip", type=int, default=1, help="leading steps left out (warm-up)")
    p.add_argument("--gaps", type=int, default=12, help="largest gap kinds listed")
    p.add_argument("--top", type=int, default=20, help="largest kernels listed")
    a = p.parse_args()
    rows = read_trace(a.trace)
    marks = [i for i, r in enumerate(rows) if r[0] == "kernel" and re.search(a.marker, r[3])]
    starts = marks[:: a.per_step]
    if len(starts) < a.skip + 2:
        sys.exit(f"kernel-timeline: {len(starts)} steps found (marker {a.marker!r}, {a.per_step} per step); "
                 f"need more than {a.skip + 1}")
    windows = list(zip(starts[a.skip:-1], starts[a.skip + 1:]))
    per_class, per_kernel, gaps, wall, busy = {}, {}, {}, 0.0, 0.0
    for begin, end in windows:
        t0, t1 = rows[begin][1], rows[end][1]
        wall += (t1 - t0) / 1e6
        reach, prev = t0, None  # the latest end so far: the GPU is idle from it to the next start
        for kind, s, e, name in rows[begin:end]:
            c = class_of(kind, name)
            per_class[c] = per_class.get(c, 0.0) + (e - s) / 1e6
            k, ms = per_kernel.get(name, (0, 0.0))
            per_kernel[name] = (k + 1, ms + (e - s) / 1e6)
            if s > reach and prev is not None:
                key = (short(prev), short(name))
                n, ms = gaps.get(key, (0, 0.0))
                gaps[key] = (n + 1, ms + (s - reach) / 1e6)
            busy += (min(e, t1) - max(s, reach)) / 1e6 if e > reach else 0.0
            reach = max(reach, e)
            prev = name
        if t1 > reach:  # the host's time between this step's last kernel and the next step's first
            key = (short(prev), "(the next step)")
            n, ms = gaps.get(key, (0, 0.0))
            gaps[key] = (n + 1, ms + (t1 - reach) / 1e6)
    n = len(windows)
    print(f"{n} steps (after {a.skip} left out), per step:")
    print(f"{'class':<14} {'ms/step':>9} {'share':>7}")
    for c, _ in kernel_classes.CLASSES:
        if c in per_class:
            print(f"{c:<14} {per_class[c] / n:9.2f} {per_class[c] / wall:7.1%}")
    print(f"{'busy':<14} {busy / n:9.2f} {busy / wall:7.1%}")
    print(f"{'idle':<14} {(wall - busy) / n:9.2f} {(wall - busy) / wall:7.1%}")
    print(f"{'step':<14} {wall / n:9.2f}")
    print(f"\nlargest kernels (ms/step, launches/step, class):")
    for name, (count, ms) in sorted(per_kernel.items(), key=lambda kv: -kv[1][1])[: a.top]:
        print(f"  {ms / n:8.2f} {count / n:6.0f}  {class_of('kernel', name):<13} {short(name, 90)}")
    print(f"\nlargest idle gaps (ms/step, gaps/step: after -> before):")
    for (before, after), (count, ms) in sorted(gaps.items(), key=lambda kv: -kv[1][1])[: a.gaps]:
        print(f"  {ms / n:8.3f} {count / n:6.1f}  {before} -> {after}")


if __name__ == "__main__":
    main()

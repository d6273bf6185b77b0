#!/usr/bin/env python3
"""Where a training step's GPU time goes, by op class, from a list of kernels.

Reads one CSV of GPU kernels with their calls and total time:
  - Nsight Systems' summary (`nsys stats --report cuda_gpu_kern_sum --format csv`), or
  - scripts/bench-torch.py --profile's (name, calls, total_ns),
and prints milliseconds per step for each op class (GEMM, attention, norms, cross-entropy,
optimizer, copies and casts, other elementwise), the largest kernels, and, given the measured
step time, the time the GPU sat idle between kernels (launch gaps and host waits).

    scripts/kernel-classes.py KERNELS.csv [--steps N] [--step-ms MS] [--top 12]

--steps divides the totals (the CSV covers N steps); the classes are read from kernel names,
so the same rules sort ustrain's kernels (ours, cuBLASLt's, cuDNN's) and PyTorch's (aten,
Triton from torch.compile, cuBLAS, flash attention).
"""
import argparse
import csv
import re
import sys

# First match wins: attention before GEMM (fused attention kernels mention gemm/cutlass).
CLASSES = [
    ("attention", r"flash|fmha|sdpa|attention|attn|cudnn_generated|block_(forward|dq|dkv|delta)|merge_kernel"),
    ("gemm", r"gemm|gemv|xmma|nvjet|cutlass|cublas|matmul|sm90_"),
    ("optimizer", r"adam|multi_tensor|foreach|clip|partial_sums|final_sum|l2norm"),
    ("norm", r"rmsnorm|rsqrt|layer_norm|rms_norm"),
    ("cross-entropy", r"cross_entropy|log_softmax|nll_loss|softmax"),
    ("embedding", r"embedding|index_select|indexing_backward|scatter|gather"),
    ("copy/cast", r"memcpy|memset|copy|cast|convert|fill|transpose"),
    ("elementwise", r"."),
]


def read_kernels(path):
    """[(name, calls, total_ns)] from either CSV flavour."""
    with open(path, newline="") as f:
        text = [line for line in f if line.strip() and not line.startswith(("Processing", "NOTICE", "WARNING"))]
    rows = list(csv.DictReader(text))
    out = []
    for r in rows:
        if "total_ns" in r:
            out.append((r["name"], int(r["calls"]), float(r["total_ns"])))
        elif "Total Time (ns)" in r:
            out.append((r["Name"], int(r["Instances"]), float(r["Total Time (ns)"])))
    if not out:
        sys.exit(f"kernel-classes: {path}: no kernels (expected columns name,calls,total_ns or nsys's "
                 "cuda_gpu_kern_sum CSV)")
    return out


def classify(name):
    low = name.lower()
    for cls, pattern in CLASSES:
        if re.search(pattern, low):
            return cls
    return "elementwise"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv")
    p.add_argument("--steps", type=float, default=1.0, help="steps the CSV covers (default 1)")
    p.add_argument("--step-ms", type=float, help="measured step time: prints the idle time too")
    p.add_argument("--top", type=int, default=12, help="largest kernels listed")
    a = p.parse_args()
    kernels = read_kernels(a.csv)
    per_class, calls = {}, {}
    for name, n, ns in kernels:
        c = classify(name)
        per_class[c] = per_class.get(c, 0.0) + ns / 1e6 / a.steps
        calls[c] = calls.get(c, 0) + n / a.steps
    busy = sum(per_class.values())
    print(f"{'class':<14} {'ms/step':>9} {'share':>7} {'launches':>9}")
    for c, _ in CLASSES:
        if c in per_class:
            print(f"{c:<14} {per_class[c]:9.2f} {per_class[c] / busy:7.1%} {calls[c]:9.0f}")
    print(f"{'kernels':<14} {busy:9.2f} {'':>7} {sum(calls.values()):9.0f}")
    if a.step_ms:
        idle = a.step_ms - busy
        print(f"{'step':<14} {a.step_ms:9.2f}\n{'idle (gaps)':<14} {idle:9.2f} {idle / a.step_ms:7.1%}")
    print(f"\nlargest kernels (ms/step, launches/step, class):")
    for name, n, ns in sorted(kernels, key=lambda k: -k[2])[: a.top]:
        short = name if len(name) <= 90 else name[:87] + "..."
        print(f"  {ns / 1e6 / a.steps:8.2f} {n / a.steps:6.0f}  {classify(name):<13} {short}")


if __name__ == "__main__":
    main()

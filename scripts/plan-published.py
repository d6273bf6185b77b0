#!/usr/bin/env python3
"""`ustrain plan` against published training throughputs on H100 and H200 GPUs.

Prices the layouts that published runs trained with (the model shape, GPU count, sequence,
batch and parallel layout each source gives), with the device's documented default curves
(no calibration), and prints the published and the predicted figure side by side with the
relative error. Nothing is fitted to these figures: they are the held-out check of the step
time model. Each source's conditions that the planner does not model are in its row's note.

Usage: scripts/plan-published.py [--ustrain build/app/ustrain] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SHAPES = os.path.join(ROOT, "tests", "plan")


def case(name, recipe, gpus, layout, published, unit, source, note, gpu="h100", options=(), sets=()):
    return dict(name=name, recipe=recipe, gpus=gpus, layout=layout, published=published, unit=unit,
                source=source, note=note, gpu=gpu, options=list(options), sets=list(sets))


SEQ_8K = ("train.seq_len=8192", "model.max_seq_len=8192")
FSDP = dict(dp_zero=3, micro_batch=2, recompute="selective", tp=1, pp=1, cp=1)
CASES = [
    # ustrain's own runs (kernels/cuda/GPU-RESULTS.md): micro-batch 8 x 2048, 2 accumulated, no recompute.
    case("1.1B (bench-1b), 1 H100", os.path.join(ROOT, "recipes", "bench-1b.toml"), 1,
         dict(dp_zero=0, micro_batch=8, recompute="none", tp=1, pp=1, cp=1), 77403, "tokens/s per GPU",
         "ustrain, kernels/cuda/GPU-RESULTS.md (H100 SXM)", "measured by this project"),
    case("1.1B (bench-1b), 1 H200", os.path.join(ROOT, "recipes", "bench-1b.toml"), 1,
         dict(dp_zero=0, micro_batch=8, recompute="none", tp=1, pp=1, cp=1), 81795, "tokens/s per GPU",
         "ustrain, kernels/cuda/GPU-RESULTS.md (H200)", "measured by this project", gpu="h200"),
    # torchtitan's Llama 3.1 8B benchmark (benchmarks/llama3_h100_202412_torchtitan.md, Tables 1 and 3):
    # FSDP (ZeRO-3), local batch 2 x 8192, selective recompute, bf16, eager (no torch.compile).
    case("Llama 3.1 8B, 8 H100, FSDP", os.path.join(SHAPES, "llama-8b.toml"), 8, FSDP, 5762,
         "tokens/s per GPU", "torchtitan, llama3_h100_202412 Table 1",
         "96 GB HBM2e H100s at a 500 W power limit (the planner prices a 700 W SXM H100)",
         options=("--memory-gib", "95", "--global-batch-tokens", str(8 * 2 * 8192)), sets=SEQ_8K),
    case("Llama 3.1 8B, 128 H100, FSDP", os.path.join(SHAPES, "llama-8b.toml"), 128, FSDP, 5605,
         "tokens/s per GPU", "torchtitan, llama3_h100_202412 Table 3",
         "as above; 16 nodes, 400 Gb/s per GPU between them",
         options=("--memory-gib", "95", "--global-batch-tokens", str(128 * 2 * 8192)), sets=SEQ_8K),
]
# The Ultra-Scale Playbook's best measured layout for its 1.34B model on one node (8 H100, sequences
# of 4096, 1M-token batches): 44% MFU in its count, 41% in ours (causal attention).
PLAYBOOK = case("Playbook 1.34B, 8 H100, best layout", os.path.join(SHAPES, "llama-1.34b.toml"), 8, None,
                0.41, "MFU (causal count)", "Ultra-Scale Playbook, benchmark heatmap",
                "nanotron's measured best of its search; the planner's best of its own search")


def plan(ustrain, c):
    cmd = [ustrain, "plan", c["recipe"], "--gpus", str(c["gpus"]), "--gpu", c["gpu"], "--json", *c["options"]]
    for s in c["sets"]:
        cmd += ["--set", s]
    lay = c["layout"]
    if lay:
        for key in ("tp", "pp", "cp"):
            cmd += ["--set", f"parallel.{key}={lay[key]}"]
        cmd += ["--set", f"parallel.zero={lay['dp_zero']}", "--set", "parallel.dp_shard=0"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if out.returncode != 0:
        sys.exit(f"plan-published: {' '.join(cmd)} failed:\n{out.stderr}")
    layouts = [l for l in json.loads(out.stdout)["layouts"] if l["fits"]]
    if lay:
        layouts = [l for l in layouts if l["micro_batch"] == lay["micro_batch"] and l["recompute"] == lay["recompute"]]
    if not layouts:
        sys.exit(f"plan-published: {c['name']}: the published layout does not fit in the plan")
    return layouts[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ustrain", default=os.path.join(ROOT, "build", "app", "ustrain"))
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    rows = []
    for c in CASES + [PLAYBOOK]:
        best = plan(args.ustrain, c)
        predicted = best["mfu"] if c["unit"].startswith("MFU") else best["tokens_per_s"] / c["gpus"]
        rows.append(dict(case=c["name"], unit=c["unit"], published=c["published"], predicted=predicted,
                         error=predicted / c["published"] - 1, mfu=best["mfu"], dp_s=best["dp_s"],
                         step_s=best["step_s"], source=c["source"], note=c["note"]))
    print("| case | published | predicted | error | predicted MFU (ours) | source; conditions not modelled |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        fmt = (lambda v: f"{100 * v:.1f}%") if r["unit"].startswith("MFU") else (lambda v: f"{v:,.0f}")
        print(f"| {r['case']} | {fmt(r['published'])} {r['unit']} | {fmt(r['predicted'])} | {100 * r['error']:+.0f}% "
              f"| {100 * r['mfu']:.1f}% | {r['source']}; {r['note']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

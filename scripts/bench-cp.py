#!/usr/bin/env python3
"""Context-parallel benchmark on this machine's CPUs: the quickstart model at long sequences.

For cp = 1, 2 and 4 (one process per context-parallel rank, 1 thread each), prints:
  - one rank's planned activations (`--dry-run`) and their ratio to cp = 1 (expect about 1/cp:
    every activation is per token, except the RoPE tables and the losses' rows);
  - rank 0's measured peak resident memory (`peak_memory_bytes`, the process's VmHWM: code,
    libraries and the dataset too) and the plan's total beside it;
  - the ring's bytes per step counted by rank 0's communicator against the formula: per layer
    and micro-batch, (cp - 1) key/value blocks forward, (cp - 1) blocks and cp fp32 dk/dv sums
    backward, a block being micro_batch * seq_len / cp tokens of 2 Hkv Dh values;
  - the time waited for key/value blocks (`cp_wait_s`: what the attention did not hide) and
    for the gradient sums (`cp_sum_wait_s`, never hidden); the sums are as large as the blocks
    in fp32, so their wait per transfer estimates a block's transfer time, and the hidden share
    of the blocks' transfers is 1 - block wait / (block transfers x that time);
  - the median step time.
With more ranks than cores (cp = 4 on 2 cores) the ranks take turns on the cores: step times
and waits then measure the scheduler as much as the ring.

Usage: scripts/bench-cp.py [--ustrain build/app/ustrain] [--seq-len 4096] [--steps 4]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

from bench_support import ROOT, convert_fortunes, plan_bytes, run

MIB = 1024.0 ** 2


def model_of(recipe_text):
    return {key: int(re.search(rf"^{key}\s*=\s*(\d+)", recipe_text, re.M).group(1))
            for key in ("d_model", "n_layers", "n_heads", "n_kv_heads")}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ustrain", default=os.path.join(ROOT, "build", "app", "ustrain"))
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--micro-batch", type=int, default=1)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    ustrain = os.path.abspath(args.ustrain)
    recipe = os.path.abspath(os.path.join(ROOT, "recipes", "quickstart.toml"))
    m = model_of(open(recipe).read())
    work = tempfile.mkdtemp(prefix="bench-cp-")
    os.chdir(work)
    convert_fortunes(ustrain, "data")
    S, B, micro = args.seq_len, args.micro_batch, 2
    dh = m["d_model"] // m["n_heads"]
    print(f"quickstart model: {m['n_layers']} layers, d_model {m['d_model']}, {m['n_heads']} heads "
          f"({m['n_kv_heads']} kv); {micro} micro-batches of {B} x {S} tokens per step; fp32; "
          f"{os.cpu_count()} cores; median of steps 2-{args.steps}; runs in {work}")
    print(f"{'cp':>3} {'activ. MiB':>10} {'ratio':>6} {'plan MiB':>9} {'peak RSS MiB':>12} {'ring MiB':>9} "
          f"{'formula':>8} {'block wait s':>12} {'sum wait s':>10} {'hidden':>7} {'step s':>7}")
    base = None
    for cp in (1, 2, 4):
        name = f"cp{cp}"
        common = ["--set", "data.path=data", "--set", f"parallel.cp={cp}", "--set", "device.threads=1",
                  "--set", f"train.seq_len={S}", "--set", f"model.max_seq_len={S}",
                  "--set", f"train.micro_batch={B}", "--set", f"train.global_batch={micro * B}",
                  "--set", f"train.steps={args.steps}", "--set", "train.eval_interval=0",
                  "--set", "checkpoint.interval=0", "--set", "log.tensorboard=false",
                  "--set", "run.output_dir=runs", "--set", f"run.name={name}"]
        dry = subprocess.run([ustrain, "train", recipe, "--dry-run"] + common, check=True, capture_output=True,
                             text=True).stdout
        run([ustrain, "train", recipe, "--overwrite"] + common, cp, f"{name}.log")
        rows = [json.loads(line) for line in open(f"runs/{name}/metrics.jsonl")]
        train = [r for r in rows if r["kind"] == "train" and r["step"] >= 2]
        step_s = statistics.median(r["step_s"] for r in train)
        block_wait = statistics.median(r.get("cp_wait_s", 0.0) for r in train)
        sum_wait = statistics.median(r.get("cp_sum_wait_s", 0.0) for r in train)
        traffic = train[-1].get("cp_comm_bytes", 0.0)
        peak = max(r["peak_memory_bytes"] for r in train)
        block = B * (S // cp) * 2 * m["n_kv_heads"] * dh * 4
        formula = micro * m["n_layers"] * (2 * (cp - 1) + cp) * block if cp > 1 else 0
        transfers = micro * m["n_layers"] * 2 * (cp - 1)  # key/value blocks, forward and backward
        sums = micro * m["n_layers"] * cp
        hidden = "-"
        if cp > 1 and sum_wait > 0:
            hidden = f"{100 * max(0.0, 1 - block_wait / (transfers * sum_wait / sums)):.0f}%"
        activations = plan_bytes(dry, "activations")
        base = base or activations
        print(f"{cp:>3} {activations / MIB:>10.1f} {activations / base:>6.3f} {plan_bytes(dry, 'total') / MIB:>9.1f} "
              f"{peak / MIB:>12.1f} {traffic / MIB:>9.1f} {formula / MIB:>8.1f} {block_wait:>12.4f} "
              f"{sum_wait:>10.4f} {hidden:>7} {step_s:>7.2f}", flush=True)


if __name__ == "__main__":
    main()

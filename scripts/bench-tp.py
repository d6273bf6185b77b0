#!/usr/bin/env python3
"""Tensor- and sequence-parallel benchmark on this machine's CPUs, on the quickstart model.

For tp = 1, 2 and 4, with sequence parallelism off and on, prints:
  - the bytes the tensor-parallel group moves per step, counted by rank 0's communicator in
    the Ultra-Scale Playbook's convention (an all-reduce counts its buffer twice), against the
    Playbook's per-layer formula (TP: 4 all-reduces of b*s*h per layer; SP: 4 all-gather +
    reduce-scatter pairs of the same size) plus the terms outside the layers that this
    implementation adds (embedding, final norm and head, the loss statistics, the norm gains'
    partial gradients, and under SP the re-gathered norm outputs in backward);
  - one rank's activation memory from the memory plan (`--dry-run`) against a formula in the
    Playbook's form, per layer s*b*[(parts tp does not split)/(tp if sp else 1) + (split
    parts)/tp] in fp32, plus the model's ends;
  - the median step time, the share of it spent in tensor-parallel communication, and the
    speed-up over tp = 1 on the same cores (tp ranks with 2/tp threads each).

Usage: scripts/bench-tp.py [--ustrain build/app/ustrain] [--steps 8]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

from bench_support import ROOT, convert_fortunes, plan_bytes, run



def model_of(recipe_text):
    m = {}
    for key in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_hidden", "micro_batch",
                "global_batch", "seq_len"):
        m[key] = int(re.search(rf"^{key}\s*=\s*(\d+)", recipe_text, re.M).group(1))
    return m


def traffic_formula(m, tp, sp):
    """(Playbook's per-layer term, this implementation's total) in bytes per step."""
    if tp == 1:
        return 0, 0
    n = m["micro_batch"] * m["seq_len"]
    x = 4 * n * m["d_model"]  # one fp32 (b, s, h) activation
    micro = m["global_batch"] // m["micro_batch"]
    layers = m["n_layers"]
    stats = 4 * 2 * n * tp  # the gathered (lse, target logit) of every rank
    if not sp:
        playbook = layers * 4 * 2 * x  # 4 all-reduces per layer, each counted twice
        ends = 2 * 2 * x  # embedding forward, head input gradient: one all-reduce each
        return micro * playbook, micro * (playbook + ends + stats)
    playbook = layers * 4 * 2 * x  # 4 all-gather + reduce-scatter pairs per layer
    regather = layers * 2 * x  # backward all-gathers the norm outputs again
    ends = 4 * x  # embedding and final norm: a reduce-scatter and an all-gather each
    gains = 2 * 4 * m["d_model"] * (2 * layers + 1)  # norm gains' partial gradients, once per step
    return micro * playbook, micro * (playbook + regather + ends + stats) + gains


def activation_formula(m, tp, sp):
    """One rank's planned activations in bytes (fp32, no recompute), per the layout."""
    n, s = m["micro_batch"] * m["seq_len"], m["seq_len"]
    d, heads, kv, ffn = m["d_model"], m["n_heads"] // tp, m["n_kv_heads"] // tp, m["ffn_hidden"] // tp
    dh = m["d_model"] // m["n_heads"]
    t_sp = tp if sp else 1
    vocab_local = -(-m["vocab_size"] // tp)
    # Per layer: ln1/ln2 outputs, x_mid, two rstd rows and the residual on 1/t_sp of the rows;
    # q/k/v, attention output, its lse, gate/up and the SwiGLU output split by tp.
    unsplit = n * (4 * d + 2) / t_sp
    split = n * ((heads + 2 * kv) * dh + heads * dh + heads + 3 * ffn)
    per_layer = 4 * (unsplit + split)
    ends = 4 * (n * d / t_sp  # the embedding's residual
                + 2 * n + s * dh  # ids, targets, RoPE tables
                + n / t_sp + n * d + n * vocab_local + 2 * n  # final norm, logits, losses and lse
                + (2 * n * tp if tp > 1 else 0))  # the loss statistics of every rank
    return m["n_layers"] * per_layer + ends


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ustrain", default=os.path.join(ROOT, "build", "app", "ustrain"))
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    ustrain = os.path.abspath(args.ustrain)
    recipe = os.path.abspath(os.path.join(ROOT, "recipes", "quickstart.toml"))
    m = model_of(open(recipe).read())
    work = tempfile.mkdtemp(prefix="bench-tp-")
    os.chdir(work)
    convert_fortunes(ustrain, "data")
    cores = os.cpu_count() or 1
    print(f"quickstart model: {m['n_layers']} layers, d_model {m['d_model']}, {m['n_heads']} heads "
          f"({m['n_kv_heads']} kv), ffn {m['ffn_hidden']}, vocabulary {m['vocab_size']}; micro-batch "
          f"{m['micro_batch']} x {m['seq_len']}, {m['global_batch'] // m['micro_batch']} per step; fp32; "
          f"{cores} cores; median of steps 2-{args.steps}; runs in {work}")
    print(f"{'layout':<14} {'tp MiB/step':>11} {'Playbook':>9} {'formula':>9} {'activ. MiB':>10} {'formula':>9} "
          f"{'step s':>7} {'comm %':>7} {'speed-up':>8}")
    base = None
    for tp, sp in ((1, False), (2, False), (2, True), (4, False), (4, True)):
        name = f"tp{tp}" + ("" if tp == 1 else "-sp" if sp else "-nosp")
        threads = max(1, cores // tp)
        common = ["--set", "data.path=data", "--set", f"parallel.tp={tp}", "--set", f"parallel.sp={str(sp).lower()}",
                  "--set", f"device.threads={threads}", "--set", f"train.steps={args.steps}",
                  "--set", "train.eval_interval=0", "--set", "checkpoint.interval=0", "--set", "log.tensorboard=false",
                  "--set", "run.output_dir=runs", "--set", f"run.name={name}"]
        dry = subprocess.run([ustrain, "train", recipe, "--dry-run"] + common, check=True, capture_output=True,
                             text=True).stdout
        run([ustrain, "train", recipe, "--overwrite"] + common, tp, f"{name}.log")
        rows = [json.loads(line) for line in open(f"runs/{name}/metrics.jsonl")]
        train = [r for r in rows if r["kind"] == "train" and r["step"] >= 2]
        step_s = statistics.median(r["step_s"] for r in train)
        comm_s = statistics.median(r.get("tp_comm_s", 0.0) for r in train)
        traffic = train[0].get("tp_comm_bytes", 0.0)
        playbook, formula = traffic_formula(m, tp, sp)
        base = base or step_s
        mib = 1024.0 ** 2
        print(f"{name:<14} {traffic / mib:>11.2f} {playbook / mib:>9.2f} {formula / mib:>9.2f} "
              f"{plan_bytes(dry, 'activations') / mib:>10.2f} {activation_formula(m, tp, sp) / mib:>9.2f} "
              f"{step_s:>7.3f} {100 * comm_s / step_s:>6.1f}% {base / step_s:>7.2f}x", flush=True)


if __name__ == "__main__":
    main()

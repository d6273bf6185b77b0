#!/usr/bin/env python3
"""Pipeline-parallel benchmark on this machine's CPUs: every schedule against one rank.

Trains a recipe (by default a small model made here: 8 layers, d_model 256, sequences of
128 tokens, one sequence per micro-batch) at parallel.pp = P under mpiexec with each schedule
(afab, 1f1b, interleaved with 2 virtual stages, zero-bubble) and M micro-batches per step, and
once on one rank with the same global batch. For each it prints:
  - the bubble the simulator predicts with equal costs per action (from --dry-run: idle time
    over compute time, summed over the ranks);
  - the median step time over the steps after the first (warm-up), and one rank's step time
    divided by it (above 1: the pipeline is faster); one rank runs with device.threads = cores
    and = 1, and the faster is the reference (on a loaded machine a rank's threads can wait
    for each other's cores);
  - the share of the step pipeline rank 0 waited for activations and gradients (pp_wait_s in
    metrics.jsonl). Only the leading rank writes metrics and logs, so the other ranks' waits
    are not reported by the trainer;
  - rank 0's activation slots per chunk, planned (the simulator's peak) and measured (the
    first step's log line), and every rank's planned peak of in-flight micro-batches.
Each of the P ranks gets device.threads = max(1, cores // P); with more ranks than cores
they time-share the cores, so the measured waits then also count waiting for a core.

Usage: scripts/bench-pipeline.py [--ustrain build/app/ustrain] [--recipe FILE] [--pp 4]
                                 [--micro-batches 8] [--steps 8] [--json FILE]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SCHEDULES = (("afab", 1), ("1f1b", 1), ("interleaved", 2), ("zero-bubble", 1))

DEFAULT_RECIPE = """\
[run]
name = "bench"
[model]
vocab_size = 257
d_model = 256
n_layers = 8
n_heads = 8
n_kv_heads = 4
ffn_hidden = 688
max_seq_len = 128
[data]
path = "data"
[train]
micro_batch = 1
seq_len = 128
eval_interval = 0
[checkpoint]
interval = 0
[log]
interval = 1000
tensorboard = false
"""


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
        return m.group(1).strip() if m else "unknown CPU"
    except OSError:
        return "unknown CPU"


def make_default_recipe(ustrain, work):
    """A synthetic corpus converted with the byte tokenizer, and the recipe that reads it."""
    words = ("the quick brown fox jumps over the lazy dog while rain falls on the plains and birds "
             "sing songs of hope under a bright morning sky").split()
    with open(os.path.join(work, "corpus.txt"), "w") as f:
        for i in range(3000):
            doc = " ".join(words[(i * 7 + j * 3 + i * j) % len(words)] for j in range(24))
            f.write(f"document {i}: {doc}\n\n")
    subprocess.run([ustrain, "data", "convert", "--input", os.path.join(work, "corpus.txt"), "--output",
                    os.path.join(work, "data"), "--val-fraction", "0.05"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = os.path.join(work, "bench.toml")
    with open(path, "w") as f:
        f.write(DEFAULT_RECIPE.replace('path = "data"', f'path = "{os.path.join(work, "data")}"'))
    return path


def train(ustrain, recipe, settings, ranks, log, dry_run=False):
    """Runs `ustrain train` (under mpiexec for several ranks); returns its output."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1")
    command = [ustrain, "train", recipe] + [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]
    command += ["--dry-run"] if dry_run else ["--overwrite"]
    if ranks > 1 and not dry_run:
        command = ["mpiexec", "-n", str(ranks), "--oversubscribe"] + command
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    with open(log, "w") as f:
        f.write(result.stdout)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(command)}\n{result.stdout[-3000:]}")
    return result.stdout


def parse_dry_run(text, pp):
    """The simulated bubble, each rank's planned slots per chunk and peak in-flight micro-batch activations."""
    bubble = float(re.search(r"^pipeline parallelism: .* bubble ([0-9.]+) of the compute time", text, re.M).group(1))
    slots, peaks = [], []
    for r in range(pp):
        line = re.search(rf"^pipeline rank {r}: (.*)$", text, re.M).group(1)
        slots.append([int(n) for n in re.findall(r"(\d+) activation slot\(s\)", line)])
        peaks.append(int(re.search(r"peak in-flight micro-batch activations (\d+)", line).group(1)))
    return bubble, slots, peaks


def train_steps(run_dir):
    """The training lines of a run's metrics after the first (warm-up) step."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    steps = [r for r in rows if r.get("kind") == "train"]
    return steps[1:] if len(steps) > 1 else steps


def measured_slots(log):
    m = re.search(r"activation slots per chunk at most ([0-9, ]+) \(planned ([0-9, ]+)\)", log)
    return [int(n) for n in m.group(1).split(",")] if m else None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ustrain", default=os.path.join(ROOT, "build", "app", "ustrain"), help="the binary")
    parser.add_argument("--recipe", help="recipe to train (default: a small model and corpus made here); its "
                        "n_layers must divide into pp x 2 stages for the interleaved schedule")
    parser.add_argument("--pp", type=int, default=4, help="pipeline ranks (default 4)")
    parser.add_argument("--micro-batches", type=int, default=8, help="micro-batches per step (default 8); the "
                        "global batch is this times the recipe's train.micro_batch")
    parser.add_argument("--steps", type=int, default=8, help="steps per run, the first not measured (default 8)")
    parser.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    args = parser.parse_args()
    if args.pp < 2 or args.micro_batches < 1 or args.steps < 2:
        parser.error("needs --pp >= 2, --micro-batches >= 1 and --steps >= 2")
    ustrain = os.path.abspath(args.ustrain)
    work = tempfile.mkdtemp(prefix="bench-pipeline-")
    recipe = os.path.abspath(args.recipe) if args.recipe else make_default_recipe(ustrain, work)
    with open(recipe, "rb") as f:
        spec = tomllib.load(f)
    model, micro_batch = spec.get("model", {}), spec.get("train", {}).get("micro_batch", 1)
    cores = os.cpu_count() or 1
    threads = max(1, cores // args.pp)
    print(f"recipe: {recipe if args.recipe else 'built in'}; {model.get('n_layers')} layers, d_model "
          f"{model.get('d_model')}; {args.micro_batches} micro-batches of {micro_batch} per step; "
          f"{args.steps} steps per run, median of steps 2-{args.steps}; runs in {work}")
    print(f"machine: {cores} cores ({cpu_model()}); {args.pp} ranks x device.threads = {threads}"
          + (f"; the {args.pp} ranks outnumber the {cores} cores, so they time-share them and the measured "
             "waits include waiting for a core" if args.pp > cores else ""))
    common = {"train.steps": args.steps, "train.global_batch": args.micro_batches * micro_batch,
              "parallel.dp": 1, "parallel.tp": 1, "run.output_dir": os.path.join(work, "runs"),
              "checkpoint.interval": 0, "train.eval_interval": 0, "log.tensorboard": "false"}

    # One rank on every core, and on one thread: on a loaded machine a rank's OpenMP threads
    # can wait for each other's cores, and the faster of the two is the fair reference.
    one_rank = {}
    for t in sorted({cores, 1}):
        one = dict(common, **{"parallel.pp": 1, "parallel.pp_schedule": "1f1b", "parallel.virtual_stages": 1,
                              "device.threads": t, "run.name": f"pp1-threads{t}"})
        train(ustrain, recipe, one, 1, os.path.join(work, f"pp1-threads{t}.log"))
        one_rank[t] = statistics.median(r["step_s"] for r in train_steps(os.path.join(work, "runs", f"pp1-threads{t}")))
    base_threads = min(one_rank, key=one_rank.get)
    base = one_rank[base_threads]
    print("one rank: " + ", ".join(f"{s:.3f} s per step with device.threads = {t}" for t, s in one_rank.items())
          + f"; the reference below is the one with {base_threads}")

    rows = []
    for schedule, v in SCHEDULES:
        name = f"pp{args.pp}-{schedule}"
        settings = dict(common, **{"parallel.pp": args.pp, "parallel.pp_schedule": schedule,
                                   "parallel.virtual_stages": v, "device.threads": threads, "run.name": name})
        dry = train(ustrain, recipe, settings, args.pp, os.path.join(work, f"{name}.dry-run.txt"), dry_run=True)
        bubble, planned, peaks = parse_dry_run(dry, args.pp)
        log = train(ustrain, recipe, settings, args.pp, os.path.join(work, f"{name}.log"))
        steps = train_steps(os.path.join(work, "runs", name))
        step_s = statistics.median(r["step_s"] for r in steps)
        wait_share = statistics.median(r["pp_wait_s"] / r["step_s"] for r in steps)
        rows.append({"schedule": schedule, "virtual_stages": v, "simulated_bubble": bubble, "step_s": step_s,
                     "one_rank_step_s": base, "speedup_vs_one_rank": base / step_s,
                     "rank0_wait_share": wait_share, "other_ranks_wait_share": None,
                     "rank0_planned_slots": planned[0], "rank0_measured_slots": measured_slots(log),
                     "planned_peak_in_flight": peaks,
                     "pp_comm_bytes_rank0": steps[0].get("pp_comm_bytes")})

    print()
    print(f"{'schedule':<13} {'V':>2} {'sim bubble':>10} {'step s':>8} {'1-rank s':>8} {'speed-up':>8} "
          f"{'rank-0 wait':>11} {'rank-0 slots plan/meas':>22} {'peak in flight/rank':>19}")
    for r in rows:
        meas = ",".join(map(str, r["rank0_measured_slots"])) if r["rank0_measured_slots"] else "n/a"
        slots = f"{','.join(map(str, r['rank0_planned_slots']))} / {meas}"
        print(f"{r['schedule']:<13} {r['virtual_stages']:>2} {r['simulated_bubble']:>10.3f} {r['step_s']:>8.3f} "
              f"{r['one_rank_step_s']:>8.3f} {r['speedup_vs_one_rank']:>7.2f}x {100 * r['rank0_wait_share']:>10.1f}% "
              f"{slots:>22} {','.join(map(str, r['planned_peak_in_flight'])):>19}")
    print("rank-0 wait: pp_wait_s / step_s of pipeline rank 0 (the leading rank writes the metrics; the other "
          "ranks' waits are not recorded). speed-up: one rank's step time / the pipeline's.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cores": cores, "cpu": cpu_model(), "pp": args.pp, "micro_batches": args.micro_batches,
                       "threads_per_rank": threads, "steps": args.steps,
                       "one_rank_step_s_by_threads": {str(t): v for t, v in one_rank.items()}, "rows": rows}, f,
                      indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()

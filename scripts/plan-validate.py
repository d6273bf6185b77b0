#!/usr/bin/env python3
"""`ustrain plan --gpu cpu` against measured steps on this machine's CPUs.

Trains the quickstart model (recipes/quickstart.toml, on a byte-level dataset converted here
from /usr/share/games/fortunes or, without it, from generated text) in a table of layouts on
1, 2 and 4 MPI ranks (dp, tp, pp, cp and ZeRO mixes), and the MoE quickstart
(recipes/moe-quickstart.toml) at ep 1, 2 and 4, each for a few steps, and compares the
fastest measured step (metrics.jsonl step_s, after the warm-up steps: on a shared machine the
step least disturbed by other work, as the planner's calibration takes the fastest of its
calls) with the step time `ustrain plan`, run right before it, predicts for the same layout.
Each rank runs device.threads = OMP_NUM_THREADS = max(1, cores // ranks) threads (4 ranks on
2 cores take turns on them, as the planner models). The table is measured --passes times, and
each layout keeps its fastest prediction and its fastest step. Prints the table, the median
and worst relative error, the Spearman rank correlation of the predicted and measured
orderings, where the measured best ranks among the predictions, and the machine's load average
before and after.

Usage: scripts/plan-validate.py [--ustrain build/app/ustrain] [--steps 8] [--warmup 2] [--passes 2]
                                [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DENSE = os.path.join(ROOT, "recipes", "quickstart.toml")
MOE = os.path.join(ROOT, "recipes", "moe-quickstart.toml")

# (ranks, {recipe keys}[, recipe]): global batch 16 sequences of 256 tokens throughout.
LAYOUTS = [
    (1, {"train.micro_batch": 8}),
    (1, {"train.micro_batch": 4}),
    (1, {"train.micro_batch": 8, "train.recompute": "full"}),
    (2, {"parallel.dp": 2, "parallel.zero": 0, "train.micro_batch": 8}),
    (2, {"parallel.dp": 2, "parallel.zero": 1, "train.micro_batch": 4}),
    (2, {"parallel.dp": 2, "parallel.zero": 3, "train.micro_batch": 8}),
    (2, {"parallel.tp": 2, "train.micro_batch": 8}),
    (2, {"parallel.pp": 2, "parallel.pp_schedule": "1f1b", "train.micro_batch": 4}),
    (2, {"parallel.pp": 2, "parallel.pp_schedule": "afab", "train.micro_batch": 2}),
    (4, {"parallel.dp": 4, "parallel.zero": 1, "train.micro_batch": 4}),
    (4, {"parallel.dp": 2, "parallel.tp": 2, "train.micro_batch": 8}),
    (4, {"parallel.dp": 2, "parallel.pp": 2, "train.micro_batch": 4}),
    (4, {"parallel.tp": 2, "parallel.pp": 2, "train.micro_batch": 4}),
    (4, {"parallel.tp": 4, "train.micro_batch": 8}),
    (2, {"parallel.cp": 2, "train.micro_batch": 8}),
    (4, {"parallel.dp": 2, "parallel.cp": 2, "train.micro_batch": 8}),
    (4, {"parallel.cp": 2, "parallel.tp": 2, "train.micro_batch": 8}),
    (2, {"parallel.dp": 2, "parallel.ep": 1, "train.micro_batch": 8}, MOE),
    (2, {"parallel.dp": 2, "parallel.ep": 2, "train.micro_batch": 8}, MOE),
    (4, {"parallel.dp": 4, "parallel.ep": 2, "train.micro_batch": 4}, MOE),
    (4, {"parallel.dp": 4, "parallel.ep": 4, "train.micro_batch": 4}, MOE),
]
DEFAULTS = {"parallel.dp": 1, "parallel.tp": 1, "parallel.pp": 1, "parallel.cp": 1, "parallel.ep": 1, "parallel.zero": 0,
            "parallel.sp": True,
            "parallel.pp_schedule": "1f1b", "parallel.virtual_stages": 1, "train.recompute": "none"}
JSON_KEYS = {"parallel.dp": "dp", "parallel.tp": "tp", "parallel.pp": "pp", "parallel.cp": "cp", "parallel.ep": "ep",
             "parallel.zero": "zero",
             "parallel.sp": "sp", "parallel.pp_schedule": "pp_schedule", "parallel.virtual_stages": "virtual_stages",
             "train.recompute": "recompute", "train.micro_batch": "micro_batch"}


def mpi_env(threads):
    return dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_rmaps_base_oversubscribe="1")


def setting(value):
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def make_dataset(ustrain, work):
    source = "/usr/share/games/fortunes"
    if not os.path.isdir(source):
        source = os.path.join(work, "corpus")
        os.makedirs(source)
        with open(os.path.join(source, "a.txt"), "w") as f:
            for i in range(20000):
                f.write(f"document {i} says the quick brown fox jumps over {i * 7 % 13} lazy dogs\n\n")
    data = os.path.join(work, "data")
    subprocess.run([ustrain, "data", "convert", "--input", source, "--output", data], check=True,
                   stdout=subprocess.DEVNULL)
    return data


def predictions(ustrain, recipe, ranks, threads):
    out = subprocess.run([ustrain, "plan", recipe, "--gpus", str(ranks), "--gpu", "cpu", "--json",
                          "--set", f"device.threads={threads}"],
                         check=True, capture_output=True, text=True, env=mpi_env(threads)).stdout
    return json.loads(out)["layouts"]


def matches(entry, keys, ranks):
    want = dict(DEFAULTS, **keys)
    want["parallel.dp"] = keys.get("parallel.dp",
                                   ranks // (want["parallel.tp"] * want["parallel.pp"] * want["parallel.cp"]))
    for key, name in JSON_KEYS.items():
        value = want[key]
        if key == "parallel.sp" and want["parallel.tp"] == 1:
            continue
        if key == "parallel.pp_schedule" and want["parallel.pp"] == 1:
            continue
        if entry[name] != value:
            return False
    return True


def measure(ustrain, recipe, data, work, ranks, threads, keys, steps, warmup, name):
    sets = {"data.path": data, "run.output_dir": os.path.join(work, "runs"), "run.name": name,
            "train.steps": steps, "train.eval_interval": 0, "checkpoint.interval": 0, "log.interval": 1,
            "log.tensorboard": False, "device.threads": threads, "train.global_batch": 16}
    sets.update(keys)
    command = [ustrain, "train", recipe, "--overwrite"]
    for k, v in sets.items():
        command += ["--set", f"{k}={setting(v)}"]
    if ranks > 1:
        command = ["mpiexec", "-n", str(ranks), "--oversubscribe", "--bind-to", "none"] + command
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=mpi_env(threads))
    times = []
    with open(os.path.join(work, "runs", name, "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            if record.get("kind") == "train" and record["step"] > warmup:
                times.append(record["step_s"])
    return min(times)


def name_of(keys, model):
    label = " ".join(f"{k.split('.')[1]}={setting(v)}" for k, v in keys.items())
    return ("moe " if model else "") + label


def spearman(a, b):
    def ranks(values):
        order = sorted(range(len(values)), key=lambda i: values[i])
        r = [0] * len(values)
        for position, i in enumerate(order):
            r[i] = position
        return r
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ustrain", default=os.path.join(ROOT, "build", "app", "ustrain"))
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--passes", type=int, default=2,
                        help="measure the table this many times; each layout keeps its fastest prediction and step")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    cores = os.cpu_count()
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        data = make_dataset(args.ustrain, work)
        best = {}  # layout index -> (fastest prediction, fastest measured step) over the passes
        for p in range(args.passes):
            for i, (ranks, keys, *model) in enumerate(LAYOUTS):
                recipe = model[0] if model else DENSE
                threads = max(1, cores // ranks)
                # Planned right before the layout is measured: the planner measures the machine
                # anew each time, so calibration and measurement meet the same load.
                found = [e for e in predictions(args.ustrain, recipe, ranks, threads) if matches(e, keys, ranks)]
                if not found:
                    sys.exit(f"ustrain plan did not propose layout {keys} on {ranks} ranks")
                measured = measure(args.ustrain, recipe, data, work, ranks, threads, keys, args.steps, args.warmup,
                                   f"v{i}")
                old = best.get(i, (float("inf"), float("inf")))
                best[i] = (min(old[0], found[0]["step_s"]), min(old[1], measured))
                label = name_of(keys, model)
                print(f"pass {p + 1}: {ranks} ranks x {threads} thread(s)  {label:<48} predicted "
                      f"{found[0]['step_s']:7.3f} s  measured {measured:7.3f} s", flush=True)
        print()
        for i, (ranks, keys, *model) in enumerate(LAYOUTS):
            threads = max(1, cores // ranks)
            predicted, measured = best[i]
            label = name_of(keys, model)
            rows.append({"ranks": ranks, "threads": threads, "layout": label, "predicted_s": predicted,
                         "measured_s": measured, "error": (predicted - measured) / measured})
            print(f"{ranks} ranks x {threads} thread(s)  {label:<48} predicted {predicted:7.3f} s  measured "
                  f"{measured:7.3f} s  error {100 * rows[-1]['error']:+6.1f}%", flush=True)
    load_after = os.getloadavg()
    errors = [abs(r["error"]) for r in rows]
    predicted = [r["predicted_s"] for r in rows]
    measured = [r["measured_s"] for r in rows]
    best = min(range(len(rows)), key=lambda i: measured[i])
    rank_of_best = sorted(range(len(rows)), key=lambda i: predicted[i]).index(best) + 1
    print(f"\n{len(rows)} layouts on {cores} cores; load average before {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    print(f"relative error of the predicted step: median {100 * statistics.median(errors):.1f}%, worst "
          f"{100 * max(errors):.1f}% ({rows[errors.index(max(errors))]['layout']} on "
          f"{rows[errors.index(max(errors))]['ranks']} ranks)")
    print(f"Spearman rank correlation of predicted and measured step times: {spearman(predicted, measured):.3f}")
    print(f"the measured fastest ({rows[best]['layout']} on {rows[best]['ranks']} ranks) is number {rank_of_best} "
          f"of the predictions")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

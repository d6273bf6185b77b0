#!/usr/bin/python3
"""Plots one or more ustrain runs into one PNG, without a server.

Usage: scripts/plot-run.py RUN_DIR... [--output FILE.png]

Reads each run directory's metrics.jsonl (log.jsonl = true, the default) and recipe.toml, and
draws against tokens seen (step x train.global_batch x train.seq_len of the run's recipe):
training and validation loss, learning rate, gradient norm, tokens/s, MFU and, when the
metrics hold one (a field whose name contains "memory" or "resident", in bytes), memory.
Several runs are overlaid, one colour per run, named in the legend by their directory.
A torn last line (a run still writing, or killed mid-write) is skipped.
"""
import argparse
import json
import math
import os
import sys
import tomllib

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402


class UserError(Exception):
    pass


def read_metrics(path):
    """The rows of a metrics.jsonl; a last line that does not parse is a torn write and skipped."""
    try:
        with open(path) as f:
            lines = f.read().split("\n")
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}; is it a run directory trained with log.jsonl = true?")
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            if n == len(lines):  # text after the last newline: a write cut short
                print(f"plot-run: skipped the torn last line {n} of {path}", file=sys.stderr)
                continue
            raise UserError(f"{path}:{n}: not a JSON object ({e.msg})")
        if not isinstance(rows[-1], dict) or "kind" not in rows[-1] or "step" not in rows[-1]:
            raise UserError(f"{path}:{n}: not a metrics row (no kind or step)")
    return rows


def tokens_per_step(run_dir):
    path = os.path.join(run_dir, "recipe.toml")
    try:
        with open(path, "rb") as f:
            train = tomllib.load(f)["train"]
        return train["global_batch"] * train["seq_len"]
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}; is {run_dir} a run directory?")
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as e:
        raise UserError(f"{path}: no train.global_batch and train.seq_len ({e})")


class Run:
    def __init__(self, run_dir, label):
        self.label = label
        rows = read_metrics(os.path.join(run_dir, "metrics.jsonl"))
        per_step = tokens_per_step(run_dir)
        self.train = [r for r in rows if r["kind"] == "train"]
        self.eval = [r for r in rows if r["kind"] == "eval"]
        self.train_tokens = [r["step"] * per_step for r in self.train]
        self.eval_tokens = [r["step"] * per_step for r in self.eval]
        self.memory_fields = sorted({k for r in self.train for k in r if "memory" in k or "resident" in k})

    def series(self, rows, name, scale=1.0):
        """Values of a field; a missing or null value (non-finite when written) is a gap."""
        return [r[name] * scale if isinstance(r.get(name), (int, float)) else math.nan for r in rows]


def plot_loss(ax, run, color):
    ax.plot(run.train_tokens, run.series(run.train, "loss"), color=color, label=f"{run.label} train")
    if run.eval:
        ax.plot(run.eval_tokens, run.series(run.eval, "val_loss"), color=color, linestyle="--", marker="o",
                markersize=3, label=f"{run.label} validation")


def train_panel(field, scale=1.0):
    def plot(ax, run, color):
        ax.plot(run.train_tokens, run.series(run.train, field, scale), color=color, label=run.label)
    return plot


def plot_memory(ax, run, color):
    for field, style in zip(run.memory_fields, ["-", "--", ":", "-."] * 8):
        ax.plot(run.train_tokens, run.series(run.train, field, 1 / 2**30), color=color, linestyle=style,
                label=f"{run.label} {field}")


def main():
    parser = argparse.ArgumentParser(
        description="Plot ustrain runs (loss, learning rate, gradient norm, tokens/s, MFU, memory) into one PNG.")
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directory (runs/NAME)")
    parser.add_argument("--output", default="plot.png", metavar="FILE.png", help="image to write (default plot.png)")
    args = parser.parse_args()

    dirs = [os.path.normpath(d) for d in args.run_dirs]
    names = [os.path.basename(d) for d in dirs]
    # The directory name is the run name; runs of the same name from different places keep their path.
    labels = [d if names.count(n) > 1 else n for d, n in zip(dirs, names)]
    runs = [Run(d, label) for d, label in zip(dirs, labels)]
    if not any(run.train for run in runs):
        raise UserError("no training steps in " + ", ".join(os.path.join(d, "metrics.jsonl") for d in dirs))

    panels = [("loss", "nats per token", plot_loss),
              ("learning rate", "", train_panel("lr")),
              ("gradient norm", "before clipping", train_panel("grad_norm")),
              ("tokens/s", "all ranks", train_panel("tokens_per_s")),
              ("MFU", "%", train_panel("mfu", 100.0))]
    if any(run.memory_fields for run in runs):
        panels.append(("memory", "GiB", plot_memory))

    columns = 3
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(6 * columns, 4 * rows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (title, unit, plot) in zip(axes.flat, panels):
        for i, run in enumerate(runs):
            if run.train:
                plot(ax, run, colors[i % len(colors)])
        ax.set_title(title)
        ax.set_xlabel("tokens seen")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=100)
    except OSError as e:
        raise UserError(f"cannot write {args.output}: {e.strerror}")
    print(f"wrote {args.output}: {len(runs)} run(s) ({', '.join(labels)}); panels: "
          + ", ".join(title for title, _, _ in panels))


if __name__ == "__main__":
    try:
        main()
    except UserError as e:
        print(f"plot-run: {e}", file=sys.stderr)
        sys.exit(2)

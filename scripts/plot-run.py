#!/usr/bin/python3
"""Plots one or more ustrain runs into one PNG, without a server.

Usage: scripts/plot-run.py RUN_DIR... [--output FILE.png] [--x step|tokens|time] [--smooth W|auto]
                                      [--log-y] [--full-y]

Reads each run directory's metrics.jsonl (log.jsonl = true, the default), recipe.toml and
run.json, and draws training and validation loss, learning rate, gradient norm, tokens/s, MFU
and, when the metrics hold them, peak memory (peak_memory_bytes) and the mixture-of-experts
balance (the busiest and idlest expert of any layer over the mean load, from the moe rows), against tokens seen (step x
train.global_batch x train.seq_len of the run's recipe), the step, or the wall time since the
run's first row. Several runs are overlaid, one colour per run, named in the legend by their
directory. Validation losses are drawn on top of the training loss as dashed lines with
markers. Noisy training curves (loss, gradient norm, tokens/s, MFU) are smoothed by an
exponential moving average (--smooth; by default its weight follows each run's length, so that
the average lags no more than a fiftieth of the run: none for a few dozen steps, at most 0.9),
the raw curve drawn faintly behind, and their y limits
leave out outliers (values more than three interquartile ranges outside the middle half), so
a spike at the start does not flatten the rest; --full-y shows every value. Peak memory is drawn from
zero. A dotted vertical line marks where a
session resumed the run from a checkpoint. A torn last line (a run still writing, or killed
mid-write) is skipped.
"""
import argparse
import datetime
import json
import math
import os
import re
import sys
import tomllib


class UserError(Exception):
    pass


def import_pyplot():
    """matplotlib.pyplot, drawing to files only; a UserError saying how to install it if missing."""
    try:
        import matplotlib
    except ImportError:
        raise UserError(f"matplotlib is not installed for {sys.executable}; install it with "
                        "'apt-get install python3-matplotlib' (scripts/setup.sh does)")
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt
    return plt


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


def unix_seconds(utc_text):
    """run.json's "2026-11-25T20:48:53Z" as unix seconds; None when it is not such a time."""
    try:
        return datetime.datetime.fromisoformat(utc_text.replace("Z", "+00:00")).timestamp()
    except (AttributeError, ValueError):
        return None


def restart_steps(run_dir, train_rows):
    """Steps at which a later session took the run up again: the first step after the checkpoint
    each resumed session of run.json started from (the step in its step-N directory name, else
    the first row written after the session started), and any step that goes back in the file."""
    steps = set()
    try:
        with open(os.path.join(run_dir, "run.json")) as f:
            sessions = json.load(f).get("sessions", [])
    except (OSError, ValueError, AttributeError):
        sessions = []  # an older run, or one trained elsewhere: no sessions to mark
    for session in sessions if isinstance(sessions, list) else []:
        resumed_from = session.get("resumed_from") if isinstance(session, dict) else None
        if not isinstance(resumed_from, str):
            continue
        named = re.search(r"step-(\d+)/*$", resumed_from)
        if named:
            steps.add(int(named.group(1)) + 1)
            continue
        start = unix_seconds(session.get("start_time"))
        later = [r["step"] for r in train_rows if start is not None and isinstance(r.get("time"), (int, float))
                 and r["time"] >= start]
        if later:
            steps.add(later[0])
    steps.update(b["step"] for a, b in zip(train_rows, train_rows[1:]) if b["step"] <= a["step"])
    first = train_rows[0]["step"] if train_rows else None
    return sorted(s for s in steps if s != first and any(r["step"] == s for r in train_rows))


class Run:
    def __init__(self, run_dir, label, x_axis):
        self.label = label
        rows = read_metrics(os.path.join(run_dir, "metrics.jsonl"))
        per_step = tokens_per_step(run_dir)
        self.train = [r for r in rows if r["kind"] == "train"]
        self.eval = [r for r in rows if r["kind"] == "eval"]
        self.moe = [r for r in rows if r["kind"] == "moe"]
        start = next((r["time"] for r in rows if isinstance(r.get("time"), (int, float))), 0.0)

        def x_of(row):
            if x_axis == "step":
                return row["step"]
            if x_axis == "tokens":
                return row["step"] * per_step
            return row["time"] - start if isinstance(row.get("time"), (int, float)) else math.nan

        self.train_x = [x_of(r) for r in self.train]
        self.eval_x = [x_of(r) for r in self.eval]
        self.moe_x = [x_of(r) for r in self.moe] if x_axis != "time" else []  # moe rows have no time
        self.restarts = restart_steps(run_dir, self.train)
        # The x of each restart: its step's last row (the one the resumed session wrote).
        x_by_step = {r["step"]: x for r, x in zip(self.train, self.train_x)}
        self.restart_x = [x_by_step[s] for s in self.restarts]
        self.has_memory = any(isinstance(r.get("peak_memory_bytes"), (int, float)) for r in self.train)

    def series(self, rows, name, scale=1.0):
        """Values of a field; a missing or null value (non-finite when written) is a gap."""
        return [r[name] * scale if isinstance(r.get(name), (int, float)) else math.nan for r in rows]


def auto_weight(rows):
    """The smoothing weight for a run of `rows` training rows: the average's time constant
    1 / (1 - w) rows is a fiftieth of the run (a run's last smoothed point then trails its loss
    by little), no smoothing below 100 rows, and at most 0.9 (TensorBoard's usual weight)."""
    time_constant = rows / 50
    return 0.0 if time_constant < 2 else min(0.9, 1 - 1 / time_constant)


def smoothing(text):
    """--smooth: 'auto' (None) or a weight 0 <= W < 1."""
    if text == "auto":
        return None
    try:
        weight = float(text)
    except ValueError:
        raise UserError(f"--smooth {text} is neither a number nor 'auto'")
    if not 0 <= weight < 1:
        raise UserError(f"--smooth {weight} is out of range; give a weight from 0 (no smoothing) up to, "
                        "but not including, 1, or 'auto'")
    return weight


def ema(values, weight):
    """TensorBoard's smoothing: an exponential moving average with the start's bias divided out;
    gaps (nan) stay gaps and do not reset it."""
    if weight <= 0:
        return list(values)
    out, average, seen = [], 0.0, 0
    for v in values:
        if math.isnan(v):
            out.append(math.nan)
            continue
        average = weight * average + (1 - weight) * v
        seen += 1
        out.append(average / (1 - weight ** seen))
    return out


class Panel:
    """One plot: its title, y unit, what it draws per run, whether --log-y applies, whether its
    y limits leave outliers out (noisy measurements, not the learning rate or memory), whether its
    y axis starts at zero (memory: a flat line would otherwise get a range of a few bytes)."""

    def __init__(self, title, unit, draw, log_y=False, robust=False, from_zero=False):
        self.title, self.unit, self.draw, self.log_y, self.robust = title, unit, draw, log_y, robust
        self.from_zero = from_zero


def smoothed_line(ax, x, y, color, label, weight):
    """The raw curve faint and the smoothed one over it, or the raw curve alone without smoothing."""
    if weight > 0:
        ax.plot(x, y, color=color, alpha=0.25, linewidth=0.8)
    ax.plot(x, ema(y, weight), color=color, label=label)
    return y


def loss_panel():
    def draw(ax, run, color):
        values = smoothed_line(ax, run.train_x, run.series(run.train, "loss"), color, f"{run.label} train",
                               run.smooth)
        if run.eval:
            val = run.series(run.eval, "val_loss")
            ax.plot(run.eval_x, val, color=color, linestyle="--", marker="o", markersize=4,
                    markeredgecolor="black", markeredgewidth=0.6, zorder=5, label=f"{run.label} validation")
            values = values + val
        return values
    return Panel("loss", "nats per token", draw, log_y=True, robust=True)


def train_panel(title, unit, field, scale=1.0, smooth=False, log_y=False, from_zero=False):
    """A field of the train rows; smoothed panels (each run's weight) are noisy, so their limits are robust."""
    def draw(ax, run, color):
        weight = run.smooth if smooth else 0.0
        return smoothed_line(ax, run.train_x, run.series(run.train, field, scale), color, run.label, weight)
    return Panel(title, unit, draw, log_y, robust=smooth, from_zero=from_zero)


def expert_load_panel():
    """Mixture-of-experts balance: per step, the busiest and the idlest expert of any layer over
    the mean load (1 and 1 when balanced; a collapsing router drives the least towards 0)."""
    def ratios(row, end):
        layers = [k[:-len(end)] for k in row if k.startswith("layer") and k.endswith(end)]
        return [row[p + end] / row[p + "_load_mean"] for p in layers if row.get(p + "_load_mean")]

    def draw(ax, run, color):
        most = [max(ratios(r, "_load_max"), default=math.nan) for r in run.moe]
        least = [min(ratios(r, "_load_min"), default=math.nan) for r in run.moe]
        ax.plot(run.moe_x, most, color=color, label=f"{run.label} busiest")
        ax.plot(run.moe_x, least, color=color, linestyle="--", label=f"{run.label} idlest")
        return most + least
    return Panel("expert load", "over the mean (any MoE layer)", draw, from_zero=True)


def robust_limits(values, log_y):
    """Limits that hold the finite values (the positive ones on a log axis) but those more than
    three interquartile ranges outside the middle half (Tukey's far-out fences), widened by a
    margin; None when there is nothing to bound."""
    finite = sorted(v for v in values if math.isfinite(v) and (v > 0 or not log_y))
    if not finite:
        return None
    if log_y:
        finite = [math.log10(v) for v in finite]

    def percentile(q):
        at = q * (len(finite) - 1)
        low = math.floor(at)
        high = min(low + 1, len(finite) - 1)
        return finite[low] + (finite[high] - finite[low]) * (at - low)

    q1, q3 = percentile(0.25), percentile(0.75)
    kept = [v for v in finite if q1 - 3 * (q3 - q1) <= v <= q3 + 3 * (q3 - q1)]
    low, high = kept[0], kept[-1]
    margin = 0.08 * (high - low) if high > low else (0.05 * abs(high) or 0.5)
    low, high = low - margin, high + margin
    return (10 ** low, 10 ** high) if log_y else (low, high)


def x_label(x_axis):
    return {"step": "step", "tokens": "tokens seen", "time": "wall time since the run's first row"}[x_axis]


def time_unit(runs):
    """Seconds, minutes or hours, whichever reads best for the longest run."""
    longest = max((x for run in runs for x in run.train_x if math.isfinite(x)), default=0.0)
    if longest >= 2 * 3600:
        return "h", 3600.0
    if longest >= 120:
        return "min", 60.0
    return "s", 1.0


def draw_panel(ax, panel, runs, colors, args, x_title):
    log_y = args.log_y and panel.log_y
    values = []
    for i, run in enumerate(runs):
        if not run.train:
            continue
        color = colors[i % len(colors)]
        values += panel.draw(ax, run, color)
        for n, x in enumerate(run.restart_x):
            ax.axvline(x, color=color, linestyle=":", linewidth=1.2,
                       label=f"{run.label} resumed" if n == 0 else None)
    if log_y:
        ax.set_yscale("log")
    else:
        ax.ticklabel_format(axis="y", useOffset=False)  # values as they are, never "+1.2e9" above the axis
    limits = robust_limits(values, log_y) if panel.robust and not args.full_y else None
    if limits:
        ax.set_ylim(*limits)
    if panel.from_zero:
        finite = [v for v in values if math.isfinite(v)]
        ax.set_ylim(0, 1.1 * max(finite) if finite and max(finite) > 0 else 1)
    ax.set_title(panel.title)
    ax.set_xlabel(x_title)
    ax.set_ylabel(panel.unit)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")


def main():
    parser = argparse.ArgumentParser(
        description="Plot ustrain runs (loss, learning rate, gradient norm, tokens/s, MFU, peak memory) into one PNG.")
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directory (runs/NAME)")
    parser.add_argument("--output", default="plot.png", metavar="FILE.png", help="image to write (default plot.png)")
    parser.add_argument("--x", choices=["step", "tokens", "time"], default="tokens",
                        help="x axis: optimizer step, tokens seen (default), or wall time since the run's first row")
    parser.add_argument("--smooth", default="auto", metavar="W|auto",
                        help="weight of the exponential moving average over loss, gradient norm, tokens/s and MFU, "
                             "0 <= W < 1 (0: raw curves only); default auto: from each run's length, none below "
                             "100 steps, 0.9 from 500")
    parser.add_argument("--log-y", action="store_true",
                        help="logarithmic y axis for loss, learning rate and gradient norm")
    parser.add_argument("--full-y", action="store_true",
                        help="y limits that hold every value (default: loss, gradient norm, tokens/s and MFU leave "
                             "out values more than 3 interquartile ranges outside the middle half)")
    args = parser.parse_args()
    args.smooth = smoothing(args.smooth)
    plt = import_pyplot()

    dirs = [os.path.normpath(d) for d in args.run_dirs]
    names = [os.path.basename(d) for d in dirs]
    # The directory name is the run name; runs of the same name from different places keep their path.
    labels = [d if names.count(n) > 1 else n for d, n in zip(dirs, names)]
    runs = [Run(d, label, args.x) for d, label in zip(dirs, labels)]
    if not any(run.train for run in runs):
        raise UserError("no training steps in " + ", ".join(os.path.join(d, "metrics.jsonl") for d in dirs))
    x_title = x_label(args.x)
    if args.x == "time":
        unit, seconds = time_unit(runs)
        for run in runs:
            run.train_x = [x / seconds for x in run.train_x]
            run.eval_x = [x / seconds for x in run.eval_x]
            run.restart_x = [x / seconds for x in run.restart_x]
        x_title += f" ({unit})"

    for run in runs:
        run.smooth = auto_weight(len(run.train)) if args.smooth is None else args.smooth
        if args.smooth is None:
            print(f"{run.label}: {len(run.train)} steps, " +
                  (f"smoothed with weight {run.smooth:.2f}" if run.smooth > 0 else "too few to smooth"))
    panels = [loss_panel(),
              train_panel("learning rate", "", "lr", log_y=True),
              train_panel("gradient norm", "before clipping", "grad_norm", smooth=True, log_y=True),
              train_panel("tokens/s", "all ranks", "tokens_per_s", smooth=True),
              train_panel("MFU", "%", "mfu", 100.0, smooth=True)]
    if any(run.has_memory for run in runs):
        panels.append(train_panel("peak memory", "GiB (rank 0)", "peak_memory_bytes", 1 / 2**30, from_zero=True))
    if args.x != "time" and any(run.moe for run in runs):
        panels.append(expert_load_panel())

    for run in runs:
        if run.restarts:
            print(f"{run.label}: resumed at step " + ", ".join(str(s) for s in run.restarts))

    columns = 3
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(6 * columns, 4 * rows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, panel in zip(axes.flat, panels):
        draw_panel(ax, panel, runs, colors, args, x_title)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=100)
    except OSError as e:
        raise UserError(f"cannot write {args.output}: {e.strerror}")
    print(f"wrote {args.output}: {len(runs)} run(s) ({', '.join(labels)}); panels: "
          + ", ".join(panel.title for panel in panels))


if __name__ == "__main__":
    try:
        main()
    except UserError as e:
        print(f"plot-run: {e}", file=sys.stderr)
        sys.exit(2)

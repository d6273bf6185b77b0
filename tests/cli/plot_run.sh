# scripts/plot-run.py: one PNG from two tiny runs overlaid, the peak-memory panel when the
# metrics have it, a torn last line skipped, the x axes, log scale, smoothing and percentile
# limits, the mark where a run resumed, and one clear message for what is not a run and for a
# missing matplotlib.
source "$(dirname "$0")/lib/common.bash"

plot() { "$PYTHON" "$SOURCE_DIR/scripts/plot-run.py" "$@"; }

# Without matplotlib: one line saying how to install it, exit 2. A package named matplotlib
# that fails to import stands in for a missing one, so this runs whether it is installed or not.
mkdir -p no-mpl/matplotlib
echo 'raise ImportError("No module named matplotlib")' >no-mpl/matplotlib/__init__.py
mkdir -p fake/r && echo '{"kind":"train","step":1,"loss":1}' >fake/r/metrics.jsonl
expect_exit 2 "plot without matplotlib" -- \
  env PYTHONPATH="$PWD/no-mpl" "$PYTHON" "$SOURCE_DIR/scripts/plot-run.py" fake/r
expect_output "^plot-run: matplotlib is not installed for /usr/bin/python3; install it with \
'apt-get install python3-matplotlib'" "one line says how to install matplotlib"
[[ $(wc -l <"$WORK/out.txt") -eq 1 ]] && pass "and nothing else (no traceback)" \
  || fail "more than one line: $(cat "$WORK/out.txt")"
if ! "$PYTHON" -c "import matplotlib" 2>/dev/null; then
  echo "note: matplotlib is not installed for $PYTHON; the plots themselves are not tested"
  finish
  exit $?
fi
# is_png FILE WIDTH HEIGHT: FILE has the PNG signature and the given size in its IHDR chunk.
is_png() {
  [[ $(od -An -tx1 -N8 "$1" | tr -d ' \n') == 89504e470d0a1a0a ]] &&
    [[ $(od -An -j16 -N8 --endian=big -tu4 "$1" | xargs) == "$2 $3" ]]
}

make_corpus
tiny_recipe >tiny.toml
expect_exit 0 "data convert" -- "$USTRAIN" data convert --input corpus --output data --val-fraction 0.1
expect_exit 0 "train run a" -- "$USTRAIN" train tiny.toml --set run.name=a --set train.steps=12 --set train.eval_interval=4
expect_exit 0 "train run b" -- "$USTRAIN" train tiny.toml --set run.name=b --set train.steps=12 --set optim.lr=1e-3

expect_exit 0 "plot two runs" -- plot runs/a runs/b --output two.png
expect_output "wrote two.png: 2 run\(s\) \(a, b\); panels: loss, learning rate, gradient norm, tokens/s, MFU, peak memory$" \
  "it names the runs and the six panels (the trainer writes peak_memory_bytes)"
is_png two.png 1800 800 && pass "two.png is a 1800 x 800 PNG" || fail "two.png is not the expected PNG"

# Metrics without peak memory (an older run) have no memory panel; a last line cut mid-write
# is skipped with a note.
mkdir -p more && cp -r runs/a more/a
sed -i 's/,"peak_memory_bytes":[0-9]*//' more/a/metrics.jsonl
printf '{"kind":"train","step":13,"lo' >>more/a/metrics.jsonl
(cd more && expect_exit 0 "plot a run without memory and with a torn last line" -- plot a)
expect_output "skipped the torn last line 16 of a/metrics.jsonl" "the torn line is reported"
expect_output "wrote plot.png: 1 run\(s\) \(a\); panels: loss, learning rate, gradient norm, tokens/s, MFU$" \
  "--output defaults to plot.png; no memory, no memory panel"
is_png more/plot.png 1800 800 && pass "plot.png written" || fail "plot.png is not the expected PNG"

# Every x axis, log scale, no smoothing and full limits draw; a bad option is refused.
for x in step tokens time; do
  expect_exit 0 "--x $x --log-y" -- plot runs/a runs/b --x $x --log-y --output x-$x.png
  is_png x-$x.png 1800 800 && pass "x-$x.png written" || fail "x-$x.png is not the expected PNG"
done
expect_exit 0 "--smooth 0 --full-y" -- plot runs/a --smooth 0 --full-y --output raw.png
expect_exit 2 "--smooth 1 is refused" -- plot runs/a --smooth 1
expect_output "^plot-run: --smooth 1.0 is out of range" "the message names the option"
expect_exit 2 "--x epoch is refused" -- plot runs/a --x epoch
expect_output "invalid choice: 'epoch'" "argparse names the choices"

# Robust limits: a loss spike of 1000 at step 1 does not set the loss axis, --full-y shows it.
# The y limits are read back from the figure matplotlib drew.
mkdir -p spike && cp -r runs/b spike/b
sed -i '0,/"loss":[-0-9.e]*/s//"loss":1000/' spike/b/metrics.jsonl
ylimit() {  # ylimit RUN [OPTIONS]: the loss panel's upper y limit
  "$PYTHON" - "$SOURCE_DIR/scripts/plot-run.py" "$@" <<'PY'
import runpy, sys
import matplotlib.pyplot as plt
script, *args = sys.argv[1:]
sys.argv = [script, *args, "--output", "ylimit.png"]
saved = plt.Figure.savefig
plt.Figure.savefig = lambda fig, *a, **k: print("loss ymax", fig.axes[0].get_ylim()[1]) or saved(fig, *a, **k)
runpy.run_path(script, run_name="__main__")
PY
}
robust=$(ylimit spike/b | sed -n 's/^loss ymax //p')
full=$(ylimit spike/b --full-y | sed -n 's/^loss ymax //p')
awk -v r="$robust" 'BEGIN { exit !(r > 0 && r < 100) }' && pass "the spike is left out of the loss axis (top $robust)" \
  || fail "loss axis top $robust with a spike of 1000"
awk -v f="$full" 'BEGIN { exit !(f >= 1000) }' && pass "--full-y keeps it (top $full)" \
  || fail "--full-y loss axis top $full"

# Smoothing follows the run's length: a 12-step run is drawn raw (an average of 0.9 would end
# far above its last loss), a 300-step one smoothed lightly; a flat memory line is drawn from
# zero with its values on the axis, not as an offset. Read back from the figure.
figure() {  # figure RUN [OPTIONS]: the loss panel's last drawn point, the memory panel's axis
  "$PYTHON" - "$SOURCE_DIR/scripts/plot-run.py" "$@" <<'PY'
import runpy, sys
import matplotlib.pyplot as plt
script, *args = sys.argv[1:]
sys.argv = [script, *args, "--output", "figure.png"]
saved = plt.Figure.savefig
def report(fig, *a, **k):
    fig.canvas.draw()
    loss, memory = fig.axes[0], fig.axes[5]
    print("loss last", [line.get_ydata()[-1] for line in loss.lines if line.get_label().endswith(" train")][-1])
    print("memory bottom", memory.get_ylim()[0], "offset", repr(memory.yaxis.get_major_formatter().get_offset()))
    return saved(fig, *a, **k)
plt.Figure.savefig = report
runpy.run_path(script, run_name="__main__")
PY
}
mkdir -p flat && cp -r runs/b flat/b
sed -i 's/"peak_memory_bytes":[0-9]*/"peak_memory_bytes":1234567890/' flat/b/metrics.jsonl
figure flat/b >figure.txt
last_raw=$(grep '"kind":"train"' flat/b/metrics.jsonl | tail -n 1 | sed 's/.*"loss":\([-0-9.e]*\).*/\1/')
last_drawn=$(sed -n 's/^loss last //p' figure.txt)
awk -v a="$last_raw" -v b="$last_drawn" 'BEGIN { d = a - b; exit !(d < 1e-6 && d > -1e-6) }' \
  && pass "a 12-step run's loss is drawn raw (ends at $last_drawn)" || fail "drawn $last_drawn, last loss $last_raw"
grep -q "^b: 12 steps, too few to smooth$" figure.txt && pass "it says so" || fail "$(cat figure.txt)"
grep -q "^memory bottom 0.0 offset ''$" figure.txt && pass "flat memory from zero, without an offset" \
  || fail "memory axis: $(grep memory figure.txt)"
mkdir -p long
"$PYTHON" -c 'import json
for s in range(1, 301):
    print(json.dumps({"kind": "train", "step": s, "loss": 5 - s / 100, "lr": 1e-3}))
    print(json.dumps({"kind": "moe", "step": s, "layer1_load_min": 0, "layer1_load_max": 40, "layer1_load_mean": 10}))' \
  >long/metrics.jsonl && cp runs/b/recipe.toml long/
expect_exit 0 "plot a 300-step run" -- plot long --x step --output long.png
expect_output "^long: 300 steps, smoothed with weight 0.83$" "a longer run is smoothed, lightly"
expect_output "panels: loss, learning rate, gradient norm, tokens/s, MFU, expert load$" \
  "the moe rows add the expert-load panel"
expect_exit 0 "--smooth 0.9 still sets the weight" -- plot long --x step --smooth 0.9 --output long.png
expect_output "wrote long.png" "an explicit weight is taken as given"

# A resumed run is marked where the resumed session began: after the checkpoint it took up.
expect_exit 0 "resume run a for 4 more steps" -- "$USTRAIN" train tiny.toml --set run.name=a --set train.steps=16 \
  --set train.eval_interval=4 --resume auto
expect_exit 0 "plot the resumed run" -- plot runs/a --output resumed.png
expect_output "^a: resumed at step 13$" "the restart is found at step 13 (the checkpoint of step 12, from run.json)"
cp -r runs/a moved-a && rm moved-a/run.json
printf '%s\n' "$(sed -n '/"kind":"train","step":3,/p' moved-a/metrics.jsonl)" >>moved-a/metrics.jsonl
expect_exit 0 "plot a run whose steps go back, without run.json" -- plot moved-a --output back.png
expect_output "^moved-a: resumed at step 3$" "a step that goes back is marked too"
expect_exit 0 "runs of one name from two places" -- plot runs/a more/a --output same.png
expect_output "\(runs/a, more/a\)" "they keep their paths in the legend"

expect_exit 2 "plot a directory that is not a run" -- plot corpus
expect_output "^plot-run: cannot read corpus/metrics.jsonl: No such file or directory; is it a run directory" \
  "one clear message"
printf 'not json\n{"kind":"train","step":1}\n' >runs/b/metrics.jsonl
expect_exit 2 "plot a run with a corrupt line" -- plot runs/b
expect_output "^plot-run: runs/b/metrics.jsonl:1: not a JSON object" "the message names file and line"
[[ ! -e plot.png ]] && pass "nothing written on error" || fail "plot.png written despite the error"
finish

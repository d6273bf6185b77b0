# scripts/plot-run.py: one PNG from two tiny runs overlaid, a memory panel when the metrics
# have memory, a torn last line skipped, and one clear message for what is not a run.
source "$(dirname "$0")/lib/common.bash"

plot() { "$PYTHON" "$SOURCE_DIR/scripts/plot-run.py" "$@"; }
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
expect_output "wrote two.png: 2 run\(s\) \(a, b\); panels: loss, learning rate, gradient norm, tokens/s, MFU$" \
  "it names the runs and the five panels (no memory in these metrics)"
is_png two.png 1800 800 && pass "two.png is a 1800 x 800 PNG" || fail "two.png is not the expected PNG"

# A field about memory adds a panel; a last line cut mid-write is skipped with a note.
mkdir -p more && cp -r runs/a more/a
sed -i 's/"kind":"train",/&"peak_memory_bytes":1073741824,/' more/a/metrics.jsonl
printf '{"kind":"train","step":13,"lo' >>more/a/metrics.jsonl
(cd more && expect_exit 0 "plot a run with memory and a torn last line" -- plot a)
expect_output "skipped the torn last line 16 of a/metrics.jsonl" "the torn line is reported"
expect_output "wrote plot.png: 1 run\(s\) \(a\); panels: loss, learning rate, gradient norm, tokens/s, MFU, memory$" \
  "--output defaults to plot.png; memory gets a panel"
is_png more/plot.png 1800 800 && pass "plot.png written" || fail "plot.png is not the expected PNG"
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

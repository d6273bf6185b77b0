# Nothing a run writes into its run directory goes through a symbolic link (or into a FIFO):
# recipe.toml, train.log, metrics.jsonl, run.json and their staging copies are refused with one
# message before the run changes anything, a trace file is skipped with a warning, and what a
# link points to, here a file outside the run directory, keeps its content.
source "$(dirname "$0")/lib/common.bash"
export OPENBLAS_NUM_THREADS=1

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
short=(--set train.steps=2 --set train.eval_interval=0 --set log.interval=1)
echo "precious" >precious.txt
kept() { [[ $(cat precious.txt) == precious ]] && pass "$1" || fail "$1: the target now holds $(head -c 300 precious.txt)"; }

# A first start whose recipe.toml is a link.
mkdir -p runs/first && ln -s ../../precious.txt runs/first/recipe.toml
expect_exit 2 "recipe.toml is a symbolic link" -- "$USTRAIN" train tiny.toml "${short[@]}" --set run.name=first
expect_output "^error: runs/first/recipe.toml is a symbolic link, not a regular file: remove it" "one message naming it"
kept "the link's target is untouched"
[[ ! -e runs/first/train.log && ! -e runs/first/run.json ]] && pass "nothing else was written" \
  || fail "the refused start wrote $(ls runs/first)"

# A resume whose files have been replaced by links.
expect_exit 0 "a run to resume" -- "$USTRAIN" train tiny.toml "${short[@]}" --set run.name=again
for name in train.log metrics.jsonl run.json run.json.tmp metrics.jsonl.tmp; do
  [[ -e runs/again/$name ]] && mv "runs/again/$name" saved
  ln -s ../../precious.txt "runs/again/$name"
  expect_exit 2 "resumed with $name a link" -- "$USTRAIN" train tiny.toml "${short[@]}" --set run.name=again \
    --set train.steps=3 --resume auto
  expect_output "runs/again/$name is a symbolic link, not a regular file" "names $name"
  kept "$name: the link's target is untouched"
  rm "runs/again/$name"
  [[ -e saved ]] && mv saved "runs/again/$name"
done
mkfifo runs/again/train.log.fifo && mv runs/again/train.log saved && mv runs/again/train.log.fifo runs/again/train.log
expect_exit 2 "train.log is a FIFO" -- timeout 60 "$USTRAIN" train tiny.toml "${short[@]}" --set run.name=again \
  --set train.steps=3 --resume auto
expect_output "runs/again/train.log is a FIFO \(named pipe\), not a regular file" "a FIFO is refused, not waited on"
rm runs/again/train.log && mv saved runs/again/train.log
expect_exit 0 "the resume, the links removed" -- "$USTRAIN" train tiny.toml "${short[@]}" --set run.name=again \
  --set train.steps=3 --resume auto

# A trace file that is a link: the trace is not written, training goes on.
mkdir -p runs/traced/trace && ln -s ../../../precious.txt runs/traced/trace/trace.json
expect_exit 0 "trace.json is a symbolic link" -- "$USTRAIN" train tiny.toml "${short[@]}" --set run.name=traced \
  --set log.trace_steps=1-2
expect_output "could not write the trace: runs/traced/trace/trace.json is a symbolic link" "warns, naming it"
kept "the trace link's target is untouched"
finish

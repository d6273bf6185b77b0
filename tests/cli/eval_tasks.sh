# Multiple-choice task evaluation: `ustrain eval --task` (text and --json), the recipe's [eval]
# tasks during training (metrics.jsonl), the same accuracies under dp, tp, pp and cp as on one
# process, and one clear message for each kind of bad task file.
source "$(dirname "$0")/lib/common.bash"
make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
# Contexts of four corpus words; the answer is the word that follows in the corpus's pattern.
"$PYTHON" - <<'PY'
import json
words = "the quick brown fox jumps over lazy dog and cat sat on mat while rain fell in spain".split()
with open("words.jsonl", "w") as f:
    for i in range(40):
        context = " ".join(words[(i + k) % len(words)] for k in range(4))
        choices = [" " + words[(i + 4) % len(words)], " " + words[(i + 9) % len(words)], " sky x"]
        f.write(json.dumps({"context": context, "choices": choices, "answer": i % 3}) + "\n")
PY
metric() { sed -n "s/.*\"kind\":\"task\".*\"words\/$2\":\([-0-9.e+]*\).*/\1/p" "$1" | tail -1; }

expect_exit 0 "train with [eval] tasks" -- "$USTRAIN" train tiny.toml --set train.steps=6 --set eval.interval=3 \
  --set 'eval.tasks=["words.jsonl"]'
[[ $(grep -c '"kind":"task"' runs/tiny/metrics.jsonl) -eq 2 ]] && pass "  ... scored at steps 3 and 6" \
  || fail "expected 2 task records"; grep '"kind":"task"' runs/tiny/metrics.jsonl
acc=$(metric runs/tiny/metrics.jsonl acc)
acc_norm=$(metric runs/tiny/metrics.jsonl acc_norm)
expect_exit 0 "eval --task" -- "$USTRAIN" eval tiny.toml --checkpoint runs/tiny --task words.jsonl
expect_output "\(step 6\): task words \| acc [0-9.]+ \| acc_norm [0-9.]+ \| 40 items" "  ... prints the accuracies"
expect_exit 0 "eval --task --json" -- "$USTRAIN" eval tiny.toml --checkpoint runs/tiny --task words.jsonl --json
expect_output "^\{\"task\":\"words\",\"n\":40,\"acc\":$acc,\"acc_norm\":$acc_norm\}$" \
  "  ... one object, the numbers training logged"
expect_exit 2 "--json without --task" -- "$USTRAIN" eval tiny.toml --checkpoint runs/tiny --json
expect_output "--json requires --task" "  ... says what it needs"

# Every layout scores the same rows: the run's last scores equal one process's on its checkpoint.
mpi() { timeout 300 mpiexec -n 2 --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 "$@"; }
for layout in dp tp pp cp; do
  rm -rf runs/l
  mpi "$USTRAIN" train tiny.toml --set run.name=l --set train.steps=4 --set parallel.$layout=2 \
    --set eval.tasks=words.jsonl >l.txt 2>&1 || { fail "$layout=2 training"; tail -5 l.txt; continue; }
  logged="{\"task\":\"words\",\"n\":40,\"acc\":$(metric runs/l/metrics.jsonl acc),\"acc_norm\":$(metric runs/l/metrics.jsonl acc_norm)}"
  one=$("$USTRAIN" eval tiny.toml --checkpoint runs/l --task words.jsonl --json 2>&1)
  [[ "$one" == "$logged" ]] && pass "$layout=2 scores as one process: $one" || fail "$layout=2: $logged vs $one"
done

# Bad task files: one message naming the file, the line and what is wrong; exit 2.
good='{"context": "the cat", "choices": [" sat", " dog"], "answer": 0}'
bad_task() {  # bad_task DESCRIPTION LINE2 PATTERN: the second line of a file is bad
  printf '%s\n%s\n' "$good" "$2" >bad.jsonl
  expect_exit 2 "$1" -- "$USTRAIN" eval tiny.toml --checkpoint runs/tiny --task bad.jsonl
  expect_output "^error: task file bad.jsonl line 2: $3; each line must be one item like" "  ... $3"
  [[ $(grep -c . "$WORK/out.txt") -eq 1 ]] && pass "  ... in one line" || fail "more than one line"
}
bad_task "not JSON" '{"context": "the cat", ' "not valid JSON"
bad_task "not an object" '[1, 2]' "found an array, not a JSON object"
bad_task "missing key" '{"context": "the cat", "answer": 0}' 'the key "choices" is missing'
bad_task "answer out of range" '{"context": "a", "choices": [" b", " c"], "answer": 2}' \
  '"answer" is 2, out of range for 2 choices \(0 to 1\)'
bad_task "negative answer" '{"context": "a", "choices": [" b"], "answer": -1}' \
  '"answer" is -1, out of range for 1 choice \(0 to 0\)'
bad_task "fractional answer" '{"context": "a", "choices": [" b"], "answer": 0.5}' \
  '"answer" is a fractional number, not an integer index'
bad_task "empty choices" '{"context": "a", "choices": [], "answer": 0}' '"choices" is empty: an item needs at least one choice'
bad_task "empty choice" '{"context": "a", "choices": [" b", ""], "answer": 0}' "choice 1 is empty"
bad_task "choice not a string" '{"context": "a", "choices": [" b", 3], "answer": 0}' "choice 1 is a number, not a string"
bad_task "empty context" '{"context": "", "choices": [" b"], "answer": 0}' '"context" is empty: the first choice token needs something to follow'
long=$(printf 'x%.0s' {1..40})
bad_task "choice longer than seq_len" "{\"context\": \"a\", \"choices\": [\"$long\"], \"answer\": 0}" \
  "choice 0 is 40 tokens, more than the model's sequence length of 32 leaves for any context"
: >empty.jsonl
expect_exit 2 "a file without items" -- "$USTRAIN" eval tiny.toml --checkpoint runs/tiny --task empty.jsonl
expect_output "^error: task file empty.jsonl holds no items" "  ... says so"
expect_exit 2 "a missing task file" -- "$USTRAIN" eval tiny.toml --checkpoint runs/tiny --task nothere.jsonl
expect_output "^error: .*nothere.jsonl" "  ... names it"
expect_exit 2 "a bad task file in the recipe" -- "$USTRAIN" train tiny.toml --set run.name=b --set eval.tasks=bad.jsonl
expect_output "^error: task file bad.jsonl line 2" "  ... fails before training"
[[ ! -e runs/b/metrics.jsonl ]] && pass "  ... before the first step" || fail "runs/b trained"

# A context longer than a row holds is cut from the left, as lm-evaluation-harness does.
ctx=$(printf 'the cat sat %.0s' {1..20})
printf '{"context": "%s", "choices": [" on", " mat"], "answer": 0}\n' "$ctx" >long.jsonl
expect_exit 0 "a context longer than train.seq_len" -- "$USTRAIN" eval tiny.toml --checkpoint runs/tiny --task long.jsonl
expect_output "1 of 1 items were longer than train.seq_len: their context was cut from the left" "  ... says so"
finish

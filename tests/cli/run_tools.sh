# `eval` and `generate` on a run directory: `eval --run DIR` takes the run's recipe.toml and
# newest checkpoint; `generate --run` on a run without a checkpoint says so; `generate` warns,
# once, when the text passes model.max_seq_len; generate's key/value cache changes no text.
source "$(dirname "$0")/lib/common.bash"
make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
short=(--set train.steps=4 --set train.eval_interval=4 --set schedule.warmup_steps=1)

expect_exit 0 "a short run" -- "$USTRAIN" train tiny.toml "${short[@]}"
logged=$(sed -n 's/.*"kind":"eval".*"val_loss":\([-0-9.e+]*\).*/\1/p' runs/tiny/metrics.jsonl | tail -1)
expect_exit 0 "eval --run without a recipe" -- "$USTRAIN" eval --run runs/tiny
expect_output "step-00000004 \(step 4\): validation loss $logged " "  ... evaluates the newest checkpoint as the run did"
expect_exit 0 "eval --run with a recipe" -- "$USTRAIN" eval tiny.toml --run runs/tiny
expect_output "validation loss $logged " "  ... the same number"
expect_exit 2 "eval without a checkpoint" -- "$USTRAIN" eval tiny.toml
expect_output "^error: eval needs --checkpoint PATH or --run DIR" "  ... says what it needs"
expect_exit 2 "eval --checkpoint without a recipe" -- "$USTRAIN" eval --checkpoint runs/tiny
expect_output "^error: eval needs a RECIPE" "  ... says what it needs"

# A run stopped before its first checkpoint (a bench run saves none).
mkdir -p runs/none && cp runs/tiny/recipe.toml runs/none/
expect_exit 2 "generate --run on a run without a checkpoint" -- "$USTRAIN" generate --run runs/none --prompt the
expect_output "^error: run directory runs/none has no checkpoint yet: .*--resume auto.*--checkpoint PATH" \
  "  ... names the directory and what to do"
expect_exit 2 "eval --run on a run without a checkpoint" -- "$USTRAIN" eval --run runs/none
expect_output "^error: run directory runs/none has no checkpoint yet" "  ... the same"
mkdir -p elsewhere
expect_exit 2 "generate --run on a directory that is no run" -- "$USTRAIN" generate --run elsewhere
expect_output "^error: elsewhere is not a run directory" "  ... says so"

# max_seq_len is 32 in the tiny recipe: 40 new tokens after a short prompt pass it.
"$USTRAIN" generate --run runs/tiny --prompt "the" --tokens 40 --temperature 0 --samples 2 >text.txt 2>warn.txt
[[ $? -eq 0 ]] && pass "generate past max_seq_len (exit 0)" || { fail "generate past max_seq_len"; cat warn.txt; }
[[ $(grep -c "^warning: the prompt and the text passed model.max_seq_len = 32 tokens" warn.txt) -eq 1 ]] \
  && pass "  ... warns once" || { fail "expected one warning"; cat warn.txt; }
grep -q "warning" text.txt && fail "the warning is mixed into the text" || pass "  ... apart from the text"
"$USTRAIN" generate --run runs/tiny --prompt "the" --tokens 20 --temperature 0 >text.txt 2>warn.txt
grep -q "max_seq_len" warn.txt && fail "a text within max_seq_len is warned about" || pass "within it: no warning"
# The key/value cache: part of a greedy text given back as the prompt (its keys and values
# computed in one step, not one token at a time) continues it as before.
export LC_ALL=C  # the byte tokenizer: cut the text at bytes
"$USTRAIN" generate --run runs/tiny --prompt "the" --tokens 24 --temperature 0 >whole.txt 2>/dev/null
whole=$(cat whole.txt)
[[ ${#whole} -eq 27 ]] && pass "a greedy text of 24 tokens" || fail "expected 24 new bytes: '$whole'"
"$USTRAIN" generate --run runs/tiny --prompt "${whole:0:6}" --tokens 21 --temperature 0 >part.txt 2>/dev/null
[[ $(cat part.txt) == "$whole" ]] && pass "  ... continued the same from a longer prompt" \
  || fail "a longer prompt continues differently: '$(cat part.txt)' for '$whole'"
# With USTRAIN_BEFORE naming the binary of an earlier build: the same texts as it prints,
# greedy past max_seq_len and sampled.
if [[ -n ${USTRAIN_BEFORE:-} ]]; then
  for args in "--tokens 60 --temperature 0" "--tokens 60 --seed 5 --samples 3"; do
    "$USTRAIN" generate --run runs/tiny --prompt "the" $args >now.txt 2>/dev/null
    "$USTRAIN_BEFORE" generate --run runs/tiny --prompt "the" $args >before.txt 2>/dev/null
    [[ -s now.txt ]] && cmp -s now.txt before.txt && pass "generate $args: the text of USTRAIN_BEFORE" \
      || { fail "generate $args differs from USTRAIN_BEFORE's"; diff now.txt before.txt; }
  done
else
  echo "skip: set USTRAIN_BEFORE to an earlier build's binary to compare generate's texts with it"
fi
finish

# Training on converted data: blends, a sentencepiece dataset, prefetching that does not change
# results, and every bad-data case failing before training with a message naming the file.
source "$(dirname "$0")/lib/common.bash"

make_corpus
mkdir -p other
for ((i = 0; i < 200; i++)); do printf 'numbers %d and %d make %d\n\n' $i $((i * 3)) $((i * 4)); done >other/b.txt
tiny_recipe >tiny.toml
short=(--set train.steps=6 --set schedule.warmup_steps=2 --set train.eval_interval=3)
"$USTRAIN" data convert -i corpus -o data --val-fraction 0.1 >/dev/null 2>&1
"$USTRAIN" data convert -i other -o data-b --val-fraction 0.1 >/dev/null 2>&1

expect_exit 0 "train on one dataset" -- "$USTRAIN" train tiny.toml "${short[@]}"
expect_exit 0 "train without prefetching" -- "$USTRAIN" train tiny.toml "${short[@]}" --set run.name=sync --set data.prefetch=0
cmp -s <(losses runs/tiny/metrics.jsonl) <(losses runs/sync/metrics.jsonl) && [[ -n $(losses runs/sync/metrics.jsonl) ]] \
  && pass "prefetching does not change the losses" || fail "losses differ with data.prefetch=0"
expect_exit 0 "train on a blend" -- "$USTRAIN" train tiny.toml "${short[@]}" --set run.name=blend \
  --set 'data.path=""' --set 'data.blend=data:0.7,data-b:0.3'
expect_output "validation loss" "the blend validates"
expect_exit 2 "path and blend together" -- "$USTRAIN" train tiny.toml --set 'data.blend=data:1' --dry-run
expect_output "both data.path and data.blend" "says to choose one"
expect_exit 2 "malformed blend" -- "$USTRAIN" train tiny.toml --set 'data.path=""' --set 'data.blend=data:lots' --dry-run
expect_output "data.blend" "names the key"

"$USTRAIN" data tokenizer train -i corpus -o tok.model --vocab-size 300 >/dev/null 2>&1
"$USTRAIN" data convert -i corpus -o sp -t tok.model --val-fraction 0.1 >/dev/null 2>&1
sp=(--set data.path=sp --set data.tokenizer=sentencepiece)
expect_exit 2 "recipe names another tokenizer" -- "$USTRAIN" train tiny.toml --set data.path=sp --set data.tokenizer=byte
expect_output 'set data.tokenizer = "sentencepiece"' "says which tokenizer the data has"
expect_exit 2 "model vocabulary too small" -- "$USTRAIN" train tiny.toml "${sp[@]}"
expect_output "model.vocab_size to at least 300" "says how large the vocabulary must be"
expect_exit 0 "train on sentencepiece data" -- "$USTRAIN" train tiny.toml "${short[@]}" "${sp[@]}" \
  --set model.vocab_size=300 --set run.name=sp
expect_exit 2 "blend of two tokenizers" -- "$USTRAIN" train tiny.toml --set 'data.path=""' --set 'data.blend=data:1,sp:1'
expect_output "tokenized differently|was tokenized with" "says the tokenizers differ"

# Resuming a blended run from a checkpoint reads exactly the data that followed: the losses
# continue exactly as in the uninterrupted run.
resume=(--set "data.path=\"\"" --set 'data.blend=data:0.6,data-b:0.4' --set train.steps=8 --set schedule.warmup_steps=2
        --set train.eval_interval=0 --set checkpoint.interval=4 --set log.interval=1)
expect_exit 0 "blended run with checkpoints" -- "$USTRAIN" train tiny.toml "${resume[@]}" --set run.name=whole
expect_exit 0 "resume it from step 4" -- "$USTRAIN" train tiny.toml "${resume[@]}" --set run.name=resumed \
  --resume runs/whole/checkpoints/step-00000004
if [[ $(losses runs/resumed/metrics.jsonl | tail -4 | wc -l) -eq 4 ]] &&
   cmp -s <(losses runs/whole/metrics.jsonl | tail -4) <(losses runs/resumed/metrics.jsonl | tail -4); then
  pass "resumed losses continue the uninterrupted run bit for bit"
else
  fail "resumed losses differ: $(losses runs/whole/metrics.jsonl | tail -4 | tr '\n' ' ') vs $(losses runs/resumed/metrics.jsonl | tail -4 | tr '\n' ' ')"
fi

# Bad data: each case fails at start, exit 2, naming the file.
damaged() {  # copy the good dataset to $1
  rm -rf "$1" && cp -r data "$1"
}
damaged trunc && truncate -s -100 trunc/train-00000.h5
expect_exit 2 "truncated shard" -- "$USTRAIN" train tiny.toml --set data.path=trunc --set run.name=x
expect_output "trunc/train-00000.h5.*truncated" "names the truncated shard"
damaged flipped && printf '\x5a' | dd of=flipped/train-00000.h5 bs=1 seek=3000 conv=notrunc status=none
expect_exit 2 "corrupt shard" -- "$USTRAIN" train tiny.toml --set data.path=flipped --set run.name=x
expect_output "flipped/train-00000.h5 fails its checksum" "names the corrupt shard"
damaged gone && rm gone/val-00000.h5
expect_exit 2 "missing shard" -- "$USTRAIN" train tiny.toml --set data.path=gone --set run.name=x
expect_output "gone/val-00000.h5.*missing" "names the missing shard"
damaged newer && sed -i 's/"format_version": 1/"format_version": 2/' newer/manifest.json
expect_exit 2 "newer format" -- "$USTRAIN" train tiny.toml --set data.path=newer --set run.name=x
expect_output "format_version 2.*upgrade ustrain" "asks for a newer ustrain"
damaged empty && sed -i '/"train": \[/,/\]/c\    "train": [],' empty/manifest.json
expect_exit 2 "empty dataset" -- "$USTRAIN" train tiny.toml --set data.path=empty --set run.name=x
expect_output "train split has no tokens" "says the dataset is empty"
"$USTRAIN" data convert -i corpus -o noval --val-fraction 0 >/dev/null 2>&1
expect_exit 2 "no validation split" -- "$USTRAIN" train tiny.toml --set data.path=noval --set run.name=x
expect_output "no validation split" "says validation needs data"
[[ ! -d runs/x ]] && pass "failed runs write nothing" || fail "a failed run created runs/x"
finish

# Long context: no fixed cap on train.seq_len, the memory plan is the only limit. A dry run of
# 131072 tokens over cp = 8 plans, and `ustrain plan` searches such lengths (2^20 tokens over
# cp = 64 too).
source "$(dirname "$0")/lib/common.bash"

# 150,000 byte tokens: one sequence of 131072 (+ 1 target) fits in the training split.
mkdir -p corpus
for ((i = 0; i < 3000; i++)); do printf 'the quick brown fox %d jumps over the lazy dog\n\n' "$i"; done >corpus/a.txt
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.01 >/dev/null 2>&1 || fail "convert"
tiny_recipe >tiny.toml
long=(--set train.seq_len=131072 --set model.max_seq_len=131072 --set train.micro_batch=1 --set train.global_batch=1
      --set train.eval_interval=0)

expect_exit 0 "a dry run of 131072 tokens over cp = 8 plans" -- "$USTRAIN" train tiny.toml --dry-run "${long[@]}" \
  --set parallel.cp=8
expect_output "context parallelism: 8 ranks; each holds 16384 of the 131072 tokens" "each cp rank holds 16384 tokens"
expect_output "^  activations +[0-9.]+ (KiB|MiB|GiB)" "the plan has its activations"
expect_output "this layout needs 8 processes" "and names the processes it needs"

"$USTRAIN" plan tiny.toml --gpus 8 --json "${long[@]}" --set train.global_batch=8 >plan.json 2>plan.err \
  && pass "plan: 131072 tokens on 8 GPUs" || fail "plan: 131072 tokens on 8 GPUs: $(cat plan.err)"
layouts=$("$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(1 for l in d["layouts"] if l["cp"] == 8 and l["fits"]))' plan.json)
((layouts > 0)) && pass "the search holds cp = 8 layouts that fit ($layouts)" || fail "no cp = 8 layout fits: $layouts"
expect_exit 0 "plan: 2^20 tokens over cp = 64" -- "$USTRAIN" plan tiny.toml --gpus 64 --set parallel.cp=64 \
  --set parallel.tp=1 --set parallel.pp=1 --set train.seq_len=1048576 --set model.max_seq_len=1048576 \
  --set train.micro_batch=1 --set train.global_batch=1 --set train.eval_interval=0
expect_output "^  1 +1 +1 +1 +64 " "plans one sequence over 64 context-parallel ranks"
finish

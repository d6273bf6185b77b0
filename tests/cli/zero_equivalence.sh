# ZeRO end to end under mpiexec: every stage (0-3) at dp = 1, 2 and 4, with and without
# gradient accumulation, gives the per-step losses of the one-process run with the same
# global batch to float32 reassociation (1e-5 relative) for 20 steps; a checkpoint written at
# dp = 4, ZeRO-3 resumes at dp = 2, ZeRO-1 and at dp = 1 (resharded on load) and continues
# with the same losses.
source "$(dirname "$0")/lib/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
launch() { local n=$1; shift; if [[ $n -eq 1 ]]; then "$@"; else timeout 300 mpiexec -n "$n" --oversubscribe --allow-run-as-root "$@"; fi; }

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
readonly global=16 steps=20
# Evaluation every 10 steps runs forward passes (and, at stage 3, their gathers) between steps.
common=(--set train.steps=$steps --set train.global_batch=$global --set train.eval_interval=10
        --set checkpoint.interval=10 --set checkpoint.keep_last=2)

expect_exit 0 "reference: one process, one micro-batch of $global" -- "$USTRAIN" train tiny.toml "${common[@]}" \
  --set train.micro_batch=$global --set run.name=reference
# compare NAME: per-step losses of runs/NAME within 1e-5 relative of the reference.
compare() {
  if [[ $(losses "runs/$1/metrics.jsonl" | wc -l) -eq $steps ]] &&
     paste <(losses runs/reference/metrics.jsonl) <(losses "runs/$1/metrics.jsonl") |
       awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1) bad = 1 } END { exit bad }'; then
    pass "$1 matches the reference at every step"
  else
    fail "$1 differs from the reference: $(paste <(losses runs/reference/metrics.jsonl) <(losses "runs/$1/metrics.jsonl") | head -3 | tr '\n\t' '; ')"
  fi
}

for dp in 1 2 4; do
  for zero in 0 1 2 3; do
    for accum in 1 4; do
      [[ $dp -eq 1 && $zero -eq 0 && $accum -eq 1 ]] && continue
      name=dp$dp-zero$zero-accum$accum
      expect_exit 0 "dp=$dp, ZeRO-$zero, $accum micro-batch(es)" -- launch $dp "$USTRAIN" train tiny.toml "${common[@]}" \
        --set parallel.dp=$dp --set parallel.zero=$zero --set train.micro_batch=$((global / dp / accum)) \
        --set run.name=$name
      compare $name
    done
  done
done
expect_output "data parallelism: 4 ranks, ZeRO stage 3" "the log names the stage"

# Traffic per step counted by the communicator, in units of the fp32 parameters (Psi): the
# Playbook's 2 Psi for stages 0-2 with one micro-batch (stage 0 leaves out the padding after
# the last parameter), between 2 and 3 Psi for stage 3 (the layers forward used last are
# still gathered when backward starts).
psi() { sed -n 's/.*"kind":"train".*"dp_comm_psi":\([-0-9.e+]*\).*/\1/p' "runs/$1/metrics.jsonl" | tail -1; }
for zero in 0 1 2; do
  v=$(psi dp4-zero$zero-accum1)
  awk -v v="$v" 'BEGIN { exit !(v > 1.98 && v < 2.01) }' && pass "ZeRO-$zero moves 2 Psi per step ($v)" ||
    fail "ZeRO-$zero moves $v Psi per step, expected 2"
done
v=$(psi dp4-zero3-accum1)
awk -v v="$v" 'BEGIN { exit !(v > 2.0 && v <= 3.01) }' && pass "ZeRO-3 moves 2 to 3 Psi per step ($v)" ||
  fail "ZeRO-3 moves $v Psi per step, expected 2 to 3"
v=$(psi dp4-zero2-accum4)
awk -v v="$v" 'BEGIN { exit !(v > 4.999 && v < 5.02) }' && pass "ZeRO-2 with 4 micro-batches moves 5 Psi ($v)" ||
  fail "ZeRO-2 with 4 micro-batches moves $v Psi, expected 4 reduce-scatters + 1 all-gather = 5"

# dp = 4, ZeRO-3 checkpoint at step 10: each of the 4 rank files holds a quarter of the state.
ckpt=runs/dp4-zero3-accum1/checkpoints/step-00000010
[[ $(ls "$ckpt"/rank-*.safetensors | wc -l) -eq 4 ]] && pass "four rank files" || fail "rank files: $(ls "$ckpt")"
for target in "2 1" "1 0" "2 3"; do
  read -r dp zero <<<"$target"
  name=resumed-dp$dp-zero$zero
  cp -r runs/dp4-zero3-accum1 "runs/$name"
  expect_exit 0 "resume the dp=4 ZeRO-3 checkpoint at dp=$dp, ZeRO-$zero" -- launch $dp "$USTRAIN" train tiny.toml \
    "${common[@]}" --set parallel.dp=$dp --set parallel.zero=$zero --set train.micro_batch=$((global / dp)) \
    --set run.name=$name --resume "runs/$name/checkpoints/step-00000010"
  expect_output "parallel.dp 4 -> $dp \(the same global batch and state, split differently" "the resharding is reported"
  compare $name
done

# A rank file missing from a sharded checkpoint is named, on every rank, before training.
cp -r runs/dp4-zero3-accum1 runs/broken
rm runs/broken/checkpoints/step-00000010/rank-00002.safetensors
expect_exit 2 "resume with a rank file missing" -- launch 2 "$USTRAIN" train tiny.toml "${common[@]}" \
  --set parallel.dp=2 --set train.micro_batch=8 --set run.name=broken --resume runs/broken/checkpoints/step-00000010
expect_output "rank-00002.safetensors" "the missing file is named"
finish

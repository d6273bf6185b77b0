# Mixed-precision ZeRO under mpiexec: in bf16 the fp32 masters are sharded with the optimizer
# state from stage 1 on and the bf16 compute copy is what the ranks all-gather, so stage 1
# moves 1.5 Psi a step (a reduce-scatter of fp32 gradients, an all-gather of bf16 weights) where
# fp32 moves 2; stage 3 trains in bf16 and fp16; a bf16 ZeRO-3 run resumes bit for bit, and its
# checkpoint resumes at dp = 2, ZeRO-1 and at dp = 1 within bf16's layout tolerance; fp8 trains
# at stages 2 and 3 (its FP8 layers' state follows the weights and gradients that ZeRO binds into
# reused buffers) as at stage 1, moving at stage 3 what fp16 moves.
source "$(dirname "$0")/lib/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
launch() { local n=$1; shift; if [[ $n -eq 1 ]]; then "$@"; else timeout 300 mpiexec -n "$n" --oversubscribe --allow-run-as-root "$@"; fi; }

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
readonly global=16 steps=10
common=(--set train.steps=$steps --set train.global_batch=$global --set train.eval_interval=5
        --set checkpoint.interval=5 --set checkpoint.keep_last=2 --set schedule.decay=constant)
run() {  # run NAME DP ZERO PRECISION [more options]
  local name=$1 dp=$2 zero=$3 precision=$4
  shift 4
  expect_exit 0 "$name: dp=$dp, ZeRO-$zero, $precision" -- launch "$dp" "$USTRAIN" train tiny.toml "${common[@]}" \
    --set parallel.dp="$dp" --set parallel.zero="$zero" --set train.precision="$precision" \
    --set train.micro_batch=$((global / dp)) --set run.name="$name" "$@"
}
# close A B: per-step losses of runs A and B within bf16's layout tolerance (u/4 = 2^-10 relative,
# tests/layout/layout_matrix.py's TOLERANCES).
close() {
  if [[ $(losses "runs/$2/metrics.jsonl" | wc -l) -eq $steps ]] &&
     paste <(losses "runs/$1/metrics.jsonl") <(losses "runs/$2/metrics.jsonl") |
       awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > $1 / 1024) bad = 1 } END { exit bad }'; then
    pass "$2 matches $1 within u/4"
  else
    fail "$2 differs from $1: $(paste <(losses "runs/$1/metrics.jsonl") <(losses "runs/$2/metrics.jsonl") | head -3 | tr '\n\t' '; ')"
  fi
}
psi() { sed -n 's/.*"kind":"train".*"dp_comm_psi":\([-0-9.e+]*\).*/\1/p' "runs/$1/metrics.jsonl" | tail -1; }

run bf16-reference 1 0 bf16
for zero in 1 3; do
  run bf16-dp4-zero$zero 4 $zero bf16
  close bf16-reference bf16-dp4-zero$zero
done
run fp16-reference 1 0 fp16
run fp16-dp2-zero3 2 3 fp16
close fp16-reference fp16-dp2-zero3

# fp8 above stage 1. At dp = 2 stages 1, 2 and 3 sum the same two gradients and compute with the
# same gathered bf16 weights, so their losses are equal bit for bit, which they are only if every
# FP8 GEMM found its own layer's scaling state in ZeRO's buffers (a GEMM that found none would
# run in bf16); and the runs match the one-rank fp8 run within bf16's tolerance (FP8 is bf16
# outside its GEMMs, with the same scales on every layout). Its losses are not bf16's.
run fp8-reference 1 0 fp8
[[ $(losses runs/fp8-reference/metrics.jsonl) != "$(losses runs/bf16-reference/metrics.jsonl)" ]] &&
  pass "fp8 losses differ from bf16's" || fail "fp8 gave bf16's losses"
run fp8-dp2-zero1 2 1 fp8
for zero in 2 3; do
  run fp8-dp2-zero$zero 2 $zero fp8
  [[ -n $(losses runs/fp8-dp2-zero$zero/metrics.jsonl) &&
     $(losses runs/fp8-dp2-zero$zero/metrics.jsonl) == "$(losses runs/fp8-dp2-zero1/metrics.jsonl)" ]] &&
    pass "fp8 ZeRO-$zero gives ZeRO-1's losses bit for bit" || fail "fp8 ZeRO-$zero differs from ZeRO-1"
  close fp8-reference fp8-dp2-zero$zero
done
# Stage 3's gathers move 16-bit weights in fp8 as in fp16 (fp8 adds its amax reduction at every
# stage alike).
run fp16-dp2-zero1 2 1 fp16
fp8_extra=$(awk -v a="$(psi fp8-dp2-zero3)" -v b="$(psi fp8-dp2-zero1)" 'BEGIN { print a - b }')
fp16_extra=$(awk -v a="$(psi fp16-dp2-zero3)" -v b="$(psi fp16-dp2-zero1)" 'BEGIN { print a - b }')
awk -v a="$fp8_extra" -v b="$fp16_extra" 'BEGIN { d = a - b; exit !(a > 0.05 && d < 1e-6 && d > -1e-6) }' &&
  pass "ZeRO-3 adds $fp8_extra Psi per step to ZeRO-1 in fp8, as in fp16" ||
  fail "ZeRO-3 adds $fp8_extra Psi per step to ZeRO-1 in fp8, $fp16_extra in fp16"

# Traffic per step in units of the fp32 parameters: 1 Psi of fp32 gradients reduce-scattered,
# 0.5 Psi of bf16 weights all-gathered.
v=$(psi bf16-dp4-zero1)
awk -v v="$v" 'BEGIN { exit !(v > 1.49 && v < 1.51) }' && pass "bf16 ZeRO-1 moves 1.5 Psi per step ($v)" ||
  fail "bf16 ZeRO-1 moves $v Psi per step, expected 1.5"

# The same layout resumes bit for bit: 5 steps, then 5 more from the step-5 checkpoint.
run bf16-dp4-zero3-halves 4 3 bf16 --set train.steps=5
run bf16-dp4-zero3-halves 4 3 bf16 --resume auto
[[ -n $(losses runs/bf16-dp4-zero3/metrics.jsonl) &&
   $(losses runs/bf16-dp4-zero3/metrics.jsonl) == "$(losses runs/bf16-dp4-zero3-halves/metrics.jsonl)" ]] &&
  pass "bf16 ZeRO-3: 5 + 5 steps equal 10 straight" || fail "bf16 ZeRO-3 resume changed the losses"

# The dp = 4, ZeRO-3 checkpoint resumes under another dp and stage (resharded on load).
for target in "2 1" "1 0"; do
  read -r dp zero <<<"$target"
  name=bf16-resumed-dp$dp-zero$zero
  cp -r runs/bf16-dp4-zero3 "runs/$name"
  run "$name" "$dp" "$zero" bf16 --resume "runs/$name/checkpoints/step-00000005"
  expect_output "parallel.dp 4 -> $dp \(the same global batch and state, split differently" "the resharding is reported"
  close bf16-dp4-zero3 "$name"
done
finish

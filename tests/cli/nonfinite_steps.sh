# Steps whose loss or gradient norm is not finite are skipped, counted and logged; a streak of
# train.max_bad_steps stops training with an error and leaves the last good checkpoint the newest;
# under data parallelism one rank's bad loss makes every rank skip the step. (fp16 gradients that
# overflow: tests/cli/loss_scale.sh.)
source "$(dirname "$0")/lib/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
# field FILE STEP NAME: a train row's field.
field() { "$PYTHON" -c "
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r['kind'] == 'train' and r['step'] == int(sys.argv[2]): print(r[sys.argv[3]])" "$@"; }
check() { [[ $1 == "$2" ]] && pass "$3" || fail "$3: got '$1', expected '$2'"; }

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
common=(--set train.eval_interval=0 --set log.interval=1 --set checkpoint.interval=1 --set checkpoint.keep_last=20)

# One bad step: skipped, counted, logged; training goes on.
expect_exit 0 "a NaN loss at step 3" -- env USTRAIN_TEST_NONFINITE_STEPS=3 "$USTRAIN" train tiny.toml "${common[@]}" \
  --set train.steps=5 --set run.name=one
expect_output "warning step 3: the loss is nan and the gradient norm [0-9.]+: skipped the update \(1 in a row; training stops at train.max_bad_steps = 5\)" \
  "the log says the step was skipped"
expect_output "step 4: finite again after 1 skipped step" "and when training is finite again"
check "$(field runs/one/metrics.jsonl 3 step_applied) $(field runs/one/metrics.jsonl 3 loss)" "0 None" \
  "metrics: step 3 not applied, its loss null"
check "$(field runs/one/metrics.jsonl 3 nonfinite_in_a_row) $(field runs/one/metrics.jsonl 3 nonfinite_steps)" "1 1" \
  "metrics: counted"
check "$(field runs/one/metrics.jsonl 4 step_applied) $(field runs/one/metrics.jsonl 4 nonfinite_in_a_row)" "1 0" \
  "metrics: step 4 applied, the streak over"
check "$(field runs/one/metrics.jsonl 5 nonfinite_steps)" 1 "metrics: the count stays"
[[ ! -d runs/one/checkpoints/step-00000003 && -d runs/one/checkpoints/step-00000004 ]] \
  && pass "no checkpoint during the streak, again after it" || fail "checkpoints: $(ls runs/one/checkpoints)"

# The skipped update changed nothing: a run whose last step is bad saves the weights of the step before.
expect_exit 0 "a bad last step" -- env USTRAIN_TEST_NONFINITE_STEPS=3 "$USTRAIN" train tiny.toml "${common[@]}" \
  --set train.steps=3 --set run.name=last
"$USTRAIN" ckpt export runs/last/checkpoints/step-00000002 hf2 >/dev/null 2>&1 || fail "export step 2"
"$USTRAIN" ckpt export runs/last/checkpoints/step-00000003 hf3 >/dev/null 2>&1 || fail "export step 3"
cmp -s hf2/model.safetensors hf3/model.safetensors && pass "the weights after the bad step are those before it" \
  || fail "the bad step changed the weights"

# A streak of train.max_bad_steps stops training; the newest checkpoint is the last good one.
expect_exit 2 "three bad steps in a row" -- env USTRAIN_TEST_NONFINITE_STEPS=3-9 "$USTRAIN" train tiny.toml \
  "${common[@]}" --set train.steps=10 --set train.max_bad_steps=3 --set run.name=streak
expect_output "error: training stopped at step 5: the last 3 steps had a non-finite loss or gradient norm" \
  "one clear error"
expect_output "newest checkpoint holds the last good state" "says what is kept"
[[ $(readlink runs/streak/checkpoints/latest) == step-00000002 && ! -d runs/streak/checkpoints/step-00000005 ]] \
  && pass "latest is step 2, nothing of the bad steps" || fail "checkpoints: $(ls runs/streak/checkpoints)"
check "$(field runs/streak/metrics.jsonl 5 step_applied) $(field runs/streak/metrics.jsonl 5 nonfinite_in_a_row)" "0 3" \
  "metrics record the last bad step"
expect_exit 0 "resume from the last good checkpoint" -- "$USTRAIN" train tiny.toml "${common[@]}" --set train.steps=6 \
  --set train.max_bad_steps=3 --set run.name=streak --resume auto
expect_output "resumed from runs/streak/checkpoints/step-00000002 at step 2" "continues from step 2"

# Without a checkpoint there is no last good state to go back to: the error does not promise one.
expect_exit 2 "bad steps in a run that saves no checkpoint" -- env USTRAIN_TEST_NONFINITE_STEPS=1-9 "$USTRAIN" train \
  tiny.toml "${common[@]}" --set train.steps=10 --set train.max_bad_steps=3 --set checkpoint.interval=0 \
  --set run.name=nockpt
expect_output "the run has no checkpoint to go back to.*start the run again \(--overwrite\)" \
  "says there is no checkpoint, and to start again"
grep -q "newest checkpoint" "$WORK/out.txt" && fail "promises a checkpoint the run does not have: $(grep newest "$WORK/out.txt")" \
  || pass "promises no checkpoint"

# A real divergence: a learning rate far too high makes the weights overflow; the bad steps
# that follow stop training instead of being applied.
expect_exit 2 "a learning rate of 1e30" -- "$USTRAIN" train tiny.toml "${common[@]}" --set train.steps=20 \
  --set optim.lr=1e30 --set train.grad_clip=0 --set schedule.warmup_steps=0 --set run.name=diverged
expect_output "training stopped at step [0-9]+: the last 5 steps had a non-finite loss or gradient norm" \
  "stops after train.max_bad_steps"

# Data parallelism: rank 1 alone sees a NaN loss at step 3; both ranks skip the step.
expect_exit 0 "one rank's bad loss at dp = 2" -- timeout 300 mpiexec --oversubscribe --allow-run-as-root \
  -n 1 "$USTRAIN" train tiny.toml "${common[@]}" --set train.steps=4 --set parallel.dp=2 --set run.name=dp : \
  -n 1 env USTRAIN_TEST_NONFINITE_STEPS=3 "$USTRAIN" train tiny.toml "${common[@]}" --set train.steps=4 \
  --set parallel.dp=2 --set run.name=dp
check "$(field runs/dp/metrics.jsonl 3 step_applied) $(field runs/dp/metrics.jsonl 4 step_applied)" "0 1" \
  "rank 0, whose loss was finite, skipped step 3 too"
# fp16 on the CPU: a non-finite loss (the forward's, which loss scaling cannot help) skips the
# step and leaves the loss scale alone.
expect_exit 0 "fp16: a NaN loss at step 3" -- env USTRAIN_TEST_NONFINITE_STEPS=3 "$USTRAIN" train tiny.toml \
  "${common[@]}" --set train.steps=5 --set train.precision=fp16 --set run.name=fp16
check "$(field runs/fp16/metrics.jsonl 3 step_applied) $(field runs/fp16/metrics.jsonl 4 step_applied)" "0 1" \
  "fp16: step 3 skipped, step 4 applied"
check "$(field runs/fp16/metrics.jsonl 3 loss_scale) $(field runs/fp16/metrics.jsonl 4 loss_scale)" "65536 65536" \
  "fp16: the loss scale stays"
finish

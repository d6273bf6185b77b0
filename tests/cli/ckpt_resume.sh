# Exact resume: N steps straight give the same losses, bit for bit, as N/2 steps, a restart with
# --resume, and N/2 more (gradient accumulation 2; the data position mid-epoch, in the first and
# the second epoch). Then the recipe-change rules, --resume auto, retention, and generate.
source "$(dirname "$0")/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "data convert"
evals() { sed -n 's/.*"kind":"eval".*"val_loss":\([-0-9.e+]*\).*/\1/p' "$1"; }
same_losses() {  # same_losses WHAT FILE_A FILE_B [LAST_N]
  local a b
  a=$(losses "$2" | tail -n "${4:-+1}"); b=$(losses "$3" | tail -n "${4:-+1}")
  if [[ -n $a && $a == "$b" ]]; then pass "$1 ($(wc -l <<<"$a") losses equal)"; else fail "$1: losses differ"; diff <(echo "$a") <(echo "$b") | head -5; fi
}

# About 87 steps make an epoch (23k tokens in windows of 33, 8 windows a step).
constant=(--set schedule.decay=constant)
expect_exit 0 "120 steps straight" -- "$USTRAIN" train tiny.toml --set run.name=straight --set train.steps=120 "${constant[@]}"
expect_exit 0 "first 60 steps" -- "$USTRAIN" train tiny.toml --set run.name=halves --set train.steps=60 "${constant[@]}"
expect_exit 0 "resume --resume auto for 60 more" -- \
  "$USTRAIN" train tiny.toml --set run.name=halves --set train.steps=120 --resume auto "${constant[@]}"
expect_output "resumed from runs/halves/checkpoints/step-00000060 at step 60" "reports where it resumed"
expect_output "train.steps 60 -> 120 \(harmless\)" "reports the harmless change of train.steps"
same_losses "60 + 60 steps equal 120 straight" runs/straight/metrics.jsonl runs/halves/metrics.jsonl
[[ $(evals runs/straight/metrics.jsonl) == "$(evals runs/halves/metrics.jsonl)" ]] \
  && pass "validation losses equal too" || fail "validation losses differ after resume"

# Mixed precision on the CPU resumes exactly too: the 16-bit weight copies are rebuilt from the
# fp32 masters, and fp16's loss scale travels in the checkpoint.
for prec in bf16 fp16; do
  p=(--set train.precision=$prec "${constant[@]}")
  expect_exit 0 "$prec: 40 steps straight" -- "$USTRAIN" train tiny.toml --set run.name=$prec-straight --set train.steps=40 "${p[@]}"
  expect_exit 0 "$prec: 20 steps" -- "$USTRAIN" train tiny.toml --set run.name=$prec-halves --set train.steps=20 "${p[@]}"
  expect_exit 0 "$prec: resumed for 20 more" -- \
    "$USTRAIN" train tiny.toml --set run.name=$prec-halves --set train.steps=40 --resume auto "${p[@]}"
  same_losses "$prec: 20 + 20 steps equal 40 straight" runs/$prec-straight/metrics.jsonl runs/$prec-halves/metrics.jsonl
done
[[ $(losses runs/bf16-straight/metrics.jsonl) != "$(losses runs/straight/metrics.jsonl | head -n 40)" ]] \
  && pass "bf16 losses differ from fp32's (the 16-bit path ran)" || fail "bf16 gave fp32's losses"

# fp8 too: delayed scaling's amax histories and scales travel in the checkpoint (a history of 8
# steps has wrapped by step 20); the other recipes keep no state.
fp8_runs=(
  "delayed --set train.fp8_recipe=delayed --set train.fp8_amax_history=8 --set train.fp8_grad_format=e4m3"
  "blockwise --set train.fp8_recipe=blockwise"
)
for fp8_run in "${fp8_runs[@]}"; do
  read -r name -a keys <<<"$fp8_run"
  p=(--set train.precision=fp8 "${keys[@]}" "${constant[@]}")
  expect_exit 0 "fp8 $name: 40 steps straight" -- "$USTRAIN" train tiny.toml --set run.name=fp8-$name-straight --set train.steps=40 "${p[@]}"
  expect_exit 0 "fp8 $name: 20 steps" -- "$USTRAIN" train tiny.toml --set run.name=fp8-$name-halves --set train.steps=20 "${p[@]}"
  expect_exit 0 "fp8 $name: resumed for 20 more" -- \
    "$USTRAIN" train tiny.toml --set run.name=fp8-$name-halves --set train.steps=40 --resume auto "${p[@]}"
  same_losses "fp8 $name: 20 + 20 steps equal 40 straight" runs/fp8-$name-straight/metrics.jsonl runs/fp8-$name-halves/metrics.jsonl
  [[ $(losses runs/fp8-$name-straight/metrics.jsonl) != "$(losses runs/bf16-straight/metrics.jsonl)" ]] \
    && pass "fp8 $name losses differ from bf16's (the FP8 GEMMs ran)" || fail "fp8 $name gave bf16's losses"
done
"$USTRAIN" ckpt inspect runs/fp8-delayed-halves/checkpoints/latest >inspect.txt 2>&1
grep -q "fp8_scaling" inspect.txt && pass "the checkpoint lists the fp8 scaling state" \
  || fail "no fp8 scaling state in the checkpoint: $(head -5 inspect.txt)"
expect_exit 0 "a bf16 run starts from an fp8 checkpoint's weights" -- "$USTRAIN" train tiny.toml \
  --set run.name=from-fp8 --set train.steps=2 --set train.precision=bf16 \
  --set checkpoint.init_from=runs/fp8-delayed-halves/checkpoints/latest
expect_exit 2 "resuming an fp8 checkpoint in bf16 is refused" -- "$USTRAIN" train tiny.toml \
  --set run.name=fp8-delayed-halves --set train.steps=42 --set train.precision=bf16 "${constant[@]}" --resume auto \
  --force-resume
expect_output "fp8_recipe = \"delayed\"" "says how the checkpoint was trained"

# Periodic checkpoints of the cosine-schedule run, each resumed into another run directory.
ckpt=(--set train.steps=120 --set checkpoint.interval=20 --set checkpoint.keep_last=2 --set checkpoint.keep_every=40)
expect_exit 0 "120 steps with a checkpoint every 20" -- "$USTRAIN" train tiny.toml --set run.name=periodic "${ckpt[@]}"
[[ $(cd runs/periodic/checkpoints && echo step-*) == "step-00000040 step-00000080 step-00000100 step-00000120" ]] \
  && pass "retention keeps the last 2 and every 40th" || fail "retention kept: $(ls runs/periodic/checkpoints)"
[[ $(readlink runs/periodic/checkpoints/latest) == step-00000120 ]] && pass "latest names the newest" \
  || fail "latest -> $(readlink runs/periodic/checkpoints/latest)"
for step in 40 100; do
  expect_exit 0 "resume from step $step into another run" -- "$USTRAIN" train tiny.toml --set run.name="from$step" \
    "${ckpt[@]}" --resume "runs/periodic/checkpoints/$(printf 'step-%08d' "$step")"
  same_losses "resumed from step $step" runs/periodic/metrics.jsonl "runs/from$step/metrics.jsonl" $((120 - step))
done

# The recipe-change rules.
expect_exit 2 "a changed seed needs --force-resume" -- \
  "$USTRAIN" train tiny.toml --set run.name=periodic "${ckpt[@]}" --set train.steps=130 --set run.seed=9 --resume auto
expect_output "run.seed 1234 -> 9" "names the key and both values"
expect_output "--force-resume" "says how to continue anyway"
expect_exit 2 "a changed model shape is refused even when forced" -- "$USTRAIN" train tiny.toml --set run.name=periodic \
  "${ckpt[@]}" --set train.steps=130 --set model.ffn_hidden=96 --resume auto --force-resume
expect_output "model.ffn_hidden" "names the shape key"
expect_exit 0 "forced resume with another learning rate" -- "$USTRAIN" train tiny.toml --set run.name=periodic \
  "${ckpt[@]}" --set train.steps=125 --set optim.lr=1e-3 --set log.interval=7 --resume auto --force-resume
expect_output "optim.lr 0.003 -> 0.001 \(breaks exact resume\)" "the forced change is reported"
expect_output "log.interval 5 -> 7 \(harmless\)" "the harmless change is reported"
[[ $(losses runs/periodic/metrics.jsonl | wc -l) -eq 125 ]] && pass "metrics hold each step once" \
  || fail "metrics hold $(losses runs/periodic/metrics.jsonl | wc -l) train lines"

expect_exit 2 "a new run over an existing one is refused" -- "$USTRAIN" train tiny.toml --set run.name=straight
expect_output "--resume auto" "the refusal suggests --resume auto"
expect_exit 0 "--resume auto without a checkpoint starts afresh" -- \
  "$USTRAIN" train tiny.toml --set run.name=fresh --set train.steps=10 --resume auto
expect_output "no checkpoint in runs/fresh yet" "says it starts from the beginning"
expect_exit 0 "--resume auto of a finished run does nothing" -- \
  "$USTRAIN" train tiny.toml --set run.name=fresh --set train.steps=10 --resume auto
expect_output "complete at step 10" "says the run is complete"
expect_exit 2 "--resume of a missing checkpoint" -- "$USTRAIN" train tiny.toml --set run.name=x --resume nowhere
expect_output "nowhere" "names the path"

expect_exit 0 "generate from a checkpoint" -- \
  "$USTRAIN" generate --checkpoint runs/periodic/checkpoints/step-00000040 --prompt "the quick" --tokens 20 --temperature 0
expect_output "^the quick" "generate continues the prompt"
expect_exit 0 "generate from a run directory" -- "$USTRAIN" generate --run runs/straight --prompt "the" --tokens 10
expect_exit 2 "generate needs a checkpoint" -- "$USTRAIN" generate --prompt "x"
finish

# fp16 loss scaling: gradients that overflow skip the step and halve the scale until they fit;
# the summary counts the steps applied and skipped; a run that applied none of its steps is an
# error naming the loss scale; train.loss_scale_init is bounded by 2^32.
source "$(dirname "$0")/lib/common.bash"
export OPENBLAS_NUM_THREADS=1

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
fp16=(--set train.precision=fp16 --set train.eval_interval=0 --set log.interval=1)

# fp16: gradients that overflow (a loss scale of 2^32 takes the scaled gradients past fp16's
# 65504) skip the step and halve the scale until they fit; training then goes on, and after
# train.loss_scale_growth_interval clean steps in a row the scale doubles.
expect_exit 0 "fp16: overflowing gradients" -- "$USTRAIN" train tiny.toml "${fp16[@]}" --set train.steps=40 \
  --set train.loss_scale_init=4294967296 --set train.loss_scale_growth_interval=3 \
  --set checkpoint.interval=0 --set run.name=overflow
expect_output "step 1: fp16 gradients overflowed at loss scale 4294967296; skipped the update, the scale is now 2147483648" \
  "fp16: the overflow is logged with the new scale"
verdict=$("$PYTHON" - runs/overflow/metrics.jsonl <<'PY'
import json, math, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"]
first = next((i for i, r in enumerate(rows) if r["step_applied"] == 1), None)
if first is None or first == 0:
    sys.exit(print(f"no skipped-then-applied sequence (first applied index {first})"))
scale = 2.0 ** 32
for r in rows[:first]:  # skipped: each halves the scale
    scale /= 2
    if r["step_applied"] != 0 or r["loss_scale"] != scale:
        sys.exit(print(f"step {r['step']}: applied {r['step_applied']}, scale {r['loss_scale']}, want 0 and {scale}"))
clean = 0
for r in rows[first:]:  # from here: every third clean step doubles it, an overflow halves it
    if r["step_applied"]:
        clean += 1
        if clean == 3:
            scale, clean = scale * 2, 0
    else:
        scale, clean = scale / 2, 0
    if r["loss_scale"] != scale:
        sys.exit(print(f"step {r['step']}: scale {r['loss_scale']}, want {scale}"))
last = rows[-1]
if not math.isfinite(last["loss"]) or last["loss"] >= rows[first]["loss"]:
    sys.exit(print(f"the loss did not fall: {rows[first]['loss']} -> {last['loss']}"))
print(f"ok {first} skipped")
PY
)
[[ $verdict == ok* ]] && pass "fp16: skipped and halved until the gradients fit, then doubled after 3 clean steps ($verdict)" \
  || fail "fp16 loss scaling: $verdict"
expect_output "done: 40 steps \([1-9][0-9]* applied, [1-9][0-9]* skipped\)" "fp16: the summary counts the applied and skipped steps"

# A run whose every step overflowed trained nothing: an error naming the loss scale and what to
# change, no summary, no final checkpoint, and run.json records the error.
expect_exit 2 "fp16: every step overflows" -- "$USTRAIN" train tiny.toml "${fp16[@]}" --set train.steps=5 \
  --set train.loss_scale_init=4294967296 --set run.name=allskipped
expect_output "none of the 5 steps this run took \(steps 1-5\) was applied" "says no step was applied"
expect_output "overflowed at 5 of them, the loss scale falling from 4294967296 to 134217728" "names the loss scale"
expect_output "lower train.loss_scale_init \(134217728 or less" "says what to change"
grep -q "done:" "$WORK/out.txt" && fail "a run that applied nothing printed a summary" || pass "no summary"
[[ ! -e runs/allskipped/checkpoints/step-00000005 ]] && pass "no final checkpoint" \
  || fail "a checkpoint of a run that changed nothing"
grep -q '"status": "error"' runs/allskipped/run.json && pass "run.json records the error" \
  || fail "run.json: $(cat runs/allskipped/run.json)"

# A loss scale past 2^32 (1e38: all 40 steps of a run would overflow) is refused up front.
expect_exit 2 "train.loss_scale_init = 1e38" -- "$USTRAIN" train tiny.toml "${fp16[@]}" --set train.loss_scale_init=1e38 \
  --dry-run
expect_output "train.loss_scale_init = 1e\+38 is not allowed: it must be in \[1, 4294967296\]" "names the key and the bound"
expect_exit 2 "train.loss_scale_init = inf" -- "$USTRAIN" train tiny.toml "${fp16[@]}" --set train.loss_scale_init=inf \
  --dry-run
finish

# ustrain bench: the GEMM table, and a short training run whose first (warm-up) step is left
# out of the rates it prints.
source "$(dirname "$0")/lib/common.bash"

make_corpus
"$USTRAIN" data convert -i corpus -o data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert the corpus"
tiny_recipe >tiny.toml
expect_exit 0 "bench" -- "$USTRAIN" bench tiny.toml --steps 3
expect_output "layer +shape \(M, N, K\) +forward +grad in +grad w$" "the GEMM table names each column once"
expect_output "training 4 steps into .*tiny-bench \(the first warms up and is not timed\); no checkpoint is saved" \
  "says it warms up and saves no checkpoint"
expect_output "over 3 timed steps" "rates are over the timed steps"

# The per-step time printed is the mean of steps 2-4 in the run's metrics, not of 1-4.
metrics=runs/tiny-bench/metrics.jsonl
expected=$(awk '
  function field(name) { return match($0, "\"" name "\":[-0-9.e+]+") ? substr($0, RSTART + length(name) + 3, RLENGTH - length(name) - 3) + 0 : 0 }
  /"kind":"train"/ && field("step") >= 2 { total += field("data_s") + field("forward_s") + field("backward_s") + field("optimizer_s"); n++ }
  END { if (n == 3) printf "%.4f", 1000 * total / n }' "$metrics")
reported=$(sed -n 's/.*bench: per step \([0-9.]*\) ms.*/\1/p' "$WORK/out.txt")
if [[ -n $expected && -n $reported ]] && awk -v a="$expected" -v b="$reported" 'BEGIN { d = a - b; exit !(d < 0.051 && d > -0.051) }'; then
  pass "per step $reported ms = the mean of the timed steps ($expected ms)"
else
  fail "per step '$reported' ms, but steps 2-4 of $metrics average '$expected' ms"
fi
[[ -z $(ls -A runs/tiny-bench/checkpoints 2>/dev/null) ]] && pass "no checkpoint written" || fail "bench wrote a checkpoint"
! grep -q "the mask needs" "$WORK/out.txt" && pass "no mask line without a mask" || fail "a mask line without a mask"

# A sliding window of 64 of 512 tokens: the share of causal attention's FLOPs the mask needs
# (about 2 W / S) and the rate of the work done; MFU keeps counting causal attention.
expect_exit 0 "bench with a window" -- "$USTRAIN" bench tiny.toml --steps 1 --set model.sliding_window=64 \
  --set train.seq_len=512 --set model.max_seq_len=512 --set train.micro_batch=1 --set train.global_batch=1
expect_output "bench: the mask needs [0-9.]+% of causal attention's FLOPs \(a sliding window of 64 tokens\); counting the work done, training achieved [0-9.]+ GFLOP/s" \
  "names the mask's share of causal attention and the work's rate"
share=$(sed -n "s/.*the mask needs \([0-9.]*\)% of causal.*/\1/p" "$WORK/out.txt")
awk -v f="$share" 'BEGIN { exit !(f > 25 && f < 60) }' && pass "the window needs less than causal attention ($share%)" \
  || fail "the window's share is '$share'%"
finish

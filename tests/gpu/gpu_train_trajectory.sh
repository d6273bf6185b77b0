# The same tiny model trained 20 steps on the CPU (fp32, the reference) and on the GPU in fp32
# and in bf16, from the same seed and data: the per-step losses of the GPU fp32 run stay within
# 1e-3 relative of the CPU's (only summation order differs), those of the bf16 run within 5e-2
# (bf16 activations and compute weights), and the bf16 loss falls.
# Exit 77 (a skip, for CTest) when no GPU is visible, or 1 under USTRAIN_REQUIRE_GPU=1.
#   bash tests/gpu/gpu_train_trajectory.sh PATH/TO/ustrain SOURCE_DIR
source "$(dirname "$0")/../cli/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
expect_exit 0 "data convert" -- "$USTRAIN" data convert --input corpus --output data --val-fraction 0.1
steps=20
common=(--set "train.steps=$steps" --set train.eval_interval=0 --set log.interval=5)

# train NAME ARGS...: a run into runs/NAME, its output in NAME.log.
train() {
  local name=$1; shift
  "$USTRAIN" train tiny.toml "${common[@]}" --set run.name="$name" "$@" >"$name.log" 2>&1
}

train gpu-fp32 --set device.type=cuda
status=$?
if ((status != 0)) && grep -q "no CUDA GPU" gpu-fp32.log; then
  if [[ ${USTRAIN_REQUIRE_GPU:-} == 1 ]]; then  # gpu-check.sh: a skip would be a false pass
    echo "FAIL: USTRAIN_REQUIRE_GPU is set but: $(grep -m1 "no CUDA GPU" gpu-fp32.log)"
    exit 1
  fi
  echo "SKIP: no CUDA GPU visible: $(grep -m1 "no CUDA GPU" gpu-fp32.log)"
  exit 77
fi
((status == 0)) && pass "GPU fp32 run" || { fail "GPU fp32 run: exit $status"; cat gpu-fp32.log; }
train cpu-fp32 --set device.type=cpu && pass "CPU fp32 run" || { fail "CPU fp32 run"; cat cpu-fp32.log; }
train gpu-bf16 --set device.type=cuda --set train.precision=bf16 && pass "GPU bf16 run" ||
  { fail "GPU bf16 run"; cat gpu-bf16.log; }

# compare NAME TOLERANCE: every step of runs/NAME within TOLERANCE relative of the CPU's loss.
compare() {
  local name=$1 tol=$2
  if [[ $(losses "runs/$name/metrics.jsonl" 2>/dev/null | wc -l) -ne $steps ||
        $(losses runs/cpu-fp32/metrics.jsonl 2>/dev/null | wc -l) -ne $steps ]]; then
    fail "$name: expected $steps logged steps from it and from the CPU run"
    return
  fi
  local report
  report=$(paste <(losses runs/cpu-fp32/metrics.jsonl) <(losses "runs/$name/metrics.jsonl") |
    awk -v tol="$tol" '{ d = ($2 - $1) / $1; if (d < 0) d = -d; if (NR == 1 || d > worst) { worst = d; at = NR }
                         if (d > tol) bad++ }
                       END { printf "worst relative difference %.3g at step %d", worst, at; exit bad > 0 }')
  if (($? == 0)); then pass "$name matches the CPU at every step within $tol ($report)"; else
    fail "$name differs from the CPU by more than $tol ($report); step, CPU loss, $name loss:"
    paste <(losses runs/cpu-fp32/metrics.jsonl) <(losses "runs/$name/metrics.jsonl") | cat -n
  fi
}
compare gpu-fp32 1e-3
compare gpu-bf16 5e-2

mapfile -t l < <(losses runs/gpu-bf16/metrics.jsonl 2>/dev/null)
if ((${#l[@]} == steps)) && awk -v a="${l[0]}" -v b="${l[steps - 1]}" 'BEGIN { exit !(b < a - 0.5) }'; then
  pass "bf16 loss falls (${l[0]} -> ${l[steps - 1]})"
else
  fail "bf16 loss did not fall by more than 0.5 nats over $steps steps: ${l[0]:-?} -> ${l[steps - 1]:-?}"
fi
finish

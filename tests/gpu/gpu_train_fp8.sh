# FP8 training on the GPU against the CPU's emulation of it: the same tiny model (head size 16,
# so that every FP8 GEMM size is a multiple of 16) trained 20 steps with train.precision = "fp8"
# on both, for each scaling recipe, from the same seed and data. Both quantise to the same FP8
# codes where their bf16 inputs agree; the bf16 ops around the GEMMs (attention, norms) round in
# a different order on the GPU, which moves some inputs by a bf16 unit and so some codes by one
# FP8 step. The per-step losses must stay within 2e-2 relative of the CPU's (a wrong operand
# layout or scale gives losses that differ from the first step), and the loss must fall.
# Exit 77 (a skip, for CTest) when no GPU is visible, or 1 under USTRAIN_REQUIRE_GPU=1.
#   bash tests/gpu/gpu_train_fp8.sh PATH/TO/ustrain SOURCE_DIR
source "$(dirname "$0")/../cli/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
expect_exit 0 "data convert" -- "$USTRAIN" data convert --input corpus --output data --val-fraction 0.1
steps=20
common=(--set "train.steps=$steps" --set train.eval_interval=0 --set log.interval=5 --set model.n_heads=2
        --set model.n_kv_heads=1 --set train.precision=fp8)

# train NAME ARGS...: a run into runs/NAME, its output in NAME.log.
train() {
  local name=$1; shift
  "$USTRAIN" train tiny.toml "${common[@]}" --set run.name="$name" "$@" >"$name.log" 2>&1
}

# compare NAME REFERENCE TOLERANCE: every step of runs/NAME within TOLERANCE relative of REFERENCE's.
compare() {
  local name=$1 ref=$2 tol=$3
  if [[ $(losses "runs/$name/metrics.jsonl" 2>/dev/null | wc -l) -ne $steps ||
        $(losses "runs/$ref/metrics.jsonl" 2>/dev/null | wc -l) -ne $steps ]]; then
    fail "$name: expected $steps logged steps from it and from $ref"
    return
  fi
  local report
  report=$(paste <(losses "runs/$ref/metrics.jsonl") <(losses "runs/$name/metrics.jsonl") |
    awk -v tol="$tol" '{ d = ($2 - $1) / $1; if (d < 0) d = -d; if (NR == 1 || d > worst) { worst = d; at = NR }
                         if (d > tol) bad++ }
                       END { printf "worst relative difference %.3g at step %d", worst, at; exit bad > 0 }')
  if (($? == 0)); then pass "$name matches $ref at every step within $tol ($report)"; else
    fail "$name differs from $ref by more than $tol ($report); step, $ref loss, $name loss:"
    paste <(losses "runs/$ref/metrics.jsonl") <(losses "runs/$name/metrics.jsonl") | cat -n
  fi
}

first=1
for recipe in delayed current rowwise blockwise; do
  train "gpu-$recipe" --set device.type=cuda --set train.fp8_recipe=$recipe
  status=$?
  if ((first)) && ((status != 0)) && grep -q "no CUDA GPU" "gpu-$recipe.log"; then
    if [[ ${USTRAIN_REQUIRE_GPU:-} == 1 ]]; then  # gpu-check.sh: a skip would be a false pass
      echo "FAIL: USTRAIN_REQUIRE_GPU is set but: $(grep -m1 "no CUDA GPU" "gpu-$recipe.log")"
      exit 1
    fi
    echo "SKIP: no CUDA GPU visible: $(grep -m1 "no CUDA GPU" "gpu-$recipe.log")"
    exit 77
  fi
  first=0
  ((status == 0)) && pass "GPU fp8 $recipe run" || { fail "GPU fp8 $recipe run: exit $status"; cat "gpu-$recipe.log"; }
  train "cpu-$recipe" --set device.type=cpu --set train.fp8_recipe=$recipe && pass "CPU fp8 $recipe run" ||
    { fail "CPU fp8 $recipe run"; cat "cpu-$recipe.log"; }
  compare "gpu-$recipe" "cpu-$recipe" 2e-2
  mapfile -t l < <(losses "runs/gpu-$recipe/metrics.jsonl" 2>/dev/null)
  if ((${#l[@]} == steps)) && awk -v a="${l[0]}" -v b="${l[steps - 1]}" 'BEGIN { exit !(b < a - 0.5) }'; then
    pass "GPU fp8 $recipe loss falls (${l[0]} -> ${l[steps - 1]})"
  else
    fail "GPU fp8 $recipe loss did not fall by more than 0.5 nats over $steps steps: ${l[0]:-?} -> ${l[steps - 1]:-?}"
  fi
done
finish

#!/usr/bin/env bash
# Data-parallel benchmark on this machine's CPUs: for 2 and 4 MPI ranks and each ZeRO stage,
# trains a small model with communication overlapped with compute and without, and prints
#   - the median step time, and its ratio to stage 0 at the same rank count;
#   - the gradient-reduction time left exposed with and without overlap, and the fraction of
#     it that overlap hides under backward: 1 - exposed(overlap) / exposed(no overlap);
#   - stage 3's exposed wait for parameter gathers;
#   - the data-parallel traffic per step counted by the communicator, in units of Psi (the
#     fp32 parameters): the Playbook expects 2 for stages 0-2 and at most 3 for stage 3
#     (less when the layers forward used last are still gathered when backward starts);
#   - the per-rank memory plan for parameters, gradients, optimizer state and communication
#     buffers, and rank 0's measured peak resident memory.
# Usage: scripts/bench-zero.sh [build/app/ustrain] [steps]
set -euo pipefail
ustrain=$(realpath "${1:-build/app/ustrain}")
steps=${2:-12}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

for i in $(seq 1 3000); do echo "document $i: the quick brown fox jumps over the lazy dog"; echo; done >corpus.txt
"$ustrain" data convert --input corpus.txt --output data --val-fraction 0.05 >/dev/null 2>&1
cat >bench.toml <<'TOML'
[run]
name = "bench"
[model]
vocab_size = 257
d_model = 256
n_layers = 4
n_heads = 8
n_kv_heads = 4
ffn_hidden = 688
max_seq_len = 128
[data]
path = "data"
[train]
micro_batch = 2
seq_len = 128
eval_interval = 0
[checkpoint]
interval = 0
[log]
interval = 1000
TOML

# field NAME FILE: the values of a numeric field of the training lines, one per line,
# without the first two (warm-up) steps.
field() { sed -n "s/.*\"kind\":\"train\".*\"$1\":\([-0-9.e+]*\).*/\1/p" "$2" | tail -n +3; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# plan CATEGORY LOG: the per-rank bytes the memory plan printed for a category.
plan() { sed -n "s/.*  $1 *\([0-9.]* [KMG]*i*B\)\$/\1/p" "$2" | head -1; }
peak() { sed -n 's/.*peak resident \([0-9.]* [KMG]*i*B\).*/\1/p' "$1" | head -1; }

run() {  # ranks zero overlap -> writes runs/NAME/metrics.jsonl and NAME.log
  local n=$1 zero=$2 overlap=$3 name=r$1-z$2-o$3
  mpiexec -n "$n" --oversubscribe --allow-run-as-root "$ustrain" train bench.toml --set train.steps="$steps" \
    --set parallel.dp="$n" --set train.global_batch=$((2 * n)) --set parallel.zero="$zero" \
    --set parallel.overlap_comm="$overlap" --set run.name="$name" >"$name.log" 2>&1 ||
    { echo "run $name failed:"; tail -20 "$name.log"; exit 1; }
}

echo "ZeRO benchmark: $(getconf _NPROCESSORS_ONLN) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $steps steps per run"
printf '%-5s %-5s %9s %8s %11s %11s %7s %9s %7s | %-10s %-10s %-10s %-10s %-10s\n' ranks stage "step ms" "vs z0" \
  "reduce ms" "no-ovl ms" hidden "gather ms" "traffic" params grads optimizer comm "peak RSS"
for n in 2 4; do
  base=
  for zero in 0 1 2 3; do
    run "$n" "$zero" true
    run "$n" "$zero" false
    m=runs/r$n-z$zero-otrue/metrics.jsonl
    step=$(field step_s "$m" | median)
    [[ -z $base ]] && base=$step
    exposed=$(field grad_reduce_wait_s "$m" | median)
    exposed_off=$(field grad_reduce_wait_s runs/r$n-z$zero-ofalse/metrics.jsonl | median)
    gather=$(field param_gather_wait_s "$m" | median)
    psi=$(field dp_comm_psi "$m" | median)
    log=r$n-z$zero-otrue.log
    awk -v n="$n" -v z="$zero" -v s="$step" -v b="$base" -v e="$exposed" -v o="$exposed_off" -v g="$gather" \
      -v p="$psi" -v pa="$(plan parameters "$log")" -v gr="$(plan gradients "$log")" \
      -v op="$(plan optimizer "$log")" -v co="$(plan communication "$log")" -v rss="$(peak "$log")" 'BEGIN {
        hidden = o > 0 ? 1 - e / o : 0; if (hidden < 0) hidden = 0
        printf "%-5d %-5d %9.1f %8.2f %11.2f %11.2f %6.0f%% %9.2f %6.2fΨ | %-10s %-10s %-10s %-10s %-10s\n",
          n, z, 1000 * s, s / b, 1000 * e, 1000 * o, 100 * hidden, 1000 * g, p, pa, gr, op, co, rss }'
  done
done

# Pipeline parallelism from the command line: what --dry-run prints for pp = 2 and 4 under
# every schedule (each rank's layers, memory plan and peak in-flight micro-batches, the
# simulated bubble against its closed form, a timeline row per rank), the recipes refused
# before any work, and a short run of every schedule at pp = 2 under mpiexec against the
# one-rank run (final loss, pp_comm_bytes, pp_wait_s). The layout matrix (tests/layout)
# covers equivalence broadly; this is the CLI path.
source "$(dirname "$0")/lib/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"

# count_lines REGEX N DESCRIPTION: the last output has N lines matching the extended regex.
count_lines() {
  local got
  got=$(grep -cE -- "$1" "$WORK/out.txt")
  [[ $got == "$2" ]] && pass "$3" || { fail "$3: $got lines match /$1/, expected $2"; cat "$WORK/out.txt"; }
}

# --- dry runs: 8 layers, 8 micro-batches of 1 per step -------------------------------------
eight=(--set model.n_layers=8 --set train.micro_batch=1 --set train.global_batch=8)
# The simulator's bubble is idle time over compute time summed over the ranks, with F = B = W
# = 1 (a fused backward costs 2): (P - 1) / M for afab and 1f1b, (P - 1) / (V M) interleaved,
# (P - 1) / (3 M) for ZB-H1 with M >= P.
closed_form() {  # SCHEDULE P M V
  awk -v s="$1" -v p="$2" -v m="$3" -v v="$4" 'BEGIN {
    b = (p - 1) / m; if (s == "interleaved") b = (p - 1) / (v * m); if (s == "zero-bubble") b = (p - 1) / (3 * m)
    printf "%.3f", b }'
}
for pp in 2 4; do
  for schedule in afab 1f1b interleaved zero-bubble; do
    v=1; [[ $schedule == interleaved ]] && v=2
    what="pp=$pp $schedule"
    expect_exit 0 "dry run, $what" -- "$USTRAIN" train tiny.toml "${eight[@]}" --set parallel.pp=$pp \
      --set parallel.pp_schedule=$schedule --set parallel.virtual_stages=$v --dry-run
    bubble=$(closed_form $schedule $pp 8 $v)
    expect_output "^pipeline parallelism: $pp ranks x $v chunk\(s\), $schedule schedule, 8 micro-batches per step: bubble $bubble of the compute time" \
      "$what: the bubble is the closed form's $bubble"
    count_lines "^pipeline rank [0-9]+: stage" $pp "$what: a line per pipeline rank"
    count_lines "^the memory plan below is one rank's \(pipeline rank [0-9]+," $pp "$what: a memory plan per rank"
    count_lines "^rank [0-9]+ +\|" $pp "$what: a timeline row per rank"
    expect_output "^$schedule schedule, $pp rank\(s\) x $v chunk\(s\), 8 micro-batches;.* bubble $bubble of the compute time" \
      "$what: the timeline's legend"
    # Every rank's stages hold 8 / (P V) consecutive layers; stage s = chunk * P + rank.
    per=$((8 / (pp * v)))
    for ((r = 0; r < pp; r++)); do
      line=$(grep -E "^pipeline rank $r: " "$WORK/out.txt")
      for ((c = 0; c < v; c++)); do
        s=$((c * pp + r)) first=$((s * per)) last=$((s * per + per - 1))
        layers="layers $first-$last"
        ((per == 1)) && layers="layer $first"
        [[ $line == *"stage $s: $layers"[,\ ]* ]] || fail "$what: rank $r lacks stage $s ($layers): $line"
      done
      [[ $r -eq 0 && $line != *"+ embedding"* ]] && fail "$what: rank 0 lacks the embedding: $line"
      [[ $r -eq $((pp - 1)) && $line != *"final norm, head and loss"* ]] && fail "$what: the last rank lacks the head: $line"
      # In flight on rank r (micro-batches times chunks): every micro-batch for afab, P - r for
      # 1f1b (its warm-up forwards and one more), at most V M otherwise.
      peak=$(sed -n 's/.*; peak in-flight micro-batch activations \([0-9]*\) (one per micro-batch and chunk)$/\1/p' <<<"$line")
      want=""
      [[ $schedule == afab ]] && want=8
      [[ $schedule == 1f1b ]] && want=$((pp - r))
      if [[ -z $peak ]]; then fail "$what: rank $r prints no peak: $line"
      elif [[ -n $want && $peak != "$want" ]]; then fail "$what: rank $r peak $peak, expected $want"
      elif ((peak < 1 || peak > 8 * v)); then fail "$what: rank $r peak $peak outside 1..$((8 * v))"
      fi
    done
    pass "$what: layers, embedding, head and peaks per rank"
  done
done

# --- refusals: exit status 2, one message naming the numbers, nothing written --------------
refuse() {  # DESCRIPTION MESSAGE-REGEX -- --set ...
  local what=$1 message=$2; shift 3
  expect_exit 2 "refused: $what" -- "$USTRAIN" train tiny.toml "${eight[@]}" "$@"
  expect_output "$message" "refused: $what: the message names the numbers"
  count_lines "error" 1 "refused: $what: one message"
}
refuse "layers not divisible by pp * virtual_stages" \
  "model.n_layers = 6 is not divisible by parallel.pp \* parallel.virtual_stages = 2 \* 2 = 4" -- \
  --set model.n_layers=6 --set parallel.pp=2 --set parallel.pp_schedule=interleaved --set parallel.virtual_stages=2
refuse "interleaved with fewer micro-batches than ranks" \
  "micro-batches per step \(2\) must be a multiple of 4.*= 8 / \(4 \* 1\)" -- \
  --set parallel.pp=4 --set parallel.pp_schedule=interleaved --set parallel.virtual_stages=2 --set train.micro_batch=4 \
  --set parallel.dp=1
refuse "interleaved with micro-batches not a multiple of pp" \
  "micro-batches per step \(6\) must be a multiple of 4.*= 6 / \(1 \* 1\)" -- \
  --set parallel.pp=4 --set parallel.pp_schedule=interleaved --set parallel.virtual_stages=2 --set train.global_batch=6 \
  --set parallel.dp=1
refuse "interleaved with one virtual stage" "needs parallel.virtual_stages >= 2 \(got 1\)" -- \
  --set parallel.pp=2 --set parallel.pp_schedule=interleaved --set parallel.virtual_stages=1
refuse "virtual stages without interleaving" 'parallel.virtual_stages = 2 needs parallel.pp_schedule = "interleaved"' -- \
  --set parallel.pp=2 --set parallel.pp_schedule=1f1b --set parallel.virtual_stages=2
refuse "zero-bubble with ZeRO-2" 'parallel.pp_schedule = "zero-bubble" with parallel.zero = 2' -- \
  --set parallel.pp=2 --set parallel.pp_schedule=zero-bubble --set parallel.zero=2
refuse "zero-bubble with selective recompute" 'parallel.pp_schedule = "zero-bubble" with train.recompute = "selective"' -- \
  --set parallel.pp=2 --set parallel.pp_schedule=zero-bubble --set train.recompute=selective
[[ ! -d runs ]] && pass "refused recipes wrote nothing" || fail "a refused recipe created runs/"

# --- short runs: every schedule at pp = 2 against one rank ---------------------------------
# 4 layers (2 x 2 chunks for interleaving), 4 micro-batches of 2 tokens x 32 per step.
run=(--set model.n_layers=4 --set train.micro_batch=2 --set train.global_batch=8 --set train.steps=4
     --set train.eval_interval=4 --set schedule.warmup_steps=1 --set log.interval=1 --set checkpoint.interval=0 --set log.tensorboard=false)
last_loss() { losses "runs/$1/metrics.jsonl" | tail -1; }
field() { sed -n "s/.*\"kind\":\"train\".*\"$2\":\([-0-9.e+]*\).*/\1/p" "runs/$1/metrics.jsonl"; }
expect_exit 0 "one rank" -- "$USTRAIN" train tiny.toml "${run[@]}" --set run.name=pp1
reference=$(last_loss pp1)
[[ $(field pp1 pp_comm_bytes | sort -u) == 0 ]] && pass "one rank sends nothing over pp" || fail "pp1 pp_comm_bytes: $(field pp1 pp_comm_bytes)"
# One activation of micro_batch x seq_len x d_model floats per micro-batch and chunk boundary
# that pipeline rank 0 sends: M at V = 1; with V = 2, stage 0 -> 1 and 2 -> 3 forward plus the
# gradient of stage 2 to stage 1, 3 M.
activation=$((2 * 32 * 32 * 4))
for schedule in afab 1f1b interleaved zero-bubble; do
  v=1 sends=4
  [[ $schedule == interleaved ]] && v=2 sends=12
  name=pp2-$schedule
  expect_exit 0 "pp=2 $schedule" -- timeout 120 mpiexec -n 2 --oversubscribe --allow-run-as-root "$USTRAIN" train \
    tiny.toml "${run[@]}" --set parallel.pp=2 --set parallel.pp_schedule=$schedule --set parallel.virtual_stages=$v \
    --set run.name=$name
  expect_output "pipeline rank 0: waited [0-9.]+ ms \([0-9.]+% of the step\)" "$name: the first step reports rank 0's wait"
  # Slots are taken and given back in program order, so the executor uses the simulator's peak.
  slots=$(sed -n 's/.*activation slots per chunk at most \(.*\) (planned \(.*\))$/\1|\2/p' "$WORK/out.txt")
  [[ -n $slots && ${slots%|*} == "${slots#*|}" ]] && pass "$name: rank 0 used the planned activation slots ($slots)" ||
    fail "$name: activation slots used|planned: '$slots'"
  got=$(last_loss $name)
  awk -v a="$reference" -v b="$got" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b != "" && d <= 1e-5 * a) }' &&
    pass "$name: final loss $got matches one rank's $reference" || fail "$name: final loss '$got', one rank $reference"
  bytes=$(field $name pp_comm_bytes | sort -u)
  [[ $bytes == $((sends * activation)) ]] && pass "$name: pp_comm_bytes $bytes per step" ||
    fail "$name: pp_comm_bytes '$bytes', expected $((sends * activation))"
  paste <(field $name pp_wait_s) <(field $name step_s) |
    awk 'NF != 2 || $1 < 0 || $1 > $2 { bad = 1 } END { exit bad || NR != 4 }' &&
    pass "$name: 0 <= pp_wait_s <= step_s at every step" ||
    fail "$name: pp_wait_s / step_s: $(paste <(field $name pp_wait_s) <(field $name step_s) | tr '\n\t' '; ')"
done
finish

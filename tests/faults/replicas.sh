# Silent data corruption: a bit flipped in one rank's parameters (USTRAIN_INJECT_FAULT) is
# caught by the replica check within train.replica_check_interval steps or before the next
# checkpoint, whichever comes first; every rank stops with status 2 naming the rank(s) and the
# step; no checkpoint is written after the flip, and --resume auto continues from the last clean
# one to the same losses as a run never corrupted. Layouts: dp4 (the odd rank is named), dp2 x
# tp2 and ep2 (two replicas: both named), dp2 with ZeRO-1, and hybrid sharding at ZeRO-3 (the
# blocks' shards compared). With train.replica_check_grads, a bit flipped in one rank's reduced
# gradients (gradflip) is caught before the update uses it.
source "$(dirname "$0")/lib/faults.bash"

setup_tiny_run
common=(--set train.eval_interval=0 --set log.interval=1 --set train.steps=10 --set checkpoint.interval=4
        --set checkpoint.keep_last=20)
launch() { timeout 300 mpiexec --oversubscribe --allow-run-as-root -n "$@"; }
# Every rank reports for itself: mpiexec would otherwise end the others at the first exit.
each_rank=(--mca orte_abort_on_non_zero_status 0 --mca orte_allowed_exit_without_sync 1)
wrap=(bash -c '"$@"; echo "rank ${OMPI_COMM_WORLD_RANK} exited with status $?"' rank)

# corrupted CASE RUN NP RANK STEP PATTERN LAST_CHECKPOINT ARGS...: trains the layout ARGS on NP
# ranks clean, then again with a bit flipped on RANK after STEP (in the gradients with flip=gradflip); expects every rank to stop with
# status 2 and a message matching PATTERN, the newest checkpoint to be LAST_CHECKPOINT ("none":
# no checkpoint yet), and --resume auto to end at the clean run's loss, bit for bit.
corrupted() {
  local name=$1 run=$2 np=$3 rank=$4 step=$5 pattern=$6 last=$7
  shift 7
  launch "$np" "$USTRAIN" train tiny.toml "${common[@]}" --set run.name="$run-clean" "$@" >"clean-$run.log" 2>&1 \
    || { fail "$name: the clean run"; tail -5 "clean-$run.log"; }
  env USTRAIN_INJECT_FAULT="${flip:-bitflip}:rank=$rank:step=$step" timeout 300 mpiexec --oversubscribe --allow-run-as-root \
    "${each_rank[@]}" -n "$np" "${wrap[@]}" "$USTRAIN" train tiny.toml "${common[@]}" --set run.name="$run" "$@" \
    >"$run.log" 2>&1
  local latest
  latest=$(readlink "runs/$run/checkpoints/latest")
  [[ $(grep -c "exited with status 2" "$run.log") == "$np" && $(grep -cE -- "$pattern" "$run.log") == "$np" ]] &&
    ! grep -Eq "internal error|Segmentation|terminate called|Aborted" "$run.log"
  check "$name: every rank stops with status 2 and the message" 2 $? "$run.log" "$pattern"
  [[ ${latest:-none} == "$last" ]]
  check "$name: the newest checkpoint is ${last} (got ${latest:-none})" 2 $?
  launch "$np" "$USTRAIN" train tiny.toml "${common[@]}" --set run.name="$run" "$@" --resume auto \
    >"resume-$run.log" 2>&1
  [[ $? == 0 && -n $(losses "runs/$run-clean/metrics.jsonl") &&
     $(losses "runs/$run/metrics.jsonl" | tail -n 1) == "$(losses "runs/$run-clean/metrics.jsonl" | tail -n 1)" ]]
  check "$name: --resume auto ends at the clean run's loss" 0 $? "resume-$run.log"
}

# dp4, checks every 3 steps: the flip after step 5 is caught by the check at step 6.
corrupted "dp4: a bit flipped on rank 2 after step 5" dp4 4 2 5 \
  "^error: replica check after step 6: the parameters of rank 2 differ from its data-parallel replicas" \
  step-00000004 --set parallel.dp=4 --set train.micro_batch=2 --set train.replica_check_interval=3
# dp2 x tp2: the flip after step 5 is caught before step 8's checkpoint (interval 100).
corrupted "dp2 x tp2: a bit flipped on rank 1 after step 5" dp2tp2 4 1 5 \
  "^error: replica check after step 8: ranks 1 and 3 hold replicas of the same parameters that differ" \
  step-00000004 --set parallel.dp=2 --set parallel.tp=2
# ZeRO-1: a flip in the gathered copy of the parameters another rank updates.
corrupted "dp2 ZeRO-1: a bit flipped on rank 1 after step 4" zero1 2 1 4 \
  "^error: replica check after step 4: ranks 0 and 1 hold replicas" none \
  --set parallel.dp=2 --set parallel.zero=1 --set train.replica_check_interval=2 --set checkpoint.interval=5
# ep2 (MoE, dp2): the dense replicas are compared; the expert store is held once per expert.
corrupted "ep2: a bit flipped on rank 0 after step 2" ep2 2 0 2 \
  "^error: replica check after step 2: ranks 0 and 1 hold replicas" none \
  --set parallel.dp=2 --set parallel.ep=2 --set model.n_experts=4 \
  --set train.replica_check_interval=2 --set checkpoint.interval=5
# dp4 with the gradients checked too: a bit flipped in rank 2's reduced gradients of step 6 is
# caught by the check of step 6, before the update.
flip=gradflip corrupted "dp4: a bit flipped in rank 2's reduced gradients of step 6" dp4-grads 4 2 6 \
  "^error: replica check of step 6: the reduced gradients of rank 2 differ from its data-parallel replicas" \
  step-00000004 --set parallel.dp=4 --set train.micro_batch=2 --set train.replica_check_interval=3 \
  --set train.replica_check_grads=true

# Hybrid sharding, dp4 in blocks of 2 at ZeRO-3: no value is held twice inside a block, but rank
# 2's shard is rank 0's in the other block, and their replicate group compares them.
corrupted "dp4 dp_shard 2 ZeRO-3: a bit flipped on rank 2 after step 5" hsdp 4 2 5 \
  "^error: replica check after step 6: ranks 0 and 2 hold replicas of the same parameters that differ" \
  step-00000004 --set parallel.dp=4 --set parallel.dp_shard=2 --set parallel.zero=3 --set train.micro_batch=2 \
  --set train.replica_check_interval=3

# A malformed fault is refused before anything runs.
fault "USTRAIN_INJECT_FAULT malformed" 2 "^error: USTRAIN_INJECT_FAULT: 'bitflip:rank=x' " -- \
  env USTRAIN_INJECT_FAULT="bitflip:rank=x" "$USTRAIN" train tiny.toml "${common[@]}" --set run.name=malformed
finish

# Slurm end to end: a real one-node cluster (munged, slurmctld, slurmd; lib/local_slurm.bash)
# runs scripts/slurm/train.sbatch through sbatch with 4 data-parallel ranks (ZeRO-2) to completion.
# A second, identical job gets Slurm's preemption signal (SIGUSR1 to the batch script) while
# it trains: it must checkpoint, requeue itself, resume from that checkpoint and finish with
# every step logged once and the losses of the uninterrupted job.
#   bash tests/slurm/slurm_dp.sh PATH/TO/ustrain SOURCE_DIR        (needs root)
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../cli/lib/common.bash"
LOCAL_SLURM_LIFETIME=840  # the daemons end themselves before CTest's 900 s timeout, even if this is killed
source "$here/lib/local_slurm.bash"
# Stop the cluster however the test ends; a second signal must not cut the cleanup short.
cleanup() {
  trap '' INT TERM HUP
  local_slurm_stop
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

missing=$(local_slurm_missing)
if [[ -n $missing ]]; then
  fail "Slurm is not installed (missing: $missing); run scripts/setup.sh to install slurm-wlm and munge"
  finish
fi
if [[ $(id -u) -ne 0 ]]; then
  fail "this test starts Slurm's daemons and must run as root"
  finish
fi

# About 2 ms a step with 4 ranks on 2 cores: a job trains for 15-20 s, and the signal, sent
# once 20 steps are logged, reaches the ranks well before the end.
steps=8000
make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >convert.log 2>&1 ||
  { fail "data convert"; cat convert.log; finish; }
# No periodic checkpoints: the one the signal makes is the only one a requeued job can resume from.
run_opts=(--set parallel.dp=4 --set parallel.zero=2 --set train.micro_batch=2 --set "train.steps=$steps" --set train.eval_interval=500
          --set log.interval=100 --set checkpoint.interval=0)

local_slurm_start "$WORK/slurm" || { fail "could not start a local Slurm cluster"; finish; }
pass "local Slurm cluster up ($(sinfo -h -o '%D node, %c CPUs, partition %P'))"

# What the jobs inherit (sbatch exports the submitter's environment): the binary under test,
# Open MPI's consent to root, and a private temporary directory.
export USTRAIN_BIN=$USTRAIN OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TMPDIR=$WORK/slurm/tmp
# Four ranks share two cores: a rank waiting in a collective gives up its core instead of
# spinning, so that steps, and this script's polling, stay quick.
export OMPI_MCA_mpi_yield_when_idle=1

# submit NAME: submits a 4-rank job training runs/NAME; prints the job id.
submit() {
  timeout 30 sbatch --parsable --chdir="$WORK" --job-name="$1" --nodes=1 --ntasks-per-node=4 --cpus-per-task=1 \
    "$SOURCE_DIR/scripts/slurm/train.sbatch" tiny.toml "${run_opts[@]}" --set "run.name=$1"
}
job_field() { timeout 10 scontrol show job "$1" 2>/dev/null | grep -oE "(^| )$2=[^ ]*" | head -1 | cut -d= -f2-; }
# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND until it succeeds; fails after SECONDS.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    if ((SECONDS >= deadline)); then fail "gave up waiting for $what"; return 1; fi
    sleep 0.2
  done
}
requeued_or_ended() { [[ $(job_field "$1" Restarts) -ge 1 ]] || job_ended "$1"; }
job_ended() { [[ $(job_field "$1" JobState) =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)$ ]]; }
steps_logged() { local n; n=$(grep -c '"kind":"train"' "runs/$1/metrics.jsonl" 2>/dev/null); echo "${n:-0}"; }
# training_or_ended JOB NAME: runs/NAME has 20 steps logged, or the job has ended already.
training_or_ended() { (($(steps_logged "$2") >= 20)) || job_ended "$1"; }
# show_failure JOB: what a failing check needs to be understood.
show_failure() {
  timeout 10 scontrol show job "$1" | sed 's/^/  /'
  tail -n 30 "ustrain-$1.log"
  local_slurm_logs
}
# check_completed JOB NAME: the job ended COMPLETED (exit 0) with every step logged once.
check_completed() {
  local state exit_code
  state=$(job_field "$1" JobState) exit_code=$(job_field "$1" ExitCode)
  if [[ $state == COMPLETED && $exit_code == 0:0 ]]; then pass "job $1 ($2) COMPLETED, exit code $exit_code"
  else fail "job $1 ($2) ended $state, exit code $exit_code"; show_failure "$1"; fi
  if cmp -s <(sed -n 's/.*"kind":"train","step":\([0-9]*\).*/\1/p' "runs/$2/metrics.jsonl") <(seq 1 "$steps"); then
    pass "$2: metrics.jsonl holds steps 1..$steps once each"
  else
    fail "$2: metrics.jsonl does not hold steps 1..$steps once each ($(steps_logged "$2") train lines)"
  fi
}

# 1. A data-parallel job runs to completion.
started=$SECONDS
job1=$(submit plain) || { fail "sbatch refused the job"; finish; }
wait_for 180 "job $job1 to end" job_ended "$job1"
check_completed "$job1" plain
cp "ustrain-$job1.log" out.txt
expect_output "4 data-parallel ranks" "job $job1 ran 4 data-parallel ranks"
expect_output "no checkpoint in runs/plain yet" "job $job1 started with --resume auto and found no checkpoint"
echo "job $job1 took $((SECONDS - started)) s"
((failures)) && { echo "the plain job failed: the preempted one would too"; finish; }

# 2. The same job, preempted while it trains: Slurm signals the batch script, as --signal=B:
#    does before the time limit.
started=$SECONDS
job2=$(submit preempted) || { fail "sbatch refused the job"; finish; }
if wait_for 90 "job $job2 to log 20 steps" training_or_ended "$job2" preempted && ! job_ended "$job2"; then
  timeout 10 scancel --batch --signal=USR1 "$job2" && pass "sent SIGUSR1 to job $job2 at step $(steps_logged preempted)"
  # The job stops, requeues itself and waits out Slurm's delay before a requeued job may start
  # again (AuthInfo=cred_expire in lib/local_slurm.bash; 120 s by default).
  wait_for 60 "job $job2 to be requeued" requeued_or_ended "$job2" &&
    echo "job $job2 after the signal: $(job_field "$job2" JobState), reason $(job_field "$job2" Reason)"
  wait_for 240 "job $job2 to end" job_ended "$job2"
fi
check_completed "$job2" preempted
cp "ustrain-$job2.log" out.txt
[[ $(job_field "$job2" Restarts) == 1 ]] && pass "job $job2 ran twice (Restarts=1)" \
  || fail "job $job2 restarts: $(job_field "$job2" Restarts), expected 1"
expect_output "SIGUSR1 .*asking ustrain to checkpoint" "the batch script passed SIGUSR1 on"
expect_output "stopped by SIGUSR1 after step [0-9]+, checkpoint runs/preempted/checkpoints/step-" \
  "ustrain checkpointed on SIGUSR1"
expect_output "requeueing job $job2" "the batch script requeued the job"
stopped=$(sed -n 's/.*stopped by SIGUSR1 after step \([0-9]*\).*/\1/p' out.txt | head -1)
if [[ -n $stopped ]] && ((stopped < steps)); then
  pass "it stopped mid-run, after step $stopped of $steps"
  expect_output "resumed from runs/preempted/checkpoints/step-0*$stopped at step $stopped" \
    "the requeued job resumed from that checkpoint"
else
  fail "the job did not stop before its last step (stopped after step '${stopped}')"
fi
reports=$(grep -o "stopped by SIGUSR1 after step [0-9]*" out.txt | sort | uniq -c | sed 's/^ *//')
[[ $reports == "4 stopped by SIGUSR1 after step $stopped" ]] && pass "all 4 ranks stopped after step $stopped" \
  || fail "the ranks did not stop together: $(echo "$reports" | tr '\n' ';')"
cmp -s <(losses runs/plain/metrics.jsonl) <(losses runs/preempted/metrics.jsonl) &&
  pass "the preempted job's losses equal the uninterrupted job's" || fail "losses differ after the requeue"
echo "job $job2 took $((SECONDS - started)) s, the requeue included"
finish

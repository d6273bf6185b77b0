# Several ranks under mpiexec: ranks launched with different recipes or commands stop before
# any work; a rank stopped (kill -STOP) or killed (kill -9) in the middle of training is named
# by the others, who exit with that message within 60 s (CI: with parallel.comm_timeout_s = 5,
# the full suite with the defaults).
source "$(dirname "$0")/lib/faults.bash"

setup_tiny_run
dp2=(--set parallel.dp=2 --set train.steps=100000 --set train.eval_interval=0 --set log.interval=1)
full && timeouts=() || timeouts=(--set parallel.comm_timeout_s=5)
# Every rank reports for itself: mpirun would otherwise stop the job at the first exit.
each_rank() {
  timeout 120 mpiexec --oversubscribe --allow-run-as-root --mca orte_abort_on_non_zero_status 0 \
    --mca orte_allowed_exit_without_sync 1 "$@"
}

wrap=(bash -c '"$@"; echo "rank ${OMPI_COMM_WORLD_RANK} exited with status $?"' rank)
each_rank -n 1 "${wrap[@]}" "$USTRAIN" train tiny.toml --set parallel.dp=2 : -n 1 "${wrap[@]}" "$USTRAIN" train \
  tiny.toml --set parallel.dp=2 --set run.seed=99 >seeds.log 2>&1
[[ $(grep -c "^error: the ranks of this job disagree on run.seed (rank 0: 1234; rank 1: 99)" seeds.log) == 2 &&
   $(grep -c "exited with status 2" seeds.log) == 2 && ! -d runs ]]
check "ranks with different run.seed: both refuse, nothing written" \
  "$(sed -n 's/^rank 0 exited with status //p' seeds.log)" $? seeds.log

# One rank trains, the other benchmarks: named as a difference of command, not of build.
each_rank -n 1 "${wrap[@]}" "$USTRAIN" train tiny.toml --set parallel.dp=2 : -n 1 "${wrap[@]}" "$USTRAIN" bench \
  tiny.toml --set parallel.dp=2 --steps 1 >commands.log 2>&1
[[ $(grep -c "^error: the ranks of this job disagree on the command (rank 0: ustrain train; rank 1: ustrain bench)" \
     commands.log) == 2 && $(grep -c "exited with status 2" commands.log) == 2 ]]
check "one rank trains, one benchmarks: both refuse, naming the command" \
  "$(sed -n 's/^rank 0 exited with status //p' commands.log)" $? commands.log

# One rank checks with --dry-run, the other trains: named as a difference of command too.
each_rank -n 1 "${wrap[@]}" "$USTRAIN" train tiny.toml --set parallel.dp=2 --dry-run : -n 1 "${wrap[@]}" \
  "$USTRAIN" train tiny.toml --set parallel.dp=2 >dry.log 2>&1
[[ $(grep -c "^error: the ranks of this job disagree on the command (rank 0: ustrain train --dry-run; rank 1: ustrain train)" \
     dry.log) == 2 && $(grep -c "exited with status 2" dry.log) == 2 && ! -d runs ]]
check "one rank with --dry-run, one training: both refuse, naming the command" \
  "$(sed -n 's/^rank 0 exited with status //p' dry.log)" $? dry.log

# stop_rank SIGNAL NAME: trains on two ranks, sends SIGNAL to rank 1 once steps are being
# taken, and checks that rank 0 exits with status 2 naming rank 1, within 60 s.
stop_rank() {
  local signal=$1 name=$2 job m pid started elapsed rc
  rm -rf runs/tiny
  each_rank -n 2 "${wrap[@]}" "$USTRAIN" train tiny.toml "${dp2[@]}" "${timeouts[@]}" >job.log 2>&1 &
  job=$!
  for _ in $(seq 600); do grep -q '"step":3,' runs/tiny/metrics.jsonl 2>/dev/null && break; sleep 0.1; done
  pid=$(rank_pid "$job" 1)
  if [[ -z $pid ]]; then fail "$name: rank 1 not found"; kill "$job"; wait "$job"; return; fi
  started=$SECONDS
  kill "-$signal" "$pid"
  # Rank 0 reports; the stopped rank is then ended, so that mpiexec can finish.
  for _ in $(seq 1200); do grep -q "rank 0 exited" job.log && break; sleep 0.1; done
  elapsed=$((SECONDS - started))
  kill -KILL "$pid" 2>/dev/null
  wait "$job"
  rc=$(sed -n 's/^rank 0 exited with status //p' job.log)
  cp job.log "$WORK/out.txt"
  local ok=0
  [[ $rc == 2 ]] && ((elapsed <= 60)) && grep -q "^error: .*rank 1 did not answer within 5 s" job.log || ok=1
  check "$name: rank 0 names it after ${elapsed} s (limit 60)" "${rc:-none}" $ok job.log
  ((ok == 0)) || tail -5 job.log
}
stop_rank STOP "kill -STOP rank 1"
stop_rank KILL "kill -9 rank 1"
finish

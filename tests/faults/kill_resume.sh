# kill -9 at random moments of a run that saves every step, then `--resume auto`: every
# resumed run must end with exactly the weights and optimizer state (the rank file, bit for
# bit) and the losses of a run never interrupted. CI: 3 trials; full: 20 (FAULT_TRIALS).
source "$(dirname "$0")/lib/faults.bash"

setup_tiny_run
trials=${FAULT_TRIALS:-$(full && echo 20 || echo 3)}
save_often=(--set checkpoint.interval=1 --set checkpoint.keep_last=2 --set train.steps=20)
start=$(date +%s%N)
"$USTRAIN" train tiny.toml --set run.name=reference "${save_often[@]}" >reference.log 2>&1 || fail "reference run"
run_ms=$((($(date +%s%N) - start) / 1000000))
final=checkpoints/step-00000020/rank-00000.safetensors

RANDOM=${FAULT_SEED:-15}
for ((trial = 1; trial <= trials; trial++)); do
  rm -rf runs/killed
  delay=$(((RANDOM * 32768 + RANDOM) % run_ms))  # milliseconds: anywhere from start-up to the end
  "$USTRAIN" train tiny.toml --set run.name=killed "${save_often[@]}" >killed.log 2>&1 &
  pid=$!
  sleep "$((delay / 1000)).$(printf '%03d' $((delay % 1000)))"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  killed_rc=$?
  "$USTRAIN" train tiny.toml --set run.name=killed "${save_often[@]}" --resume auto >resume.log 2>&1
  rc=$?
  same=1
  cmp -s "runs/reference/$final" "runs/killed/$final" || same=0
  cmp -s <(losses runs/reference/metrics.jsonl) <(losses runs/killed/metrics.jsonl) || same=0
  name="kill -9 after ${delay} of ${run_ms} ms (exit $killed_rc), resume: bit-identical"
  [[ $rc -eq 0 && $same -eq 1 ]]
  check "$name" "$rc" $? resume.log "resumed from|starting the run from the beginning|the run is complete"
done
finish

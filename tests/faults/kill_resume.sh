# kill -9 at random moments of a run that saves every step, then `--resume auto`: every
# resumed run must end with exactly the weights and optimizer state (the rank file, bit for
# bit) and the losses of a run never interrupted. CI: 3 trials; full: 20 (FAULT_TRIALS).
source "$(dirname "$0")/lib/faults.bash"

setup_tiny_run
trials=${FAULT_TRIALS:-$(full && echo 20 || echo 3)}
save_often=(--set checkpoint.interval=1 --set checkpoint.keep_last=2 --set train.steps=20)
"$USTRAIN" train tiny.toml --set run.name=reference "${save_often[@]}" >reference.log 2>&1 || fail "reference run"
final=checkpoints/step-00000020/rank-00000.safetensors

# Each trial waits for a random step (0: during start-up) to be logged, then a random part of
# a step more, so that kills land before, between and inside saves.
RANDOM=${FAULT_SEED:-15}
for ((trial = 1; trial <= trials; trial++)); do
  rm -rf runs/killed
  step=$((RANDOM % 20)) extra=$((RANDOM % 100))
  "$USTRAIN" train tiny.toml --set run.name=killed "${save_often[@]}" >killed.log 2>&1 &
  pid=$!
  if ((step == 0)); then
    sleep "0.$((RANDOM % 10))"
  else
    for _ in $(seq 600); do
      grep -q "\"step\":$step," runs/killed/metrics.jsonl 2>/dev/null || ! kill -0 "$pid" 2>/dev/null && break
      sleep 0.02
    done
  fi
  sleep "0.$(printf '%03d' "$extra")"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  killed_rc=$?
  "$USTRAIN" train tiny.toml --set run.name=killed "${save_often[@]}" --resume auto >resume.log 2>&1
  rc=$?
  same=1
  cmp -s "runs/reference/$final" "runs/killed/$final" || same=0
  cmp -s <(losses runs/reference/metrics.jsonl) <(losses runs/killed/metrics.jsonl) || same=0
  name="kill -9 at step $step + $extra ms (exit $killed_rc), resume: bit-identical"
  [[ $rc -eq 0 && $same -eq 1 ]]
  check "$name" "$rc" $? resume.log "resumed from|starting the run from the beginning|the run is complete"
done
finish

# Preemption: SIGTERM, SIGUSR1 (Slurm's warning before a time limit) and a first SIGINT make
# training save a checkpoint at the next step boundary and exit with status 3; `--resume auto`
# then continues exactly: the losses equal those of an uninterrupted run.
source "$(dirname "$0")/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "data convert"
long=(--set train.steps=400 --set train.eval_interval=100)
"$USTRAIN" train tiny.toml --set run.name=reference "${long[@]}" >reference.log 2>&1 || fail "reference run"

# train_until_signal NAME SIGNAL: start a run, send SIGNAL once 40 steps are logged, wait for it.
train_until_signal() {
  "$USTRAIN" train tiny.toml --set run.name="$1" "${long[@]}" >"$1.log" 2>&1 &
  local pid=$! tries=0
  until (( $(losses "runs/$1/metrics.jsonl" 2>/dev/null | wc -l) >= 40 )) || ((tries++ > 3000)); do sleep 0.01; done
  kill -s "$2" "$pid"
  wait "$pid"
}

for sig in TERM USR1 INT; do
  name=stop_$sig
  train_until_signal "$name" "$sig"
  rc=$?
  cp "$name.log" out.txt
  [[ $rc -eq 3 ]] && pass "SIG$sig: exit status 3" || { fail "SIG$sig: exit status $rc, expected 3"; tail -5 out.txt; }
  expect_output "stopped by SIG$sig after step [0-9]+, checkpoint runs/$name/checkpoints/step-" "SIG$sig: says where it stopped"
  expect_output "--resume auto" "SIG$sig: says how to continue"
  stopped=$(losses "runs/$name/metrics.jsonl" | wc -l)
  saved=$(readlink "runs/$name/checkpoints/latest")
  [[ $saved == "$(printf 'step-%08d' "$stopped")" ]] && pass "SIG$sig: checkpoint of the last step ($saved)" \
    || fail "SIG$sig: checkpoint $saved after $stopped logged steps"
  (( stopped < 400 )) && pass "SIG$sig: stopped early (step $stopped)" || fail "SIG$sig: did not stop early"
  expect_exit 0 "SIG$sig: resume" -- "$USTRAIN" train tiny.toml --set run.name="$name" "${long[@]}" --resume auto
  cmp -s <(losses runs/reference/metrics.jsonl) <(losses "runs/$name/metrics.jsonl") \
    && pass "SIG$sig: resumed run equals the uninterrupted one" || fail "SIG$sig: losses differ after resume"
done
finish

# Crash safety: SIGKILL at every point of a save (USTRAIN_TEST_KILL_AT, core/checkpoint/faults.h)
# and at random moments leaves the previous checkpoint complete and `latest` naming a complete
# one; `--resume auto` then finishes the run with exactly the losses of an uninterrupted run.
source "$(dirname "$0")/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "data convert"
"$USTRAIN" train tiny.toml --set run.name=reference >reference.log 2>&1 || fail "reference run"

# Every step-N directory has its manifest, `latest` resolves to one, nothing half-written remains.
consistent() {
  local dir=runs/$1/checkpoints d
  [[ -d $dir ]] || return 0
  for d in "$dir"/step-*; do
    [[ -e $d ]] || continue
    [[ $d == *.tmp || $d == *.deleting ]] && continue
    [[ -f $d/manifest.json && -f $d/rank-00000.safetensors ]] || { echo "incomplete $d"; return 1; }
  done
  if [[ -L $dir/latest ]]; then [[ -f $dir/latest/manifest.json ]] || { echo "latest dangles"; return 1; }; fi
}
# resume_and_compare NAME: finish the run with --resume auto; its losses must equal the reference.
resume_and_compare() {
  if ! "$USTRAIN" train tiny.toml --set run.name="$1" "${save_often[@]}" --resume auto >resume.log 2>&1; then
    fail "$2: resume failed"; tail -3 resume.log; return
  fi
  [[ -z $(ls -d runs/"$1"/checkpoints/*.tmp runs/"$1"/checkpoints/*.deleting 2>/dev/null) ]] \
    || fail "$2: leftovers remain after the resumed run"
  if cmp -s <(losses runs/reference/metrics.jsonl) <(losses runs/"$1"/metrics.jsonl); then pass "$2: exact after resume"
  else fail "$2: losses differ from the uninterrupted run"; fi
}

save_often=(--set checkpoint.interval=3 --set checkpoint.keep_last=1)
for point in stage rank-file-half rank-file manifest publish latest retention; do
  rm -rf runs/killed
  USTRAIN_TEST_KILL_AT="$point:3" "$USTRAIN" train tiny.toml --set run.name=killed "${save_often[@]}" >kill.log 2>&1 &
  wait $!  # (waiting on a background job keeps bash from reporting the kill on the console)
  rc=$?
  if [[ $rc -ne 137 ]]; then fail "kill at $point: exit $rc, expected 137 (SIGKILL)"; continue; fi
  if why=$(consistent killed); then pass "killed at $point: checkpoints consistent"; else fail "killed at $point: $why"; fi
  "$USTRAIN" ckpt inspect runs/killed >inspect.log 2>&1 && pass "killed at $point: a checkpoint loads" \
    || { fail "killed at $point: no loadable checkpoint"; tail -2 inspect.log; }
  resume_and_compare killed "killed at $point"
done

# SIGKILL from outside at random moments of a run that saves after every step.
save_often=(--set checkpoint.interval=1 --set checkpoint.keep_last=2)
RANDOM=7
for attempt in 1 2 3 4 5 6 7 8; do
  rm -rf runs/random
  "$USTRAIN" train tiny.toml --set run.name=random "${save_often[@]}" >random.log 2>&1 &
  pid=$!
  sleep "0.$((RANDOM % 30 + 5))"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  if why=$(consistent random); then pass "random kill $attempt: checkpoints consistent"
  else fail "random kill $attempt: $why"; fi
  resume_and_compare random "random kill $attempt"
done
finish

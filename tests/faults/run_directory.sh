# The run directory: a second trainer on a run that is training is refused with the first
# one's host and pid, and the first one's saves survive it; the lock is free again once its
# holder is killed; a checkpoint directory that cannot be saved into is refused before the
# first step; a run.lock that is a symbolic link is refused, its target untouched; a torn line
# in metrics.jsonl is gone after a resume.
source "$(dirname "$0")/lib/faults.bash"

setup_tiny_run
# Long enough to be still training while the others try, however fast the machine.
slow=(--set train.steps=1000000 --set checkpoint.interval=20 --set checkpoint.keep_last=3)

# Two trainers on one run directory.
"$USTRAIN" train tiny.toml "${slow[@]}" >first.log 2>&1 &
first=$!
for _ in $(seq 100); do [[ -d runs/tiny/checkpoints/step-00000020 ]] && break; sleep 0.1; done
fault "second trainer on a training run: refused with host and pid" 2 \
  "run directory runs/tiny is in use by another trainer \(host .* pid $first\)" -- \
  "$USTRAIN" train tiny.toml "${slow[@]}" --resume auto
fault "second trainer with --overwrite: refused too" 2 "is in use by another trainer" -- \
  "$USTRAIN" train tiny.toml "${slow[@]}" --overwrite
kill -KILL "$first" 2>/dev/null
wait "$first" 2>/dev/null
"$USTRAIN" ckpt inspect runs/tiny >inspect.log 2>&1
check "the first trainer's checkpoints survived the second" 0 $? inspect.log "^checkpoint "
# The resumed run goes a few steps past the newest checkpoint.
newest=$(ls runs/tiny/checkpoints | sed -n 's/^step-0*\([0-9][0-9]*\)$/\1/p' | sort -n | tail -1)
fault "after kill -9 of the holder the lock is free: resumed" 0 "resumed from" -- \
  "$USTRAIN" train tiny.toml "${slow[@]}" --set train.steps=$((newest + 5)) --resume auto

# A file where the checkpoint directory belongs: refused at start, nothing trained.
rm -rf runs/blocked && mkdir -p runs/blocked && echo "not a directory" >runs/blocked/checkpoints
fault "RUN/checkpoints is a file: refused before step 1" 2 "runs/blocked/checkpoints is not a directory" -- \
  "$USTRAIN" train tiny.toml --set run.name=blocked
! grep -q '"step"' runs/blocked/metrics.jsonl 2>/dev/null
check "  ... and no step was trained" - $?

# run.lock as a symbolic link to a file of someone else's: refused, the file untouched.
rm -rf runs/linked && mkdir -p runs/linked && echo "keep me" >precious && ln -s "$PWD/precious" runs/linked/run.lock
fault "run.lock is a symbolic link: refused" 2 "the run lock runs/linked/run.lock is a symbolic link" -- \
  "$USTRAIN" train tiny.toml --set run.name=linked
[[ $(cat precious) == "keep me" ]]
check "  ... and its target is untouched" - $?

# A line torn by a crash or a full disk, then a resume: every line parses afterwards.
"$USTRAIN" train tiny.toml --set run.name=torn --set train.steps=10 --set checkpoint.interval=5 >torn.log 2>&1
printf '{"kind":"train","step":11,"lo' >>runs/torn/metrics.jsonl
fault "torn metrics line, then resume" 0 "dropped 1 incomplete line" -- \
  "$USTRAIN" train tiny.toml --set run.name=torn --set train.steps=12 --resume auto
$PYTHON -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' runs/torn/metrics.jsonl 2>parse.log
check "  ... every line of metrics.jsonl parses" - $? parse.log
finish

# A full disk, on a small tmpfs (mounted where this user may mount one; otherwise skipped with
# the reason): a checkpoint directory without room for one checkpoint is refused before the
# first step, room for one but not two is warned about, and a disk that fills while training
# ends the run with a clear error (its last line names the cause and the path, and run.json records
# it), after which a resume (with room again) continues cleanly:
# the torn metrics line is dropped and every checkpoint written before is intact.
source "$(dirname "$0")/lib/faults.bash"

setup_tiny_run
# The size of one checkpoint of this run, to size the filesystems by.
"$USTRAIN" train tiny.toml --set run.name=measure --set train.steps=1 >measure.log 2>&1 || fail "measuring run"
kib=$(( $(du -sb runs/measure/checkpoints/step-00000001 | cut -f1) / 1024 ))

disk=$WORK/disk
mkdir -p "$disk"
if ! mount -t tmpfs -o size=$((kib / 2))k tmpfs "$disk" 2>mount.log; then
  skip "full disk (tmpfs)" "cannot mount a tmpfs here: $(head -1 mount.log)"
  finish
fi
trap 'umount "$disk" 2>/dev/null; rm -rf "$WORK"' EXIT

fault "room for half a checkpoint: refused at start" 2 "has [0-9.]+ [KMG]?i?B free, less than the" -- \
  "$USTRAIN" train tiny.toml --set run.output_dir="$disk"
! grep -q '"step"' "$disk"/tiny/metrics.jsonl 2>/dev/null
check "  ... before any step" - $?

umount "$disk"
mount -t tmpfs -o size=$((kib * 3 / 2 + 64))k tmpfs "$disk"
fault "room for one checkpoint but not two: a warning" 0 "room for fewer than two checkpoints" -- \
  "$USTRAIN" train tiny.toml --set run.output_dir="$disk" --set train.steps=2

# The disk fills in the middle of the run: a filler takes every free block once the first
# checkpoint is written, so that the next metrics lines and the next save fail.
umount "$disk"
mount -t tmpfs -o size=$((kib * 4 + 256))k tmpfs "$disk"
run=(tiny.toml --set run.output_dir="$disk" --set train.steps=2000 --set checkpoint.interval=20
     --set checkpoint.keep_last=1 --set log.tensorboard=false)
"$USTRAIN" train "${run[@]}" >filling.log 2>&1 &
job=$!
# Any checkpoint will do: with keep_last = 1 each one is gone once the next is written.
for _ in $(seq 300); do compgen -G "$disk/tiny/checkpoints/step-*" >/dev/null && break; sleep 0.05; done
# Training runs on while the disk fills: train.steps is far beyond the step the disk runs out at, so
# that a fast machine cannot finish before it does.
dd if=/dev/zero of="$disk/filler" bs=4k 2>/dev/null
wait "$job"
rc=$?
cp filling.log "$WORK/out.txt"
[[ $rc -eq 2 ]] && grep -Eq "^error: .*(disk full|No space left)" filling.log \
  && ! grep -Eq "internal error|Segmentation|terminate called" filling.log
check "the disk fills during training: a clear error" "$rc" $? filling.log
# The last line names the cause and the file that met it; run.json records the error too.
tail -1 filling.log | grep -Eq "^error: .*$disk/tiny/[^ ]+.*No space left on device"
check "  ... its last line names the cause and the path" "$rc" $? filling.log "No space left"
$PYTHON - "$disk/tiny/run.json" >record.log 2>&1 <<'PY'
import json, sys
session = json.load(open(sys.argv[1]))["sessions"][-1]
print(session.get("status"), session.get("error"))
assert session["status"] == "error" and "No space left on device" in session["error"]
PY
check "  ... and run.json records the error" - $? record.log
rm -f "$disk/filler"
# When the run stops depends on which write meets the full disk first: resume for 20 steps
# past the newest checkpoint it left.
newest=$(ls "$disk/tiny/checkpoints" | sed -n 's/^step-0*\([0-9][0-9]*\)$/\1/p' | sort -n | tail -1)
fault "resume after room is made again" 0 "resumed from" -- "$USTRAIN" train "${run[@]}" \
  --set train.steps=$(( ${newest:-0} + 20 )) --resume auto
$PYTHON -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' "$disk/tiny/metrics.jsonl" 2>parse.log
check "  ... every line of metrics.jsonl parses" - $? parse.log
finish

# TensorBoard event files: a run's events, read back independently (tests/cli/lib/check_tfevents.py:
# framing, CRCs, Event messages from TensorBoard's field numbers), hold exactly metrics.jsonl's
# numbers, also across a resume that redoes steps; a new start replaces them; log.tensorboard =
# false writes none; and the checker fails on a corrupted record or a wrong value.
source "$(dirname "$0")/lib/common.bash"

check() { "$PYTHON" "$SOURCE_DIR/tests/cli/lib/check_tfevents.py" "$@"; }
event_files() { find "$1" -maxdepth 1 -name 'events.out.tfevents.*' | wc -l; }

make_corpus
tiny_recipe >tiny.toml
expect_exit 0 "data convert" -- "$USTRAIN" data convert --input corpus --output data --val-fraction 0.1
ckpt=(--set checkpoint.interval=10 --set checkpoint.async=false)

expect_exit 0 "train 30 steps" -- "$USTRAIN" train tiny.toml "${ckpt[@]}"
expect_output "TensorBoard events: runs/tiny/events\.out\.tfevents\.[0-9]{10}\." "train names its event file"
expect_output "metrics: runs/tiny/metrics\.jsonl, runs/tiny/events\.out\.tfevents\." "the closing line names both files"
[[ $(event_files runs/tiny) -eq 1 ]] && pass "one event file" || fail "expected one event file: $(ls runs/tiny)"
expect_exit 0 "event scalars equal metrics.jsonl" -- check runs/tiny
expect_output "ok: 1 event file\(s\), 35 events" "30 train and 3 eval events after the file's two opening ones"

# Resuming from step 20 redoes steps 21-30: a second file whose START drops the first file's.
expect_exit 0 "resume from step 20" -- "$USTRAIN" train tiny.toml "${ckpt[@]}" --resume runs/tiny/checkpoints/step-00000020
[[ $(event_files runs/tiny) -eq 2 ]] && pass "the resumed run adds an event file" || fail "expected two event files"
expect_exit 0 "after the resume, the surviving scalars equal metrics.jsonl" -- check runs/tiny
expect_output "ok: 2 event file\(s\), 48 events" "the second file adds two opening events, steps 21-30 and the eval at 30"

expect_exit 0 "a new start with --overwrite" -- "$USTRAIN" train tiny.toml --overwrite --set train.steps=5
[[ $(event_files runs/tiny) -eq 1 ]] && pass "a new start leaves only its own event file" || fail "old event files kept"
expect_exit 0 "the new start's scalars equal metrics.jsonl" -- check runs/tiny

expect_exit 0 "train with log.tensorboard = false" -- "$USTRAIN" train tiny.toml --set run.name=quiet \
  --set train.steps=6 --set log.tensorboard=false
[[ -f runs/quiet/metrics.jsonl && $(event_files runs/quiet) -eq 0 ]] && pass "no event file" || fail "event file written"

# The checker must catch what it checks: a flipped byte in a record, a wrong value.
corrupt() {  # corrupt DIR OFFSET: flips the bits of one byte of DIR's event file
  local f; f=$(find "$1" -maxdepth 1 -name 'events.out.tfevents.*')
  printf "$(printf '\\%03o' $(( $(od -An -tu1 -j "$2" -N1 "$f") ^ 0xff )))" |
    dd of="$f" bs=1 seek="$2" conv=notrunc status=none
}
cp -r runs/tiny bad-data && corrupt bad-data 200
expect_exit 1 "the checker rejects a flipped data byte" -- check bad-data
expect_output "data CRC mismatch" "it names the data CRC"
cp -r runs/tiny bad-length && corrupt bad-length 2
expect_exit 1 "the checker rejects a flipped length byte" -- check bad-length
expect_output "length CRC mismatch" "it names the length CRC"
cp -r runs/tiny bad-value
sed -i '3s/"loss":\([0-9]\)/"loss":1\1/' bad-value/metrics.jsonl
expect_exit 1 "the checker rejects a value that differs from metrics.jsonl" -- check bad-value
expect_output "train/loss at step 3: event" "it names the tag and step"
finish

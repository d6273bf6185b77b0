# Muon: N steps straight give the same losses, bit for bit, as N/2 steps, a restart with --resume
# and N/2 more (the momentum travels in the checkpoint); resuming under the other optimizer is
# refused naming both; the dry run shows Muon's memory.
source "$(dirname "$0")/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "data convert"
muon=(--set optim.name=muon --set optim.lr=0.02 --set schedule.decay=constant)

expect_exit 0 "muon: 40 steps straight" -- "$USTRAIN" train tiny.toml --set run.name=straight --set train.steps=40 "${muon[@]}"
expect_exit 0 "muon: 20 steps" -- "$USTRAIN" train tiny.toml --set run.name=halves --set train.steps=20 "${muon[@]}"
expect_exit 0 "muon: resumed for 20 more" -- \
  "$USTRAIN" train tiny.toml --set run.name=halves --set train.steps=40 --resume auto "${muon[@]}"
a=$(losses runs/straight/metrics.jsonl); b=$(losses runs/halves/metrics.jsonl)
[[ -n $a && $a == "$b" ]] && pass "muon: 20 + 20 steps equal 40 straight ($(wc -l <<<"$a") losses)" \
  || { fail "muon: losses differ after resume"; diff <(echo "$a") <(echo "$b") | head -5; }
expect_exit 0 "adamw: 20 steps" -- "$USTRAIN" train tiny.toml --set run.name=adamw --set train.steps=20 --set optim.lr=0.02 \
  --set schedule.decay=constant
[[ $(losses runs/adamw/metrics.jsonl) != "$(losses runs/straight/metrics.jsonl | head -n 20)" ]] \
  && pass "muon's losses differ from adamw's (muon ran)" || fail "muon gave adamw's losses"

expect_exit 2 "resuming a muon checkpoint with adamw is refused, even forced" -- "$USTRAIN" train tiny.toml \
  --set run.name=halves --set train.steps=60 "${muon[@]}" --set optim.name=adamw --resume auto --force-resume
expect_output "optim.name = \"muon\" and the recipe sets optim.name = \"adamw\"" "names both optimizers"
expect_exit 2 "resuming an adamw checkpoint with muon is refused" -- "$USTRAIN" train tiny.toml \
  --set run.name=adamw --set train.steps=40 --set optim.lr=0.02 --set schedule.decay=constant --set optim.name=muon \
  --resume auto
expect_output "optim.name = \"adamw\" and the recipe sets optim.name = \"muon\"" "names both optimizers"

expect_exit 0 "dry run with muon" -- "$USTRAIN" train tiny.toml --dry-run "${muon[@]}"
expect_output "Muon's gathered matrices and Newton-Schulz workspace \(muon.\*\): [0-9.]+ KiB" "the plan shows Muon's memory"
finish

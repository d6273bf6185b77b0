# Attention masks end to end (train.document_mask, model.sliding_window): each changes what the
# model learns on packed data; validation and `ustrain eval` honour the recipe's setting; a run
# with the mask on resumes bit for bit; a resume that changes a mask, and document masking on a
# dataset that knows no end-of-document token, are refused, saying what to do.
source "$(dirname "$0")/lib/common.bash"

make_corpus  # documents of about 60 bytes packed into windows of 32 tokens
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "data convert"
evals() { sed -n 's/.*"kind":"eval".*"val_loss":\([-0-9.e+]*\).*/\1/p' "$1"; }
eval_loss() { sed -n 's/.*validation loss \([-0-9.e+]*\) |.*/\1/p' "$WORK/out.txt"; }
short=(--set train.steps=20 --set checkpoint.interval=10)
docs=(--set train.document_mask=true)

expect_exit 0 "20 steps, attention across the packed documents" -- \
  "$USTRAIN" train tiny.toml --set run.name=plain "${short[@]}"
expect_exit 0 "20 steps with document masking" -- \
  "$USTRAIN" train tiny.toml --set run.name=docs "${short[@]}" "${docs[@]}"
expect_exit 0 "20 steps with a sliding window of 4" -- \
  "$USTRAIN" train tiny.toml --set run.name=window "${short[@]}" --set model.sliding_window=4
expect_exit 0 "20 steps with both" -- \
  "$USTRAIN" train tiny.toml --set run.name=both "${short[@]}" "${docs[@]}" --set model.sliding_window=4
for run in docs window both; do
  [[ $(losses runs/$run/metrics.jsonl | head -1) != "$(losses runs/plain/metrics.jsonl | head -1)" ]] \
    && pass "$run: the first loss differs from unmasked attention's" || fail "$run: the mask changed no loss"
done
[[ $(losses runs/both/metrics.jsonl) != "$(losses runs/docs/metrics.jsonl)" ]] \
  && pass "a window on top of the documents changes the losses too" || fail "the window changed nothing"

# Validation and eval: the same sequences under the recipe's mask.
expect_exit 0 "eval the masked run's checkpoint" -- "$USTRAIN" eval --run runs/docs
masked=$(eval_loss)
[[ -n $masked && $masked == "$(evals runs/docs/metrics.jsonl | tail -1)" ]] \
  && pass "eval equals the run's last validation loss ($masked)" \
  || fail "eval $masked != the run's $(evals runs/docs/metrics.jsonl | tail -1)"
expect_exit 0 "eval the same checkpoint with the mask off" -- \
  "$USTRAIN" eval --run runs/docs --set train.document_mask=false
[[ -n $(eval_loss) && $(eval_loss) != "$masked" ]] \
  && pass "eval honours train.document_mask ($(eval_loss) unmasked)" \
  || fail "eval gave $(eval_loss) with the mask off, $masked with it on"

# Exact resume with the mask on: 10 steps, a restart, 10 more equal 20 straight (a constant
# learning rate: the schedule of a 10-step run would differ).
constant=("${docs[@]}" --set schedule.decay=constant)
expect_exit 0 "20 steps straight with document masking" -- \
  "$USTRAIN" train tiny.toml --set run.name=straight --set train.steps=20 "${constant[@]}"
expect_exit 0 "10 steps" -- "$USTRAIN" train tiny.toml --set run.name=halves --set train.steps=10 "${constant[@]}"
expect_exit 0 "resumed for 10 more" -- \
  "$USTRAIN" train tiny.toml --set run.name=halves --set train.steps=20 "${constant[@]}" --resume auto
a=$(losses runs/straight/metrics.jsonl); b=$(losses runs/halves/metrics.jsonl)
[[ -n $a && $a == "$b" ]] && pass "10 + 10 steps equal 20 straight ($(wc -l <<<"$a") losses)" \
  || fail "resumed losses differ"
[[ $(evals runs/straight/metrics.jsonl) == "$(evals runs/halves/metrics.jsonl)" ]] \
  && pass "validation losses equal too" || fail "validation losses differ after resume"

# Changing a mask breaks exact resume: refused, naming the key, unless forced.
expect_exit 2 "resuming with document masking turned off is refused" -- \
  "$USTRAIN" train tiny.toml --set run.name=docs "${short[@]}" --set train.steps=25 --resume auto
expect_output "train.document_mask true -> false \(breaks exact resume\)" "names the key and both values"
expect_output "--force-resume" "says how to continue anyway"
expect_exit 2 "resuming with a sliding window is refused" -- "$USTRAIN" train tiny.toml --set run.name=docs \
  "${short[@]}" "${docs[@]}" --set train.steps=25 --set model.sliding_window=8 --resume auto
expect_output "model.sliding_window 0 -> 8 \(breaks exact resume\)" "names the window and both values"
expect_exit 2 "a negative window is refused" -- "$USTRAIN" train tiny.toml --set model.sliding_window=-1 --dry-run
expect_output "model.sliding_window" "names the key"

# Token ids without an end-of-document id have no documents to mask.
"$PYTHON" - <<'PY'
import struct
header = "{'descr': '<u2', 'fortran_order': False, 'shape': (20000,), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open("ids.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<20000H", *(i % 250 for i in range(20000))))
PY
"$USTRAIN" data convert --format npy --input ids.npy --output ids --tokenizer counting --vocab-size 257 \
  --val-fraction 0.1 >convert.txt 2>&1 || fail "convert ids without an EOS: $(cat convert.txt)"
expect_exit 2 "document masking on a dataset without an end-of-document id" -- \
  "$USTRAIN" train tiny.toml --set run.name=ids --set data.path=ids "${docs[@]}"
expect_output "train.document_mask = true needs .*dataset ids" "names the key and the dataset"
expect_output "--eos-id" "says how to convert it with one"
finish

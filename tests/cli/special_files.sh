# Inputs that are no regular file: a FIFO as config.json, as a shard of a safetensors index and
# as plan --calibration, a directory as --calibration. Each is refused at once with a message
# naming the path (exit 2); opening a FIFO nobody writes to used to wait forever.
source "$(dirname "$0")/lib/common.bash"

tiny_recipe >tiny.toml
# refused WHAT PATTERN -- COMMAND...: exit 2 within 20 s (timeout's 124 otherwise), naming it.
refused() {
  local what=$1 pattern=$2
  shift 3
  expect_exit 2 "$what" -- timeout 20 "$@"
  expect_output "$pattern" "$what: names the path and what it is"
}

$PYTHON "$SOURCE_DIR/tests/cli/lib/make_hf_model.py" hf
import=(ckpt import --recipe tiny.toml --tokenizer none)

cp -r hf fifo_config
rm fifo_config/config.json
mkfifo fifo_config/config.json
refused "ckpt inspect with a FIFO as config.json" "fifo_config/config.json is a FIFO \(named pipe\), not a regular file" \
  -- "$USTRAIN" ckpt inspect fifo_config
refused "ckpt import with a FIFO as config.json" "fifo_config/config.json is a FIFO \(named pipe\), not a regular file" \
  -- "$USTRAIN" "${import[@]}" fifo_config out

cp -r hf fifo_shard
rm fifo_shard/model.safetensors
mkfifo fifo_shard/model.safetensors
refused "ckpt import with a FIFO as an index's shard" \
  "fifo_shard/model.safetensors is a FIFO \(named pipe\), not a regular file" \
  -- "$USTRAIN" "${import[@]}" fifo_shard/model.safetensors.index.json out
[[ ! -e out ]] && pass "the refused imports wrote nothing" || fail "a refused import left out/"

mkfifo calibration.json
refused "plan with a FIFO as --calibration" "calibration.json is a FIFO \(named pipe\), not a regular file" \
  -- "$USTRAIN" plan tiny.toml --gpus 2 --calibration calibration.json
mkdir calibration
refused "plan with a directory as --calibration" "calibration is a directory, not a regular file" \
  -- "$USTRAIN" plan tiny.toml --gpus 2 --calibration calibration
grep -q "internal error" "$WORK/out.txt" && fail "a directory as --calibration is an internal error" \
  || pass "a directory as --calibration is no internal error"
finish

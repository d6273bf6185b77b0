# JSON nested 200,000 levels deep (400 KB) where ustrain reads JSON: a tokenizer.json given to
# data convert, a dataset's tokenizer.json read by data inspect, a config.json and a safetensors
# index read by ckpt import and inspect, a checkpoint manifest. Each is one message naming the
# file and the nesting limit (exit 2), never a crash of the code that walks the document.
source "$(dirname "$0")/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
# deep TEMPLATE: the template with DEEP replaced by 200,000 nested arrays.
deep() { $PYTHON -c 'import sys; sys.stdout.write(sys.argv[1].replace("DEEP", "[" * 200000 + "]" * 200000))' "$1"; }
# refused WHAT FILE -- COMMAND...: exit 2, and the message names FILE and the limit.
refused() {
  local what=$1 file=$2
  shift 2
  expect_exit 2 "$what" "$@"
  expect_output "^error: $file: JSON nested more than 256 levels deep" "$what: names the file and the limit"
}

deep '{"model": {}, "normalizer": DEEP}' >deep_tokenizer.json
refused "data convert with a deep tokenizer.json" deep_tokenizer.json -- \
  "$USTRAIN" data convert -i corpus -o converted -t deep_tokenizer.json
[[ ! -e converted ]] && pass "the refused conversion wrote nothing" || fail "a refused conversion left converted/"

# A dataset whose tokenizer.json was swapped for a deep one (its checksum updated to match).
$PYTHON - tok <<'PY'
import json, os, sys
# The byte-level alphabet of GPT-2's tokenizer: printable bytes stand for themselves.
shown = [b for b in range(256) if 0x21 <= b <= 0x7e or 0xa1 <= b <= 0xac or 0xae <= b]
hidden = [b for b in range(256) if b not in shown]
chars = {**{b: chr(b) for b in shown}, **{b: chr(256 + i) for i, b in enumerate(hidden)}}
os.makedirs(sys.argv[1], exist_ok=True)
json.dump({"added_tokens": [{"id": 256, "content": "<|endoftext|>", "normalized": False, "special": True}],
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
           "decoder": {"type": "ByteLevel"},
           "model": {"type": "BPE", "vocab": {chars[b]: b for b in range(256)}, "merges": []}},
          open(sys.argv[1] + "/tokenizer.json", "w"))
PY
"$USTRAIN" data convert -i corpus -o data -t tok/tokenizer.json >/dev/null 2>&1 || fail "convert with tokenizer.json"
deep '{"model": {}, "normalizer": DEEP}' >data/tokenizer.json
$PYTHON - data <<'PY'
import json, sys, zlib
path = sys.argv[1] + "/manifest.json"
manifest = json.load(open(path))
manifest["tokenizer"]["model_checksum"] = "crc32:%08x" % zlib.crc32(open(sys.argv[1] + "/tokenizer.json", "rb").read())
json.dump(manifest, open(path, "w"), indent=2)
PY
refused "data inspect of a dataset with a deep tokenizer.json" data/tokenizer.json -- "$USTRAIN" data inspect data

$PYTHON "$SOURCE_DIR/tests/cli/lib/make_hf_model.py" hf
expect_exit 0 "the model before it is damaged imports" -- "$USTRAIN" ckpt import hf imported --recipe tiny.toml \
  --tokenizer none
cp -r hf deep_config
deep '{"model_type": "mixtral", "num_local_experts": 2, "num_experts_per_tok": 1, "sliding_window": DEEP}' \
  >deep_config/config.json
refused "ckpt import with a deep config.json" deep_config/config.json -- \
  "$USTRAIN" ckpt import deep_config out --recipe tiny.toml --tokenizer none
refused "ckpt inspect with a deep config.json" deep_config/config.json -- "$USTRAIN" ckpt inspect deep_config
cp -r hf deep_index
deep '{"weight_map": DEEP}' >deep_index/model.safetensors.index.json
refused "ckpt import with a deep safetensors index" deep_index/model.safetensors.index.json -- \
  "$USTRAIN" ckpt import deep_index out --recipe tiny.toml --tokenizer none
[[ ! -e out ]] && pass "the refused imports wrote nothing" || fail "a refused import left out/"

mkdir deep_checkpoint
deep '{"format": "ustrain-checkpoint", "format_version": DEEP}' >deep_checkpoint/manifest.json
refused "ckpt inspect of a deep checkpoint manifest" deep_checkpoint/manifest.json -- \
  "$USTRAIN" ckpt inspect deep_checkpoint
finish

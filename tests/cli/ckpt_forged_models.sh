# Forged Hugging Face models for ckpt import: two weights aliased to the same bytes, hidden
# behind an empty tensor the importer ignores. Each is one message naming what is wrong (exit
# 2), nothing written.
source "$(dirname "$0")/lib/common.bash"

tiny_recipe >tiny.toml
make_model() { $PYTHON "$SOURCE_DIR/tests/cli/lib/make_hf_model.py" "$@"; }
import=(ckpt import --recipe tiny.toml --tokenizer none)

make_model hf
expect_exit 0 "the honest model imports" -- "$USTRAIN" "${import[@]}" hf imported

# lm_head.weight points at model.embed_tokens.weight's bytes; an empty tensor at the same
# offset, zz.unlisted, which the index does not list, once hid the overlap from the check.
make_model aliased --alias lm_head.weight=model.embed_tokens.weight --empty zz.unlisted
aliased='entries "lm_head.weight" \[0, 32896\) and "model.embed_tokens.weight" \[0, 32896\) overlap'
expect_exit 2 "import of aliased weights" -- "$USTRAIN" "${import[@]}" aliased out
expect_output "aliased/model.safetensors: not a valid safetensors file: $aliased" "names the file and both tensors"
expect_exit 2 "import of aliased weights through the index" -- \
  "$USTRAIN" "${import[@]}" aliased/model.safetensors.index.json out
expect_output "$aliased" "through the index: names both tensors"
expect_exit 2 "inspect of aliased weights" -- "$USTRAIN" ckpt inspect aliased
expect_output "$aliased" "inspect names both tensors"
[[ ! -e out ]] && pass "the refused imports wrote nothing" || fail "a refused import left out/"
finish

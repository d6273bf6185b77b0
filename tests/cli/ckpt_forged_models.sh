# Forged Hugging Face models and impossible shapes for ckpt import: two weights aliased to the
# same bytes, hidden behind an empty tensor the importer ignores, and a model.n_experts far
# beyond any model (2^40). Each is one message naming what is wrong (exit 2), nothing written.
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

# Without config.json nothing but the recipe checks the shape before the model is declared.
cp -r hf no_config
rm no_config/config.json
expect_exit 2 "import with model.n_experts = 2^40" -- "$USTRAIN" "${import[@]}" no_config out \
  --set model.n_experts=1099511627776 --set model.experts_per_token=1
expect_output "^error: --set model.n_experts=1099511627776: model.n_experts = 1099511627776 is not allowed: it must be 0 to 65536" \
  "names the key, the value and its bounds"
grep -q "internal error" "$WORK/out.txt" && fail "2^40 experts end in an internal error" || pass "no internal error"
[[ ! -e out ]] && pass "the refused imports wrote nothing" || fail "a refused import left out/"
finish

# Mixture-of-experts interop: a Mixtral-shaped model exports to the Hugging Face Mixtral layout
# (config and tensor names), imports back to the same eval loss and exports again byte for byte;
# MoE models Mixtral cannot hold are refused before anything is written.
source "$(dirname "$0")/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
sed -i 's/^ffn_hidden = 64$/ffn_hidden = 64\nn_experts = 4\nexperts_per_token = 2\nexpert_ffn_hidden = 16/' tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "data convert"
"$USTRAIN" train tiny.toml --set train.steps=10 >train.log 2>&1 || fail "training"
eval_loss() { sed -n 's/.*validation loss \([-0-9.e+]*\) |.*/\1/p' "$WORK/out.txt"; }

expect_exit 0 "eval the MoE run" -- "$USTRAIN" eval tiny.toml --checkpoint runs/tiny
original=$(eval_loss)
expect_exit 0 "export to the Mixtral layout" -- "$USTRAIN" ckpt export runs/tiny hf
grep -q '"model_type": "mixtral"' hf/config.json && grep -q '"num_local_experts": 4' hf/config.json \
  && grep -q '"num_experts_per_tok": 2' hf/config.json && grep -q '"intermediate_size": 16' hf/config.json \
  && pass "config.json describes a Mixtral with 4 experts, top-2, width 16" || fail "config: $(cat hf/config.json)"
expect_exit 0 "inspect the export" -- "$USTRAIN" ckpt inspect hf
expect_output "model.layers.1.block_sparse_moe.gate.weight +F32 +\(4, 32\)" "the router under Mixtral's name"
expect_output "model.layers.0.block_sparse_moe.experts.3.w1.weight +F32 +\(16, 32\)" "expert gate_proj as w1"
expect_output "model.layers.0.block_sparse_moe.experts.3.w2.weight +F32 +\(32, 16\)" "expert down_proj as w2"
expect_output "model.layers.0.block_sparse_moe.experts.3.w3.weight +F32 +\(16, 32\)" "expert up_proj as w3"
expect_exit 0 "import the Mixtral export" -- "$USTRAIN" ckpt import hf imported --recipe tiny.toml
expect_exit 0 "eval the import" -- "$USTRAIN" eval tiny.toml --checkpoint imported
[[ $(eval_loss) == "$original" ]] && pass "imported Mixtral: same loss ($original)" \
  || fail "imported loss $(eval_loss) != $original"
expect_exit 0 "export the import again" -- "$USTRAIN" ckpt export imported hf2
cmp -s hf/model.safetensors hf2/model.safetensors && cmp -s hf/config.json hf2/config.json \
  && pass "export -> import -> export is byte-identical" || fail "the round trip changed the files"

expect_exit 2 "import against another expert count" -- "$USTRAIN" ckpt import hf bad --recipe tiny.toml --set model.n_experts=8
expect_output "num_local_experts" "names the disagreeing config key"

"$USTRAIN" train tiny.toml --set run.name=shared --set train.steps=2 --set model.n_shared_experts=1 >shared.log 2>&1 \
  || fail "training with a shared expert"
expect_exit 2 "export of a model with shared experts" -- "$USTRAIN" ckpt export runs/shared hfshared
expect_output "Mixtral layout \(the default\): it has shared experts, which Mixtral lacks; the Qwen2-MoE layout holds it: pass --layout qwen2_moe" "says what Mixtral lacks and which layout holds it"
[[ ! -e hfshared ]] && pass "a refused export leaves nothing" || fail "a refused export left hfshared/"
finish

# Qwen2-MoE interop: an MoE model with shared experts and a dense first layer exports to the
# Hugging Face Qwen2-MoE layout (`ckpt export --layout qwen2_moe`: config, tensor names, zero
# attention biases and shared expert gate, doubled shared down_proj), imports back to the same
# eval loss and exports again byte for byte. Imports refuse nonzero biases or gates, and
# exports refuse what Qwen2-MoE cannot hold, leaving nothing.
source "$(dirname "$0")/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
sed -i 's/^ffn_hidden = 64$/ffn_hidden = 64\nn_experts = 4\nexperts_per_token = 2\nexpert_ffn_hidden = 16\nn_shared_experts = 2\nfirst_dense_layers = 1/' tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "data convert"
"$USTRAIN" train tiny.toml --set train.steps=10 >train.log 2>&1 || fail "training"
eval_loss() { sed -n 's/.*validation loss \([-0-9.e+]*\) |.*/\1/p' "$WORK/out.txt"; }
config_has() { grep -Eq "$1" hf/config.json; }

expect_exit 0 "eval the MoE run" -- "$USTRAIN" eval tiny.toml --checkpoint runs/tiny
original=$(eval_loss)
expect_exit 0 "export to the Qwen2-MoE layout" -- "$USTRAIN" ckpt export runs/tiny hf --layout qwen2_moe
config_has '"architectures": \[' && config_has '"Qwen2MoeForCausalLM"' && config_has '"model_type": "qwen2_moe"' \
  && config_has '"num_experts": 4' && config_has '"num_experts_per_tok": 2' && config_has '"moe_intermediate_size": 16' \
  && config_has '"shared_expert_intermediate_size": 32' && config_has '"intermediate_size": 64' \
  && config_has '"norm_topk_prob": true' && config_has '"decoder_sparse_step": 1' && config_has '"qkv_bias": true' \
  && [[ $($PYTHON -c 'import json; print(json.load(open("hf/config.json"))["mlp_only_layers"])') == "[0]" ]] \
  && pass "config.json: Qwen2-MoE, 4 experts of 16, top-2, one shared expert of 32, layer 0 dense" \
  || fail "config: $(cat hf/config.json)"
expect_exit 0 "inspect the export" -- "$USTRAIN" ckpt inspect hf
expect_output "model.layers.0.mlp.gate_proj.weight +F32 +\(64, 32\)" "the dense first layer"
expect_output "model.layers.1.mlp.gate.weight +F32 +\(4, 32\)" "the router"
expect_output "model.layers.1.mlp.experts.3.up_proj.weight +F32 +\(16, 32\)" "the experts under their own names"
expect_output "model.layers.1.mlp.shared_expert.down_proj.weight +F32 +\(32, 32\)" "the shared experts as one"
expect_output "model.layers.1.mlp.shared_expert_gate.weight +F32 +\(1, 32\)" "the shared expert's gate"
expect_output "model.layers.0.self_attn.k_proj.bias +F32 +\(16\)" "the attention biases"
expect_output "first_dense_layers = 1" "inspect's recipe section has the dense first layer"

# edit FILE TENSOR VALUE: sets the tensor's first F32 element in place.
edit() {
  $PYTHON - "$@" <<'PY'
import json, struct, sys
path, name, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    entry = json.loads(f.read(n))[name]
    assert entry["dtype"] == "F32"
    f.seek(8 + n + entry["data_offsets"][0])
    f.write(struct.pack("<f", value))
PY
}
$PYTHON - <<'PY' || fail "the zero tensors and the doubled shared down_proj"
import json, struct
raw = open("hf/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
def values(name):
    b, e = header[name]["data_offsets"]
    return struct.unpack("<%df" % ((e - b) // 4), raw[8 + n + b:8 + n + e])
for name in ("model.layers.0.self_attn.q_proj.bias", "model.layers.1.self_attn.v_proj.bias",
             "model.layers.1.mlp.shared_expert_gate.weight"):
    assert all(v == 0.0 for v in values(name)), name
PY
expect_exit 0 "import the Qwen2-MoE export" -- "$USTRAIN" ckpt import hf imported --recipe tiny.toml
expect_exit 0 "eval the import" -- "$USTRAIN" eval tiny.toml --checkpoint imported
[[ $(eval_loss) == "$original" ]] && pass "imported Qwen2-MoE: same loss ($original)" \
  || fail "imported loss $(eval_loss) != $original"
expect_exit 0 "export the import again" -- "$USTRAIN" ckpt export imported hf2 --layout qwen2_moe
cmp -s hf/model.safetensors hf2/model.safetensors && cmp -s hf/config.json hf2/config.json \
  && pass "export -> import -> export is byte-identical" || fail "the round trip changed the files"

expect_exit 2 "import against other shared experts" -- "$USTRAIN" ckpt import hf bad --recipe tiny.toml \
  --set model.n_shared_experts=1
expect_output "shared_expert_intermediate_size = 32" "names the disagreeing config key"
expect_exit 2 "import against another layer pattern" -- "$USTRAIN" ckpt import hf bad --recipe tiny.toml \
  --set model.first_dense_layers=0
expect_output "make layers \[0, 1\] MoE but decoder_sparse_step and mlp_only_layers make layers \[1\] MoE" \
  "names the MoE layers of each"
expect_exit 0 "import into a recipe that balances with a router bias (it starts at zero)" -- \
  "$USTRAIN" ckpt import hf balanced --recipe tiny.toml --set model.router_bias_update_rate=0.01
cp -r hf hfbias && edit hfbias/model.safetensors model.layers.1.self_attn.k_proj.bias 0.25
expect_exit 2 "import of a nonzero attention bias" -- "$USTRAIN" ckpt import hfbias bad --recipe tiny.toml
expect_output "k_proj.bias holds 0.25 at element 0, and ustrain's attention has no biases" "says why"
cp -r hf hfgate && edit hfgate/model.safetensors model.layers.1.mlp.shared_expert_gate.weight -1
expect_exit 2 "import of a nonzero shared expert gate" -- "$USTRAIN" ckpt import hfgate bad --recipe tiny.toml
expect_output "shared_expert_gate.weight holds -1 at element 0, and ustrain's shared experts are ungated" "says why"
[[ ! -e bad ]] && pass "a refused import leaves nothing" || fail "a refused import left bad/"

"$USTRAIN" train tiny.toml --set run.name=plain --set train.steps=2 --set model.n_shared_experts=0 >plain.log 2>&1 \
  || fail "training without shared experts"
expect_exit 0 "eval the run without shared experts" -- "$USTRAIN" eval tiny.toml --checkpoint runs/plain \
  --set model.n_shared_experts=0
plain=$(eval_loss)
expect_exit 0 "export it as Qwen2-MoE" -- "$USTRAIN" ckpt export runs/plain hfplain --layout qwen2_moe
grep -q '"shared_expert_intermediate_size": 0' hfplain/config.json \
  && pass "no shared experts: a shared expert of width 0" || fail "config: $(cat hfplain/config.json)"
expect_exit 0 "import it" -- "$USTRAIN" ckpt import hfplain plainimported --recipe tiny.toml --set model.n_shared_experts=0
expect_exit 0 "eval that import" -- "$USTRAIN" eval tiny.toml --checkpoint plainimported --set model.n_shared_experts=0
[[ $(eval_loss) == "$plain" ]] && pass "without shared experts: same loss ($plain)" || fail "loss $(eval_loss) != $plain"
expect_exit 2 "the default Mixtral layout for a model with a dense layer" -- "$USTRAIN" ckpt export runs/plain hfmix
expect_output "some of its layers are dense; Mixtral's are all MoE; the Qwen2-MoE layout holds it" "points to Qwen2-MoE"

"$USTRAIN" train tiny.toml --set run.name=sigmoid --set train.steps=2 --set model.router_score=sigmoid >sig.log 2>&1 \
  || fail "training with a sigmoid router"
expect_exit 2 "export of a sigmoid router as Qwen2-MoE" -- "$USTRAIN" ckpt export runs/sigmoid hfsig --layout qwen2_moe
expect_output "Qwen2-MoE layout: its router scores experts with a sigmoid" "says what Qwen2-MoE lacks"
[[ ! -e hfsig && ! -e hfmix ]] && pass "a refused export leaves nothing" || fail "a refused export left files"
expect_exit 2 "a dense layout for an MoE model" -- "$USTRAIN" ckpt export runs/tiny hfllama --layout llama
expect_output "mixture of experts, which a Llama lacks" "says why"
finish

# Interop: eval of a checkpoint equals the run's own last validation loss; export to Hugging
# Face safetensors (fp32, bf16, sharded) and import back give the same eval loss and, exported
# again, byte-identical files; an imported model starts a fine-tuning run.
source "$(dirname "$0")/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "data convert"
"$USTRAIN" train tiny.toml >train.log 2>&1 || fail "training"
eval_loss() { sed -n 's/.*validation loss \([-0-9.e+]*\) |.*/\1/p' "$WORK/out.txt"; }
run_val=$(sed -n 's/.*"kind":"eval".*"val_loss":\([-0-9.e+]*\).*/\1/p' runs/tiny/metrics.jsonl | tail -1)

expect_exit 0 "eval the run's checkpoint" -- "$USTRAIN" eval tiny.toml --checkpoint runs/tiny
expect_output "step 30\): validation loss [0-9.]+ \| perplexity [0-9.]+ \| 512 tokens" "eval prints loss, perplexity and tokens (2 batches x 8 sequences x 32)"
original=$(eval_loss)
awk -v a="$original" -v b="$run_val" 'BEGIN { exit !(a == b) }' \
  && pass "eval equals the run's last validation loss ($original)" || fail "eval $original != run's $run_val"

expect_exit 0 "export fp32" -- "$USTRAIN" ckpt export runs/tiny --format safetensors hf32
[[ -f hf32/model.safetensors && -f hf32/config.json ]] && pass "export wrote model.safetensors and config.json" \
  || fail "export output incomplete: $(ls hf32)"
expect_output "exported 21 tensors" "all tensors exported (2 layers x 9 + embed, norm, head)"
expect_exit 0 "export bf16" -- "$USTRAIN" ckpt export runs/tiny hf16 --dtype bf16
(( $(stat -c %s hf16/model.safetensors) < $(stat -c %s hf32/model.safetensors) * 6 / 10 )) \
  && pass "bf16 export is about half the size" || fail "bf16 export is not smaller"
grep -q '"torch_dtype": "bfloat16"' hf16/config.json && pass "bf16 config says bfloat16" || fail "bf16 config dtype"
expect_exit 2 "export refuses an existing output" -- "$USTRAIN" ckpt export runs/tiny hf32
expect_exit 0 "export sharded" -- "$USTRAIN" ckpt export runs/tiny hfsharded --max-shard-gb 0.00005
[[ -f hfsharded/model.safetensors.index.json && -f hfsharded/model-00002-of-0000$(ls hfsharded/model-*.safetensors | wc -l).safetensors ]] \
  && pass "sharded export has an index and several files" || fail "sharded export: $(ls hfsharded)"

expect_exit 0 "inspect a Hugging Face model" -- "$USTRAIN" ckpt inspect hf32
expect_output "model.layers.1.self_attn.q_proj.weight +F32 +\(32, 32\)" "lists tensors with dtype and shape"
expect_output "^d_model = 32" "prints the [model] section for a recipe"
expect_exit 0 "inspect a checkpoint" -- "$USTRAIN" ckpt inspect runs/tiny
expect_output "step 30 \| tokens seen 7680" "shows step and tokens seen"
expect_output "model.embed_tokens.weight +\(257, 32\) +param adam_m adam_v" "shows tensors and states"
expect_output "^\[model\]" "shows the recipe"

for source in hf32 hfsharded hfsharded/model.safetensors.index.json; do
  rm -rf imported
  expect_exit 0 "import $source" -- "$USTRAIN" ckpt import "$source" imported --recipe tiny.toml
  expect_exit 0 "eval the imported $source" -- "$USTRAIN" eval tiny.toml --checkpoint imported
  [[ $(eval_loss) == "$original" ]] && pass "imported $source: same loss as the exporting run" \
    || fail "imported $source: loss $(eval_loss) != $original"
done
expect_exit 0 "export the imported model again" -- "$USTRAIN" ckpt export imported hf32again
cmp -s hf32/model.safetensors hf32again/model.safetensors && cmp -s hf32/config.json hf32again/config.json \
  && pass "export -> import -> export is byte-identical" || fail "the round trip changed the files"

expect_exit 0 "import the bf16 export" -- "$USTRAIN" ckpt import hf16 imported16 --recipe tiny.toml
expect_exit 0 "eval the bf16 import" -- "$USTRAIN" eval tiny.toml --checkpoint imported16
awk -v a="$(eval_loss)" -v b="$original" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d > 0 && d < 0.01) }' \
  && pass "bf16 rounding moves the loss a little ($(eval_loss) vs $original)" || fail "bf16 loss $(eval_loss) vs $original"

expect_exit 2 "import against another model shape" -- "$USTRAIN" ckpt import hf32 bad --recipe tiny.toml --set model.n_layers=3
expect_output "num_hidden_layers" "names the disagreeing config key"
[[ ! -e bad ]] && pass "a failed import leaves nothing" || fail "a failed import left bad/"
expect_exit 2 "an imported model cannot be resumed" -- "$USTRAIN" train tiny.toml --set run.name=ft --resume imported
expect_output "checkpoint.init_from" "says to start from it instead"

expect_exit 0 "fine-tune from the imported model" -- \
  "$USTRAIN" train tiny.toml --set run.name=ft --set checkpoint.init_from=imported --set train.steps=5
expect_output "initial weights from imported" "says where the weights came from"
fresh_first=$(losses runs/tiny/metrics.jsonl | head -1)
tuned_first=$(losses runs/ft/metrics.jsonl | head -1)
awk -v a="$tuned_first" -v b="$fresh_first" 'BEGIN { exit !(a < b - 1) }' \
  && pass "fine-tuning starts from the trained weights ($tuned_first vs $fresh_first from scratch)" \
  || fail "fine-tuning first loss $tuned_first is not below a fresh start's $fresh_first"
expect_exit 0 "generate from the imported model" -- "$USTRAIN" generate --checkpoint imported --prompt "the" --tokens 8
finish

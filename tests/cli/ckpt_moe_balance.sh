# Mixture-of-experts balancing across checkpoints: with auxiliary-loss-free balancing the
# routing biases are model state, saved under their global names and restored on resume, so
# 6 + 6 steps equal 12 straight bit for bit (the bias moves every step and decides the routing);
# with the sequence-level balance loss as well (softmax scores, so that Mixtral lacks only the bias). Export to Mixtral refuses a biased router, and a
# recipe without the bias refuses a checkpoint that has one.
source "$(dirname "$0")/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
sed -i 's/^ffn_hidden = 64$/ffn_hidden = 64\nn_experts = 4\nexperts_per_token = 2\nexpert_ffn_hidden = 16\nrouter_bias_update_rate = 0.01\nrouter_seq_aux_loss = 0.01/' tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "data convert"
bias_rows() { grep '"kind":"moe"' "$1" | sed -n 's/.*\("layer0_bias_min":[^,]*,"layer0_bias_max":[^,]*\).*/\1/p'; }

constant=(--set schedule.decay=constant --set train.eval_interval=6)
expect_exit 0 "12 steps straight" -- "$USTRAIN" train tiny.toml --set run.name=straight --set train.steps=12 "${constant[@]}"
expect_exit 0 "first 6 steps" -- "$USTRAIN" train tiny.toml --set run.name=halves --set train.steps=6 "${constant[@]}"
expect_exit 0 "inspect the checkpoint" -- "$USTRAIN" ckpt inspect runs/halves/checkpoints/step-00000006
expect_output "model.layers.1.mlp.gate.e_score_correction_bias" "the checkpoint holds layer 1's routing bias"
expect_exit 0 "resume for 6 more" -- \
  "$USTRAIN" train tiny.toml --set run.name=halves --set train.steps=12 --resume auto "${constant[@]}"
a=$(losses runs/straight/metrics.jsonl); b=$(losses runs/halves/metrics.jsonl)
[[ -n $a && $a == "$b" ]] && pass "6 + 6 steps equal 12 straight ($(wc -l <<<"$a") losses)" || fail "losses differ after resume"
[[ $(bias_rows runs/straight/metrics.jsonl) == "$(bias_rows runs/halves/metrics.jsonl)" ]] \
  && pass "the routing biases continue as in the straight run" || fail "the biases differ after resume"
if bias_rows runs/straight/metrics.jsonl | tail -n 1 | grep -Eq '"layer0_bias_max":-?0(\.0*)?$'; then
  fail "the bias never moved"
else
  pass "the bias moved: $(bias_rows runs/straight/metrics.jsonl | tail -n 1)"
fi
grep '"kind":"moe"' runs/straight/metrics.jsonl | tail -n 1 | grep -q '"router_seq_aux_loss":[0-9]' \
  && pass "the balance loss is logged" || fail "no router_seq_aux_loss in the moe rows"

expect_exit 2 "export of a model whose router has a bias" -- "$USTRAIN" ckpt export runs/straight hf
expect_output "per-expert bias" "says what Mixtral lacks"
expect_exit 2 "a recipe without the bias refuses a checkpoint with one" -- "$USTRAIN" train tiny.toml \
  --set run.name=nobias --set train.steps=12 --set model.router_bias_update_rate=0 "${constant[@]}" \
  --set checkpoint.init_from=runs/straight/checkpoints/step-00000012
expect_output "router_bias_update_rate > 0" "says how to keep the bias"
finish

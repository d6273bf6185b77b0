# Every field a run writes to metrics.jsonl has a row in the metrics table of the docs: a
# mixture-of-experts run on two processes with expert parallelism and both balancing methods
# writes the train, eval and moe rows with their optional fields; layer numbers read as
# layerL_. (Fields that appear only on rare events, like straggler_rank, are not produced here.)
source "$(dirname "$0")/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
sed -i 's/^ffn_hidden = 64$/ffn_hidden = 64\nn_experts = 4\nexperts_per_token = 2\nexpert_ffn_hidden = 16\nrouter_bias_update_rate = 0.01\nrouter_seq_aux_loss = 0.01\nrouter_z_loss = 0.001/' tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "data convert"
expect_exit 0 "train a small MoE at ep = 2 on two processes" -- timeout 300 mpiexec -n 2 --oversubscribe \
  --allow-run-as-root "$USTRAIN" train tiny.toml --set parallel.ep=2 --set train.steps=3 --set train.eval_interval=3

tables=$(cat "$SOURCE_DIR/README.md" "$SOURCE_DIR"/docs/*.md 2>/dev/null | grep '^|')
fields=$("$PYTHON" -c '
import json, re, sys
keys = set()
for line in open(sys.argv[1]):
    keys.update(re.sub(r"^layer[0-9]+_", "layerL_", k) for k in json.loads(line))
print("\n".join(sorted(keys)))' runs/tiny/metrics.jsonl)
[[ $(wc -l <<<"$fields") -gt 40 ]] && pass "the run wrote $(wc -l <<<"$fields") fields" || fail "fields: $fields"
for f in $fields; do
  grep -qF "\`$f\`" <<<"$tables" || fail "metrics field $f has no row in the docs' metrics table"
done
grep -q '"layer1_ep_extra_rounds"' runs/tiny/metrics.jsonl && pass "the ep fields were written" \
  || fail "no ep fields in the moe rows"
finish

# `train --dry-run`: prints the resolved recipe (every key), parameter count and memory plan,
# identically on every call, and the printed recipe is itself a valid recipe.
source "$(dirname "$0")/lib/common.bash"

make_corpus
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
tiny_recipe >tiny.toml
expect_exit 0 "dry run" -- "$USTRAIN" train tiny.toml --dry-run --set train.recompute=selective
cp out.txt first.txt
"$USTRAIN" train tiny.toml --dry-run --set train.recompute=selective >second.txt 2>&1
cmp -s first.txt second.txt && pass "dry-run output is stable" || fail "dry-run output differs between calls"
cp first.txt out.txt
expect_output "^parameters: [0-9]+" "prints the parameter count"
expect_output "^memory plan" "prints the memory plan"
for cat in parameters gradients optimizer activations workspace total; do
  expect_output "^  $cat +[0-9.]+ (B|KiB|MiB|GiB)" "plan has $cat bytes"
done
for key in name seed output_dir vocab_size d_model n_layers n_heads n_kv_heads ffn_hidden rope_theta norm_eps \
           tied_embeddings max_seq_len init_std path tokenizer steps micro_batch global_batch seq_len grad_clip \
           precision recompute eval_interval eval_batches lr beta1 beta2 eps weight_decay warmup_steps decay \
           min_lr dp tp pp cp ep zero pp_schedule virtual_stages interval keep_last jsonl tensorboard level type threads \
           max_bad_steps; do
  expect_output "^$key = " "resolved recipe has $key"
done
expect_output '^recompute = "selective"' "--set override is applied"
expect_output '^dp = 1 ' "dp is resolved (one process, no launcher)"
[[ ! -d runs ]] && pass "dry run writes nothing" || fail "dry run created a run directory"

# Expert parallelism: each ep rank's experts, the dispatch capacity, buffers and all-to-all bytes.
expect_exit 0 "dry run with expert parallelism" -- "$USTRAIN" train tiny.toml --dry-run --set model.n_experts=4 \
  --set parallel.dp=2 --set parallel.ep=2
expect_output "^expert parallelism: 2 ranks borrowed from dp x cp, each holding 2 of the 4 experts" "names the experts per ep rank"
expect_output "rank 0: experts 0-1, rank 1: experts 2-3" "lists each ep rank's experts"
expect_output "dispatch capacity 512 rows per round \(2 x the 256 rows" "names the capacity"
expect_output "all-to-all sent per rank and step under uniform routing: [0-9.]+ (KiB|MiB)" "names the all-to-all volume"
# Under tp the tp ranks share the rows: a gathered buffer in the plan, and the tp group's share named.
expect_exit 0 "dry run with expert and tensor parallelism" -- "$USTRAIN" train tiny.toml --dry-run \
  --set model.n_experts=4 --set parallel.dp=2 --set parallel.tp=2 --set parallel.ep=2
expect_output "under tp = 2 each tp rank sends 1/2 of its position's rows" "names the tp ranks' share"
expect_output "in a gathered buffer of 512 x 32\)" "plans the gathered buffer"
expect_output "per rank and step under uniform routing: 80.0 KiB \(2 MoE layer\(s\) on pipeline rank 0 x 1 micro-batch\(es\) x 40.0 KiB per layer" "halves each rank's all-to-all bytes"
cp first.txt out.txt

# The printed recipe parses back to the same resolved recipe.
sed -n '/^# resolved recipe/,/^parameters:/p' first.txt | sed '$d' >resolved.toml
"$USTRAIN" train resolved.toml --dry-run >third.txt 2>&1
diff <(sed -n '/^parameters:/,$p' first.txt) <(sed -n '/^parameters:/,$p' third.txt) >/dev/null \
  && pass "resolved recipe round-trips" || fail "resolved recipe does not round-trip"
finish

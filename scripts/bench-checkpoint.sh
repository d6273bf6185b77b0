#!/usr/bin/env bash
# Checkpoint benchmark: a model whose state (fp32 weights + two AdamW moments) is about 1 GB,
# trained for a few short steps with checkpoints every N steps, synchronous and in the
# background, against the same run without checkpoints; then a full load through `eval`.
# Prints the pause per save, the step-time overhead and the load time.
# Usage: scripts/bench-checkpoint.sh [build/app/ustrain]
set -euo pipefail
ustrain=$(realpath "${1:-build/app/ustrain}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

for i in $(seq 1 3000); do echo "document $i: the quick brown fox jumps over the lazy dog"; echo; done >corpus.txt
"$ustrain" data convert --input corpus.txt --output data --val-fraction 0.1 >/dev/null 2>&1
cat >big.toml <<'TOML'
[run]
name = "big"
[model]
vocab_size = 257
d_model = 768
n_layers = 12
n_heads = 12
n_kv_heads = 4
ffn_hidden = 2048
max_seq_len = 64
[data]
path = "data"
[train]
steps = 30
micro_batch = 1
global_batch = 1
seq_len = 64
eval_interval = 0
[log]
interval = 10
TOML

run() {  # name, extra --set arguments...
  local name=$1; shift
  local t0=$(date +%s.%N)
  "$ustrain" train big.toml --set run.name="$name" "$@" >"$name.log" 2>&1
  local t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" -v n="$name" 'BEGIN { printf "%-28s %7.2f s wall\n", n, b - a }'
  grep -E "checkpoint step|paused for checkpoints|host snapshot" "$name.log" | sed 's/^[^|]* info /    /' | tail -4
}
run none --set checkpoint.interval=0 --set checkpoint.async=false
run every10-sync --set checkpoint.interval=10 --set checkpoint.async=false
run every10-async --set checkpoint.interval=10 --set checkpoint.async=true
du -sh big*/checkpoints/latest/ 2>/dev/null | head -1 || true
ckpt=$(ls -d every10-sync/checkpoints/step-* 2>/dev/null | tail -1 || true)
[[ -n $ckpt ]] || ckpt=$(ls -d runs/every10-sync/checkpoints/step-* | tail -1)
du -sh "$ckpt"
sync; t0=$(date +%s.%N)
"$ustrain" eval big.toml --checkpoint "$ckpt" --batches 1 >eval.log 2>&1 || cat eval.log
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "load + 1-batch eval from the page cache: %.2f s\n", b - a }'

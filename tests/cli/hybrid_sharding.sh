# Hybrid sharding (parallel.dp_shard): ZeRO over blocks of dp_shard data-parallel ranks. The
# dry run's memory plan divides the sharded state by dp_shard, not dp; a step moves the block's
# ZeRO traffic plus the all-reduce of its shard across the blocks (dp_replicate_comm_bytes); a
# dp_shard that does not divide dp, or one with ZeRO-0, is refused with the keys named.
source "$(dirname "$0")/lib/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
layout=(--set parallel.dp=4 --set train.micro_batch=2 --set parallel.zero=3)

# The memory plan's optimizer line (AdamW moments, sharded from stage 1 on), in bytes.
optimizer_bytes() {
  sed -n 's/^  optimizer  *\([0-9.]*\) \(B\|KiB\|MiB\|GiB\).*/\1 \2/p' out.txt | head -1 |
    awk '{ f = $2 == "KiB" ? 1024 : $2 == "MiB" ? 1048576 : $2 == "GiB" ? 1073741824 : 1; printf "%.0f\n", $1 * f }'
}
expect_exit 0 "dry run, ZeRO-3 over dp = 4" -- "$USTRAIN" train tiny.toml --dry-run "${layout[@]}"
over_dp=$(optimizer_bytes)
expect_exit 0 "dry run, ZeRO-3 over blocks of 2" -- "$USTRAIN" train tiny.toml --dry-run "${layout[@]}" \
  --set parallel.dp_shard=2
expect_output "ZeRO stage 3 over blocks of 2 of the 4 data-parallel ranks" "names the blocks"
over_blocks=$(optimizer_bytes)
[[ -n $over_dp && -n $over_blocks ]] && awk -v a="$over_dp" -v b="$over_blocks" 'BEGIN { r = b / a; exit !(r > 1.9 && r < 2.1) }' &&
  pass "the moments per rank double from 1/4 to 1/2 ($over_dp -> $over_blocks bytes)" ||
  fail "the moments per rank: $over_dp bytes over dp, $over_blocks over blocks of 2 (expected twice)"

# Refusals, naming the keys.
expect_exit 2 "dp_shard = 3 with dp = 4" -- "$USTRAIN" train tiny.toml --dry-run "${layout[@]}" --set parallel.dp_shard=3
expect_output "parallel.dp_shard = 3 does not divide parallel.dp = 4" "says dp_shard must divide dp"
expect_exit 2 "dp_shard = 2 with ZeRO-0" -- "$USTRAIN" train tiny.toml --dry-run "${layout[@]}" \
  --set parallel.dp_shard=2 --set parallel.zero=0
expect_output "parallel.dp_shard = 2 with parallel.zero = 0" "says ZeRO-0 shards nothing"

# Traffic in Psi per step, fp32 ZeRO-1: 2 inside the block, and the 1/2 shard all-reduced across
# the two blocks (counted twice): 1 more, which is what crossed the blocks.
metric() { sed -n "s/.*\"kind\":\"train\".*\"$2\":\([-0-9.e+]*\).*/\1/p" "runs/$1/metrics.jsonl" | tail -1; }
common=(--set train.steps=2 --set log.interval=1 --set train.eval_interval=0 --set parallel.zero=1
        --set parallel.dp=4 --set train.micro_batch=2)
expect_exit 0 "4 ranks in blocks of 2" -- timeout 300 mpiexec -n 4 --oversubscribe --allow-run-as-root \
  "$USTRAIN" train tiny.toml "${common[@]}" --set parallel.dp_shard=2 --set run.name=hsdp
expect_exit 0 "4 ranks, plain ZeRO-1" -- timeout 300 mpiexec -n 4 --oversubscribe --allow-run-as-root \
  "$USTRAIN" train tiny.toml "${common[@]}" --set run.name=plain
psi=$(metric hsdp dp_comm_psi) psi_plain=$(metric plain dp_comm_psi)
across=$(metric hsdp dp_replicate_comm_bytes) total=$(metric hsdp dp_comm_bytes)
awk -v v="$psi" 'BEGIN { exit !(v > 2.99 && v < 3.01) }' && pass "ZeRO-1 in blocks of 2 moves 3 Psi ($psi)" ||
  fail "ZeRO-1 in blocks of 2 moves ${psi:-nothing} Psi, expected 3"
awk -v v="$psi_plain" 'BEGIN { exit !(v > 1.99 && v < 2.01) }' && pass "plain ZeRO-1 still moves 2 Psi ($psi_plain)" ||
  fail "plain ZeRO-1 moves ${psi_plain:-nothing} Psi, expected 2"
awk -v a="$across" -v t="$total" 'BEGIN { exit !(a > 0 && a * 3 > t * 0.99 && a * 3 < t * 1.01) }' &&
  pass "a third of it crossed the blocks ($across of $total bytes)" ||
  fail "dp_replicate_comm_bytes = ${across:-missing} of ${total:-missing}, expected a third"
[[ $(metric plain dp_replicate_comm_bytes) == 0 ]] && pass "nothing crosses blocks without hybrid sharding" ||
  fail "dp_replicate_comm_bytes without hybrid sharding: $(metric plain dp_replicate_comm_bytes)"
finish

# Tensor parallelism from the command line under mpiexec: what a wrong launch or an
# unsplittable model says on every rank (before any work, never a hang), what ranks launched
# with different recipes say, what --dry-run prints, and that a checkpoint saved at tp = 2
# exports to exactly the bytes of the same weights held unsharded. (Equivalence with one rank
# is the layout matrix's: tests/layout.)
source "$(dirname "$0")/lib/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
# Every rank reports for itself: mpirun would otherwise stop the job at the first exit.
each_rank() {
  local n=$1; shift
  timeout 120 mpiexec -n "$n" --oversubscribe --allow-run-as-root --mca orte_abort_on_non_zero_status 0 \
    --mca orte_allowed_exit_without_sync 1 bash -c '"$@"; echo "rank ${OMPI_COMM_WORLD_RANK} exited with status $?"' \
    rank "$@"
}
# count_lines PATTERN N DESCRIPTION: the last output has N lines matching the fixed string.
count_lines() {
  local got
  got=$(grep -cF -- "$1" "$WORK/out.txt")
  [[ $got == "$2" ]] && pass "$3" || { fail "$3: $got lines contain '$1', expected $2"; cat "$WORK/out.txt"; }
}

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
common=(--set train.steps=6 --set train.eval_interval=3 --set checkpoint.interval=3)

expect_exit 0 "three ranks for a layout of two" -- each_rank 3 "$USTRAIN" train tiny.toml "${common[@]}" \
  --set parallel.tp=2 --set parallel.dp=1
count_lines "needs 2 processes but 3 were launched" 3 "every rank names the launch and the layout"
count_lines "exited with status 2" 3 "every rank exits with status 2"

expect_exit 0 "kv heads that do not split over tp" -- each_rank 2 "$USTRAIN" train tiny.toml "${common[@]}" \
  --set parallel.tp=2 --set model.n_kv_heads=1
count_lines "model.n_kv_heads = 1 is not divisible by parallel.tp = 2" 2 "every rank names the heads and tp"
count_lines "exited with status 2" 2 "every rank exits with status 2"
[[ ! -d runs ]] && pass "nothing was written" || fail "a refused launch created runs/"

# Ranks launched with different recipes stop before any work, naming the first difference.
start=$SECONDS
expect_exit 0 "ranks with different seeds" -- timeout 120 mpiexec --oversubscribe --allow-run-as-root \
  --mca orte_abort_on_non_zero_status 0 --mca orte_allowed_exit_without_sync 1 \
  -n 1 bash -c '"$0" train tiny.toml --set parallel.dp=2 --set train.micro_batch=4; echo "exited with status $?"' \
  "$USTRAIN" : \
  -n 1 bash -c '"$0" train tiny.toml --set parallel.dp=2 --set train.micro_batch=4 --set run.seed=99; echo "exited with status $?"' \
  "$USTRAIN"
count_lines "the ranks of this job disagree on run.seed (rank 0: 1234; rank 1: 99)" 2 "both ranks name the key, the values and the ranks"
count_lines "exited with status 2" 2 "both ranks exit with status 2"
(( SECONDS - start < 60 )) && pass "no hang ($((SECONDS - start)) s)" || fail "took $((SECONDS - start)) s"
[[ ! -d runs ]] && pass "nothing was written" || fail "disagreeing ranks created runs/"

expect_exit 0 "dry run of a tensor-parallel layout" -- "$USTRAIN" train tiny.toml --set parallel.tp=2 --dry-run
expect_output "tensor parallelism: 2 ranks with sequence parallelism; each holds 2 of 4 heads, 1 of 2 kv heads, 32 of 64 MLP units and 129 vocabulary rows \(the vocabulary padded to 258\)" \
  "the dry run says how the model splits"
expect_output "the memory plan below is one rank's" "the plan is one rank's"

# A checkpoint saved at tp = 2 (vocabulary 257 padded to 258) exports to the bytes of the
# same weights held whole: import the export (an unsharded checkpoint) and export that again.
expect_exit 0 "train at tp = 2" -- timeout 300 mpiexec -n 2 --oversubscribe --allow-run-as-root "$USTRAIN" train \
  tiny.toml "${common[@]}" --set parallel.tp=2 --set run.name=tp2
ckpt=runs/tp2/checkpoints/step-00000006
[[ $(ls "$ckpt"/rank-*.safetensors | wc -l) -eq 2 ]] && pass "two rank files" || fail "rank files: $(ls "$ckpt")"
expect_exit 0 "export the tp = 2 checkpoint" -- "$USTRAIN" ckpt export "$ckpt" exported
expect_exit 0 "import it as one unsharded checkpoint" -- "$USTRAIN" ckpt import exported whole --recipe tiny.toml
expect_exit 0 "export the unsharded checkpoint" -- "$USTRAIN" ckpt export whole exported-again
cmp exported/model.safetensors exported-again/model.safetensors && pass "the exports are byte-identical" ||
  fail "the exports differ"
expect_exit 0 "inspect the tp = 2 checkpoint" -- "$USTRAIN" ckpt inspect "$ckpt"
expect_output "model.embed_tokens.weight.*257, 32" "tensors keep their global shapes, without padding"
finish

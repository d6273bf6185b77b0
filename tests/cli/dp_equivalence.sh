# Data parallelism end to end under mpiexec: dp = 2 and 4 (with and without gradient
# accumulation) give the per-step losses of the one-process run with the same global batch,
# to float32 reassociation; a launch that does not match the layout fails on every rank.
source "$(dirname "$0")/lib/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
mpi() { local n=$1; shift; timeout 300 mpiexec -n "$n" --oversubscribe --allow-run-as-root "$@"; }

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
common=(--set train.steps=24 --set train.eval_interval=12 --set checkpoint.interval=0)

expect_exit 0 "dp=1, 4 micro-batches of 2" -- "$USTRAIN" train tiny.toml "${common[@]}" --set train.micro_batch=2 \
  --set run.name=dp1
# compare NAME: per-step losses of runs/NAME within 1e-5 relative of runs/dp1.
compare() {
  if [[ $(losses "runs/$1/metrics.jsonl" | wc -l) -eq 24 ]] &&
     paste <(losses runs/dp1/metrics.jsonl) <(losses "runs/$1/metrics.jsonl") |
       awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1) bad = 1 } END { exit bad }'; then
    pass "$1 matches dp=1 at every step"
  else
    fail "$1 differs from dp=1: $(paste <(losses runs/dp1/metrics.jsonl) <(losses "runs/$1/metrics.jsonl") | head -3 | tr '\n\t' '; ')"
  fi
}
expect_exit 0 "dp=2, 2 micro-batches of 2" -- mpi 2 "$USTRAIN" train tiny.toml "${common[@]}" \
  --set parallel.dp=2 --set train.micro_batch=2 --set run.name=dp2
compare dp2
expect_exit 0 "dp=2, 1 micro-batch of 4" -- mpi 2 "$USTRAIN" train tiny.toml "${common[@]}" \
  --set parallel.dp=2 --set train.micro_batch=4 --set run.name=dp2-noaccum
compare dp2-noaccum
expect_exit 0 "dp=4, 1 micro-batch of 2" -- mpi 4 "$USTRAIN" train tiny.toml "${common[@]}" \
  --set parallel.dp=4 --set train.micro_batch=2 --set run.name=dp4
compare dp4
expect_output "4 data-parallel ranks" "the log names the layout"

# A checkpoint written at dp=2 resumes at dp=1 (the state is replicated, the data position global).
expect_exit 0 "dp=2 run with a checkpoint at step 12" -- mpi 2 "$USTRAIN" train tiny.toml "${common[@]}" \
  --set parallel.dp=2 --set train.micro_batch=2 --set checkpoint.interval=12 --set run.name=dp2-ckpt
expect_exit 0 "resume it at dp=1" -- "$USTRAIN" train tiny.toml "${common[@]}" --set train.micro_batch=2 \
  --set run.name=dp2-ckpt --resume runs/dp2-ckpt/checkpoints/step-00000012 --force-resume
compare dp2-ckpt

expect_exit 2 "two processes for a one-process layout" -- mpi 2 "$USTRAIN" train tiny.toml --set parallel.dp=1 \
  --set run.name=bad
expect_output "needs 1 processes but 2 were launched" "the mismatch is explained"
[[ $(grep -c "needs 1 processes" out.txt) -eq 2 ]] && pass "every rank reports it" || fail "not every rank reported"
finish

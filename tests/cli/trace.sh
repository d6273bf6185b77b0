# log.trace_steps: a Chrome trace of the named steps, per rank and merged, on one rank and
# under mpiexec with pipeline, tensor and data parallelism (checked by lib/check_trace.py with
# Python's json module alone); and what a malformed or out-of-range value says.
source "$(dirname "$0")/lib/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
check_trace() { "$PYTHON" "$SOURCE_DIR/tests/cli/lib/check_trace.py" "$@"; }

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
# Steps 2-3 of 4, with a validation pass and a checkpoint at step 2 inside the range.
common=(--set train.steps=4 --set schedule.warmup_steps=1 --set train.eval_interval=2 --set checkpoint.interval=2 --set log.trace_steps=2-3)

expect_exit 2 "a malformed range" -- "$USTRAIN" train tiny.toml --set log.trace_steps=2..3
expect_output 'log.trace_steps = "2..3" is not a step range; write "10-12"' "the key, the value and an example"
expect_exit 2 "a range past the last step" -- "$USTRAIN" train tiny.toml --set train.steps=4 --set schedule.warmup_steps=1 \
  --set log.trace_steps=3-5
expect_output 'log.trace_steps = "3-5" reaches past train.steps = 4.*"3-4"' "the range, train.steps and a fix"
[[ ! -d runs ]] && pass "a refused recipe wrote nothing" || fail "a refused recipe created runs/"

expect_exit 0 "train without a trace" -- "$USTRAIN" train tiny.toml --set train.steps=2 --set schedule.warmup_steps=1 --set run.name=plain
[[ ! -e runs/plain/trace ]] && pass "no trace unless asked for" || fail "runs/plain/trace exists"

expect_exit 0 "one rank, steps 2-3" -- "$USTRAIN" train tiny.toml "${common[@]}" --set run.name=one
expect_output "trace of steps 2-3: .*runs/one/trace/trace.json \([0-9]+ spans on rank 0" "the run says where the trace is"
grep -q "more than the .* its memory plan allows for" "$WORK/out.txt" && fail "one rank: the trace outgrew its plan"
expect_exit 0 "one rank's trace" -- check_trace runs/one/trace 1 2 3 2 checkpoint
cat "$WORK/out.txt"

# A single step, the run's last: the final checkpoint is in it.
expect_exit 0 "one rank, the last step alone" -- "$USTRAIN" train tiny.toml --set train.steps=3 --set schedule.warmup_steps=1 \
  --set 'log.trace_steps="3"' --set run.name=last
expect_exit 0 "the last step's trace" -- check_trace runs/last/trace 1 3 3 2 checkpoint

mpi() { timeout 300 mpiexec -n 2 --oversubscribe --allow-run-as-root "$USTRAIN" train tiny.toml "${common[@]}" "$@"; }
expect_exit 0 "two pipeline stages" -- mpi --set parallel.pp=2 --set run.name=pp2
grep -q "more than the .* its memory plan allows for" "$WORK/out.txt" && fail "pp2: the trace outgrew its plan"
expect_exit 0 "the pipeline's trace" -- check_trace runs/pp2/trace 2 2 3 2 comm pipeline checkpoint
cat "$WORK/out.txt"
expect_exit 0 "two tensor-parallel ranks" -- mpi --set parallel.tp=2 --set run.name=tp2
no_overrun() {  # the trace stayed within the spans its memory plan counted
  if grep -q "more than the .* its memory plan allows for" "$WORK/out.txt"; then fail "$1: the trace outgrew its plan"
  else pass "$1: the trace stayed within its memory plan"; fi
}
no_overrun "two tensor-parallel ranks"
expect_exit 0 "the tensor-parallel trace" -- check_trace runs/tp2/trace 2 2 3 2 comm checkpoint
expect_exit 0 "two data-parallel ranks, ZeRO-3" -- mpi --set parallel.dp=2 --set parallel.zero=3 --set run.name=dp2
expect_exit 0 "the data-parallel trace" -- check_trace runs/dp2/trace 2 2 3 1 comm checkpoint
finish

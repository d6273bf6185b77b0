# parallel.layout = "auto": `ustrain train` plans its own layout for the processes launched
# (core/train/auto_layout.h). --dry-run shows the choice; a run prints it, records it in run.json
# and trains with it; a resume on another process count plans again; keys set by hand constrain
# the search; no fitting layout and an impossible key set by hand are one message and exit 2.
source "$(dirname "$0")/lib/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1

make_corpus
tiny_recipe >tiny.toml
printf '[parallel]\nlayout = "auto"\n[device]\nthreads = 1\n' >>tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
mpi=(timeout 300 mpiexec -n)

# The dry run shows the layout it would train with (one process without a launcher).
expect_exit 0 "dry run, one process" -- "$USTRAIN" train tiny.toml --dry-run
expect_output "^# auto layout for 1 process\(es\) on cpu: dp 1 tp 1 pp 1, .*predicted .* s per step.*planned in" \
  "prints the chosen layout and its predictions"
expect_exit 0 "dry run, two processes" -- "${mpi[@]}" 2 "$USTRAIN" train tiny.toml --dry-run
expect_output "auto layout for 2 process\(es\) on cpu" "plans for the processes launched"

# Keys set by hand constrain the search; without a launcher the dry run plans for the processes they need.
expect_exit 0 "dry run, tp = 2 set by hand" -- "$USTRAIN" train tiny.toml --dry-run --set parallel.tp=2
expect_output "auto layout for 2 process\(es\) on cpu: dp 1 tp 2(\+sp)? pp 1, .*set by hand: parallel.tp" "keeps tp = 2"
expect_exit 0 "dry run, pp = 2 set by hand" -- "${mpi[@]}" 2 "$USTRAIN" train tiny.toml --dry-run --set parallel.pp=2
expect_output "dp 1 tp 1 pp 2, .*set by hand: parallel.pp" "keeps pp = 2"
# The recipe file's micro-batch is searched; one given with --set is kept, as plan keeps it.
expect_exit 0 "dry run, micro-batch and recompute given with --set" -- "$USTRAIN" train tiny.toml --dry-run \
  --set train.micro_batch=1 --set train.recompute=full
expect_output "set by hand: train.micro_batch, train.recompute" "keeps the micro-batch and recompute policy given"
expect_output "8 micro-batch\(es\) of 1, recompute full" "plans micro-batches of 1, recomputed"

# An impossible key set by hand: the planner's own message, on every rank (dp 3 alone would fit
# the batch of 12).
expect_exit 2 "tp = 2 set by hand on 3 processes" -- "${mpi[@]}" 3 "$USTRAIN" train tiny.toml --set parallel.tp=2 \
  --set train.global_batch=12
expect_output "no layout of 3 devices has parallel.tp = 2, set by hand" "names the key set by hand"

# No layout fits: one message naming the smallest layout and what to do; nothing written.
expect_exit 2 "a model no layout fits" -- "$USTRAIN" train tiny.toml --set model.n_layers=4096 \
  --set model.d_model=256 --set model.ffn_hidden=1024 --set run.name=huge
expect_output "tiny.toml: parallel.layout = \"auto\" for 1 process\(es\) on cpu: no layout fits: the smallest .* GiB per device; use more devices" \
  "says no layout fits and why"
[[ ! -e runs/huge ]] && pass "writes no run directory" || fail "runs/huge exists"

# A run on two processes prints the layout, records it and trains with it.
common=(--set train.steps=10 --set checkpoint.interval=5 --set train.eval_interval=5 --set log.interval=1)
expect_exit 0 "train on 2 processes" -- "${mpi[@]}" 2 "$USTRAIN" train tiny.toml "${common[@]}" --set run.name=auto
expect_output "info auto layout for 2 process\(es\) on cpu: " "prints the layout"
record() { "$PYTHON" -c "import json,sys; s=json.load(open('runs/auto/run.json'))['sessions'][int(sys.argv[1])]; print(eval(sys.argv[2]))" "$@"; }
[[ $(record -1 "s['auto_layout']['processes']") == 2 ]] && pass "run.json records the processes planned for" ||
  fail "run.json: $(cat runs/auto/run.json)"
ranks=$(record -1 "(lambda l: l['dp'] * l['tp'] * l['pp'] * l['cp'])(s['auto_layout']['layout'])")
[[ $ranks == 2 ]] && pass "the recorded layout spans the 2 processes" || fail "recorded layout spans $ranks"
[[ $(record -1 "s['auto_layout']['predicted_step_s'] > 0 and s['auto_layout']['predicted_memory_bytes'] > 0") == True ]] &&
  pass "run.json records the predictions" || fail "predictions: $(record -1 "s['auto_layout']")"

# Resumed on 4 processes: planned again for 4, continuing from step 5.
expect_exit 0 "resume on 4 processes" -- "${mpi[@]}" 4 "$USTRAIN" train tiny.toml "${common[@]}" --set run.name=auto \
  --resume runs/auto/checkpoints/step-00000005
expect_output "auto layout for 4 process\(es\) on cpu" "plans again for 4"
[[ $(record -1 "s['auto_layout']['processes']") == 4 && $(record -1 "s['resumed_from'] is not None") == True ]] &&
  pass "run.json records the second session's layout" || fail "second session: $(record -1 "s")"

# A manual recipe records no choice.
expect_exit 0 "train, manual layout" -- "$USTRAIN" train tiny.toml --set parallel.layout=manual --set train.steps=2 \
  --set run.name=manual
"$PYTHON" -c "import json; assert 'auto_layout' not in json.load(open('runs/manual/run.json'))['sessions'][-1]" &&
  pass "a manual layout records no auto_layout" || fail "manual run.json has auto_layout"
finish

# The run directory's train.log (the console log, appended across resumes) and run.json (one
# entry per session: version, git commit, command line, hosts and ranks, start and end, how it
# ended), on a first start, a resume, a stop by signal, an error, a start that fails before its
# first step and --overwrite; and the log line of a resume whose longer train.steps stretches
# the learning-rate schedule.
source "$(dirname "$0")/lib/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
# json FILE EXPR: a Python expression over the parsed file `j`.
json() { "$PYTHON" -c "import json, sys; j = json.load(open(sys.argv[1])); print($2)" "$1"; }
check() { [[ $1 == "$2" ]] && pass "$3" || fail "$3: got '$1', expected '$2'"; }

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
run=runs/tiny
short=(--set train.steps=4 --set train.eval_interval=0 --set schedule.warmup_steps=1 --set log.interval=1)

expect_exit 0 "first session" -- "$USTRAIN" train tiny.toml "${short[@]}"
[[ -f $run/train.log ]] && pass "train.log exists" || fail "no train.log"
cmp -s out.txt "$run/train.log" \
  && pass "train.log holds the console log" || { fail "train.log differs from the console"; diff out.txt "$run/train.log" | head; }
check "$(json $run/run.json 'len(j["sessions"])')" 1 "run.json has one session"
check "$(json $run/run.json 'j["sessions"][0]["status"]')" completed "the session completed"
check "$(json $run/run.json 'j["sessions"][0]["last_step"]')" 4 "at step 4"
check "$(json $run/run.json 'j["sessions"][0]["command_line"][1:3]')" "['train', 'tiny.toml']" "with its command line"
# The commit the build was configured from: HEAD or one before it (a commit since configures
# again at the next build), or "unknown" outside a git checkout.
commit=$(json $run/run.json 'j["sessions"][0]["build"]["git_commit"]')
if git -C "$SOURCE_DIR" rev-parse HEAD >/dev/null 2>&1; then
  [[ $commit =~ ^[0-9a-f]{40}$ ]] && git -C "$SOURCE_DIR" merge-base --is-ancestor "$commit" HEAD \
    && pass "and the build's git commit" || fail "git commit '$commit' is not HEAD or before it"
else
  check "$commit" unknown "and 'unknown' for the commit outside a git checkout"
fi
check "$(json $run/run.json 'j["sessions"][0]["ustrain_version"]')" "$("$USTRAIN" --version | cut -d' ' -f2)" \
  "and the version"
check "$(json $run/run.json '[r["pid"] > 0 and r["host"] != "" for r in j["sessions"][0]["ranks"]]')" "[True]" \
  "and its rank's host and pid"
check "$(json $run/run.json 'j["sessions"][0]["start_time"] <= j["sessions"][0]["end_time"]')" True "start before end"

# A resume with more steps: the schedule is stretched, and the log and record grow.
cp "$run/train.log" first.log
expect_exit 0 "resume to 8 steps" -- "$USTRAIN" train tiny.toml "${short[@]}" --set train.steps=8 --resume auto
expect_output "train.steps is 8, the checkpoint's run planned 4: the learning-rate schedule is stretched to end at step 8 instead of 4, so the learning rate goes back up from 0.000e\+00 at step 4 to [0-9.e+-]+ at step 5" \
  "the resume says the LR goes back up, with the numbers"
grep -q "the learning rate goes back up" "$run/train.log" && pass "train.log has it too" || fail "not in train.log"
(( $(wc -l <"$run/train.log") > $(wc -l <first.log) )) && head -n "$(wc -l <first.log)" "$run/train.log" | cmp -s - first.log \
  && pass "train.log was appended to" || fail "train.log was not appended to"
check "$(json $run/run.json 'len(j["sessions"])')" 2 "run.json has a second session"
check "$(json $run/run.json 'j["sessions"][1]["resumed_from"]')" "$run/checkpoints/step-00000004" "resumed from step 4"

# A stop by signal and an error end sessions too.
"$USTRAIN" train tiny.toml "${short[@]}" --set train.steps=400 --set run.name=stopped >stop.txt 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "step  *[0-9]*/400" stop.txt && break; sleep 0.2; done
kill -TERM $pid
wait $pid
check "$?" 3 "SIGTERM stops with status 3"
check "$(json runs/stopped/run.json 'j["sessions"][0]["status"]')" "stopped by SIGTERM" "run.json says so"
expect_exit 2 "an error after the start" -- env USTRAIN_TEST_NONFINITE_STEPS=2-4 "$USTRAIN" train tiny.toml "${short[@]}" \
  --set train.max_bad_steps=2 --set run.name=failed
check "$(json runs/failed/run.json 'j["sessions"][0]["status"]')" error "run.json records the error"
check "$(json runs/failed/run.json '"training stopped at step 3" in j["sessions"][0]["error"]')" True "with its message"
grep -q " error training stopped at step 3" runs/failed/train.log && pass "train.log ends with the error" \
  || fail "the error is not in train.log"

# A refused start leaves the run's files alone; --overwrite begins them afresh.
cp "$run/run.json" before.json
expect_exit 2 "a second start into the same run" -- "$USTRAIN" train tiny.toml "${short[@]}"
cmp -s before.json "$run/run.json" && pass "a refused start does not touch run.json" || fail "run.json changed"
expect_exit 0 "--overwrite" -- "$USTRAIN" train tiny.toml "${short[@]}" --overwrite
check "$(json $run/run.json 'len(j["sessions"])')" 1 "--overwrite begins run.json again"
grep -q "goes back up" "$run/train.log" && fail "train.log kept the old run" || pass "--overwrite begins train.log again"

# A start that fails before its first step (here: its checkpoint directory is a file) records
# the error and leaves nothing that a next start would have to --overwrite or --resume; the
# file that was there before it stays.
mkdir -p runs/early && echo "not a directory" >runs/early/checkpoints
expect_exit 2 "a start that fails before the first step" -- "$USTRAIN" train tiny.toml "${short[@]}" \
  --set run.name=early --set checkpoint.interval=2
expect_output "checkpoints is not a directory" "  ... naming the cause"
check "$(json runs/early/run.json 'j["sessions"][0]["status"]')" error "run.json records the failed start"
[[ -f runs/early/checkpoints ]] && pass "the file it found stays" || fail "the failed start removed a file"
rm runs/early/checkpoints
expect_exit 0 "the next start needs neither --overwrite nor --resume" -- "$USTRAIN" train tiny.toml "${short[@]}" \
  --set run.name=early --set checkpoint.interval=2

# Under mpirun every rank is listed, and only rank 0 writes the log.
expect_exit 0 "two ranks" -- timeout 300 mpiexec -n 2 --oversubscribe --allow-run-as-root "$USTRAIN" train tiny.toml \
  "${short[@]}" --set run.name=two
check "$(json runs/two/run.json '[r["rank"] for r in j["sessions"][0]["ranks"]]')" "[0, 1]" "both ranks are listed"
check "$(json runs/two/run.json 'j["sessions"][0]["launcher"] + " " + str(j["sessions"][0]["world_size"])')" \
  "mpirun 2" "with the launcher and world size"
check "$(json runs/two/run.json 'len(set(r["pid"] for r in j["sessions"][0]["ranks"]))')" 2 "and their own pids"
finish

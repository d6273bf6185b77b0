# `train --dry-run` without a launcher: a layout of several ranks is planned as that many
# processes and the output ends with the mpirun, srun and sbatch lines that start it (the
# printed mpirun line trains); the checks training makes first run too (device.threads, the
# shards' checksums); pipeline messages and the timeline legend show resolved numbers and
# explain their notation.
source "$(dirname "$0")/lib/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1

make_corpus
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
tiny_recipe >tiny.toml

# --- a layout of two ranks, dp unset ---------------------------------------------------------
expect_exit 0 "dry run of tp = 2 without a launcher" -- \
  "$USTRAIN" train tiny.toml --dry-run --set parallel.tp=2 --set 'run.name="two ranks"'
expect_output '^this layout needs 2 processes \(dp x tp x pp x cp = 1 x 2 x 1 x 1' "says how many processes"
expect_output "^  mpirun -n 2 ustrain train tiny.toml --set parallel.tp=2 --set 'run.name=\"two ranks\"'\$" \
  "prints the mpirun line with the --set options, quoted for the shell"
expect_output "^  srun --mpi=pmix -n 2 ustrain train tiny.toml --set parallel.tp=2 --set 'run.name=\"two ranks\"'\$" \
  "prints the srun line"
expect_output "^  sbatch --ntasks=2 scripts/slurm/train.sbatch tiny.toml --set parallel.tp=2 --set 'run.name=\"two ranks\"'\$" \
  "prints the sbatch line"
# The printed mpirun line starts the run it describes.
line=$(sed -n 's/^  mpirun -n 2 ustrain /mpirun -n 2 "$USTRAIN" /p' out.txt)
expect_exit 0 "the printed mpirun line trains" -- bash -c "USTRAIN='$USTRAIN'; $line --set train.steps=2 --set train.eval_interval=0"
[[ -f "runs/two ranks/metrics.jsonl" ]] && pass "the run wrote its metrics" || fail "no runs/two ranks/metrics.jsonl"

# dp set: planned as dp x tp processes, where it used to be planned as one.
expect_exit 0 "dry run of dp = 2 without a launcher" -- "$USTRAIN" train tiny.toml --dry-run --set parallel.dp=2
expect_output '^this layout needs 2 processes \(dp x tp x pp x cp = 2 x 1 x 1 x 1' "dp = 2 needs 2 processes"
expect_output '^  mpirun -n 2 ustrain train tiny.toml --set parallel.dp=2$' "dp = 2: the mpirun line"

expect_exit 0 "dry run of one process" -- "$USTRAIN" train tiny.toml --dry-run
grep -q "this layout needs" out.txt && fail "one process needs no launch lines" || pass "one process: no launch lines"

# --- the checks training makes first ----------------------------------------------------------
expect_exit 2 "device.threads far above the cores is refused" -- \
  "$USTRAIN" train tiny.toml --dry-run --set device.threads=100000
expect_output "device.threads = 100000, but this process may run on [0-9]+ core" "names device.threads and the cores"
cp -r data damaged
printf 'XXXX' | dd of=damaged/train-00000.h5 bs=1 seek=100 conv=notrunc 2>/dev/null
expect_exit 2 "a damaged shard is refused under data.verify = checksums" -- \
  "$USTRAIN" train tiny.toml --dry-run --set 'data.path="damaged"' --set 'data.verify="checksums"'
expect_output "shard damaged/train-00000.h5 fails its checksum" "names the damaged shard"

# --- pipeline: resolved numbers and the timeline's notation ----------------------------------
expect_exit 2 "interleaved with one virtual stage, dp unset" -- "$USTRAIN" train tiny.toml --dry-run \
  --set model.n_layers=4 --set parallel.pp=2 --set parallel.pp_schedule=interleaved --set parallel.virtual_stages=1
expect_output "needs parallel.virtual_stages >= 2 \(got 1\)" "names the virtual stages"
grep -q '\* 0)' out.txt && fail "the refusal shows the unset dp as 0" || pass "the refusal shows no unset dp"
expect_exit 0 "interleaved dry run" -- "$USTRAIN" train tiny.toml --dry-run --set model.n_layers=4 --set parallel.pp=2 \
  --set parallel.pp_schedule=interleaved --set parallel.virtual_stages=2
expect_output "F3/1 is micro-batch 3 on the rank's chunk 1 \(its stage chunk \* 2 \+ rank\); dots idle" \
  "the legend explains the chunk notation and the idle dots"
expect_output "^pipeline parallelism: 2 ranks x 2 chunk\(s\)" "the chunks are the resolved virtual stages"
finish

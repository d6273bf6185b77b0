# `train --dry-run` under mpirun: rank 0 alone prints the plan; a warning only one rank sees
# (its process may run on fewer cores than device.threads) that rank prints, with its number.
source "$(dirname "$0")/lib/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
mpi=(timeout 300 mpiexec --oversubscribe --allow-run-as-root --mca orte_abort_on_non_zero_status 0)

make_corpus
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
tiny_recipe >tiny.toml

expect_exit 0 "a dry run of two ranks" -- "${mpi[@]}" -n 2 "$USTRAIN" train tiny.toml --dry-run
# Counted anywhere in a line: two ranks' output may interleave within lines.
times() { grep -o -- "$1" out.txt | wc -l; }
[[ $(times '# resolved recipe') == 1 ]] && pass "the plan is printed once" \
  || fail "the plan is printed $(times '# resolved recipe') times"
[[ $(times 'parameters: ') == 1 ]] && pass "as is each line of it" || fail "parameters printed $(times 'parameters: ') times"
[[ $(times 'rank 1: ') == 0 ]] && pass "rank 1 says nothing rank 0 said" || fail "rank 1 printed what rank 0 did"

# Rank 1 alone is held to one core: device.threads = the cores the others have warns on it only.
cores=$(env -u OMP_NUM_THREADS nproc)  # nproc alone answers OMP_NUM_THREADS
if ((cores >= 2)); then
  expect_exit 0 "a warning only rank 1 sees" -- "${mpi[@]}" --bind-to none \
    -n 1 "$USTRAIN" train tiny.toml --dry-run --set device.threads="$cores" : \
    -n 1 taskset -c 0 "$USTRAIN" train tiny.toml --dry-run --set device.threads="$cores"
  expect_output "rank 1: # warning: device.threads = $cores, but this process may run on 1 core" \
    "rank 1 prints its warning with its number"
  [[ $(times 'warning: device.threads') == 1 ]] && pass "and nobody else does" \
    || fail "the warning appears $(times 'warning: device.threads') times"
  [[ $(times '# resolved recipe') == 1 ]] && pass "the plan is still printed once" || fail "plan repeated"
else
  echo "skipped: the rank-specific warning needs 2 cores, this process may run on $cores"
fi
finish

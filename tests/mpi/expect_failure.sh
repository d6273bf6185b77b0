#!/usr/bin/env bash
# Runs one mode of the multi-rank failure test (failure_test.cpp) under mpiexec and checks
# that every rank that can still report did: the expected message and exit status, well
# within the time limit, and no hang.
#   expect_failure.sh MPIEXEC NUMPROC_FLAG NP BINARY MODE
set -uo pipefail
mpiexec=$1 npflag=$2 np=$3 binary=$4 mode=$5

start=$SECONDS
# By default mpirun kills the whole job at the first non-zero exit (or exit without
# MPI_Finalize), possibly before the other ranks have reported; the test wants every rank's
# own report. The bash wrapper prints each rank's exit status, which mpirun does not.
output=$("$mpiexec" "$npflag" "$np" --oversubscribe --allow-run-as-root \
  --mca orte_abort_on_non_zero_status 0 --mca orte_allowed_exit_without_sync 1 \
  bash -c '"$0" "$1"; echo "rank ${OMPI_COMM_WORLD_RANK} exited with status $?"' "$binary" "$mode" 2>&1)
elapsed=$((SECONDS - start))
echo "$output"

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect_line() { grep -qF -- "$1" <<<"$output" || fail "no line containing: $1"; }

last=$((np - 1))
ranks=$(seq -s, 0 "$last")
case $mode in
  layout)
    for r in $(seq 0 "$last"); do expect_line "rank $r exited with status 2"; done
    count=$(grep -cF "needs 2 processes but $np were launched" <<<"$output")
    [[ $count == "$np" ]] || fail "expected the layout error from all $np ranks, got $count"
    ;;
  dead-peer | stopped-peer | stuck-peer)
    # Each other rank names the last one, in its own diagnosis or in the notice of a rank that
    # left first (which quotes that rank's diagnosis).
    operation="collective all_reduce of 100003 f32 (sum) on world group (ranks $ranks)"
    why="rank $last did not answer within 5 s: stopped (SIGSTOP, a debugger), hung, dead, unreachable, or too overloaded"
    [[ $mode == stuck-peer ]] && why="rank $last has not reached this operation (it is alive and has not communicated for"
    for r in $(seq 0 $((last - 1))); do
      grep -E "^error: .* on rank $r" <<<"$output" | grep -qF "$operation" || fail "rank $r: no error about the all_reduce"
      grep -E "^error: .* on rank $r" <<<"$output" | grep -qF "$why" || fail "rank $r: its error does not say: $why"
      expect_line "rank $r exited with status 2"
    done
    case $mode in
      dead-peer) expect_line "rank $last exited with status 3" ;;
      stuck-peer) expect_line "rank $last exited with status 0" ;;
    esac
    if grep -qF "the step completed" <<<"$output"; then fail "a rank completed a collective without its peer"; fi
    ;;
  leaving-peer)
    expect_line "error: rank $last ran out of disk"
    expect_line "rank $last exited with status 2"
    for r in $(seq 0 $((last - 1))); do
      expect_line "error: collective all_reduce of 100003 f32 (sum) on world group (ranks $ranks) did not complete on rank $r: rank $last left the job (it stopped after an error (see its output))"
      expect_line "rank $r exited with status 2"
    done
    ;;
  stuck-create)
    for r in $(seq 0 $((last - 1))); do
      expect_line "error: creating the communicator on world group (ranks $ranks) did not complete within 2 s on rank $r: a peer may have died or be stuck"
      expect_line "rank $r exited with status 2"
    done
    expect_line "rank $last exited with status 0"
    ;;
  truncate)
    expect_line "error: recv of 5 f32 from member 0 (tag 0) on world group (ranks $ranks) failed on rank 1: MPI_ERR_TRUNCATE"
    expect_line "rank 1 exited with status 2"
    expect_line "rank 0 exited with status 0"
    ;;
  slow-sender)
    for r in $(seq 0 "$last"); do expect_line "rank $r: done"; expect_line "rank $r exited with status 0"; done
    ;;
  late-peer)
    for r in $(seq 0 $((last - 1))); do
      expect_line "on world group (ranks $ranks) did not complete within"
      grep -E "^error: .* on rank $r" <<<"$output" | grep -qF "rank $last has not reached this operation" ||
        fail "rank $r: its error does not name rank $last"
    done
    for r in $(seq 0 "$last"); do expect_line "rank $r exited with status 2"; done
    ;;
  *) fail "unknown mode $mode" ;;
esac
((elapsed <= 20)) || fail "took ${elapsed} s (the deadline is 2 s, the patience 4 s)"
((failures == 0)) && echo "PASS: $mode on $np ranks in ${elapsed} s"
exit $((failures > 0))

#!/usr/bin/env bash
# The layout-equivalence matrix: trains the harness's tiny model under every layout of
# tests/layout/matrix.tsv (mpiexec on this machine's CPUs) and prints a pass/fail grid with
# each row's worst error against the one-rank run. Build first (scripts/setup.sh).
# Usage: scripts/layout-matrix.sh [--ci] [--filter REGEX] [--work DIR] [--ustrain PATH]
set -euo pipefail
exec python3 "$(dirname "$0")/../tests/layout/layout_matrix.py" "$@"

#!/usr/bin/env bash
# Installs, builds and runs every test (unit, CLI end-to-end). This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
# Two cores: keep OpenBLAS/OpenMP from oversubscribing when tests run in parallel.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"

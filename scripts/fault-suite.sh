#!/usr/bin/env bash
# The whole fault suite (tests/faults/): every case in its full form (20 kill -9 trials, the
# default communication deadlines, ...), then one table with each case, its exit status, the
# first line of its message and whether it passed. CTest runs the quick form (label faults).
# Build first (scripts/setup.sh). Some cases need root (a tmpfs, a memory cgroup, a user to
# drop to); without it they are listed as skipped, with the reason.
# Usage: scripts/fault-suite.sh [--ustrain PATH] [CASE...]   (CASE: a file name in tests/faults/)
set -uo pipefail
cd "$(dirname "$0")/.."
ustrain=build/app/ustrain
cases=()
while (($#)); do
  case $1 in
    --ustrain) ustrain=${2:?--ustrain needs a path}; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) cases+=("tests/faults/${1%.sh}.sh"); shift ;;
  esac
done
((${#cases[@]})) || cases=(tests/faults/*.sh)
[[ -x $ustrain ]] || { echo "fault-suite: $ustrain is not built: run scripts/setup.sh first" >&2; exit 2; }

results=$(mktemp)
trap 'rm -f "$results"' EXIT
status=0
for c in "${cases[@]}"; do
  echo "=== ${c#tests/faults/}"
  FAULT_MODE=full FAULT_RESULTS=$results bash "$c" "$ustrain" "$PWD" >"$results.log" 2>&1 || status=1
  grep -E '^(FAIL|skip)' "$results.log" || true
done
rm -f "$results.log"

echo
printf '%-64s %4s  %-6s  %s\n' case exit result "first message line"
while IFS=$'\t' read -r name code message result; do
  printf '%-64s %4s  %-6s  %s\n' "${name:0:64}" "$code" "$result" "$message"
done <"$results"
passed=$(grep -c $'\tpass$' "$results")
failed=$(grep -c $'\tfail$' "$results")
skipped=$(grep -c $'\tskip$' "$results")
echo
echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0)) || status=1
exit "$status"

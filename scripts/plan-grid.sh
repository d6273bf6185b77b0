#!/usr/bin/env bash
# The planner's speed at cluster scale: `ustrain plan` asked the Ultra-Scale Playbook's
# benchmark questions (the shapes of tests/plan/, sequences of 4096, 1M-token batches, 8 H100
# per node), one cell per model and GPU count. Prints a Markdown table: wall time, user CPU
# seconds, peak resident memory and the best layout. A cell past the time or memory limit is
# stopped and reads ">LIMIT s" or "killed".
# Usage: scripts/plan-grid.sh [build/app/ustrain] [seconds per cell, default 300] [GiB per cell, default 8]
# CELLS="llama-8b:64 mixtral-8x7b:64" picks cells (default: every model x 8 64 128 256 512, and
# the 8x7B MoE on 64).
set -uo pipefail
ustrain=$(realpath "${1:-build/app/ustrain}")
limit_s=${2:-300}
limit_gib=${3:-8}
shapes=$(realpath "$(dirname "$0")/../tests/plan")
if [[ -z ${CELLS:-} ]]; then
  for m in llama-1.34b llama-3.57b llama-8b llama-70b llama-80b; do
    for g in 8 64 128 256 512; do CELLS+="$m:$g "; done
  done
  CELLS+="mixtral-8x7b:64"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "| model | GPUs | wall s | user s | peak RSS MiB | best layout |"
echo "|---|---|---|---|---|---|"
for cell in $CELLS; do
  model=${cell%:*} gpus=${cell#*:}
  OMP_NUM_THREADS=1 /usr/bin/time -v -o "$work/time.txt" timeout "$limit_s" \
    "$ustrain" plan "$shapes/$model.toml" --gpus "$gpus" --top 1 >"$work/out.txt" 2>"$work/err.txt" &
  # The planner reserves address space it never touches, so ulimit -v cannot bound it: watch
  # the resident memory instead.
  watched=$!
  killed=""
  while kill -0 "$watched" 2>/dev/null; do
    for pid in $(pgrep -P "$(pgrep -P "$watched" | head -1)" 2>/dev/null); do
      kib=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
      if (( ${kib:-0} > limit_gib * 1024 * 1024 )); then kill "$pid"; killed=1; fi
    done
    sleep 0.5
  done
  wait "$watched"
  rc=$?
  field() { sed -n "s/^\s*$1: //p" "$work/time.txt"; }
  wall=$(field "Elapsed (wall clock) time (h:mm:ss or m:ss)" | awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.1f", s }')
  user=$(field "User time (seconds)")
  rss=$(( $(field "Maximum resident set size (kbytes)") / 1024 ))
  # The first row of the table: "  1  dp tp pp cp ep zero sp recompute mb x accum schedule ..."
  best=$(awk '/^ +# +dp +tp/ { getline; print; exit }' "$work/out.txt" | tr -s ' ' | cut -c2-)
  case $rc in
    0) [[ -n $best ]] || best="(none fits: $(sed -n 's/^no layout fits: the smallest (\(.*\)) needs at least \([0-9.]* GiB\).*/\1 needs \2/p' "$work/out.txt"))" ;;
    124) # How far it got: the last progress line on stderr ("plan: 37/412 layouts, 12 s").
         got=$(tr '\r' '\n' <"$work/err.txt" | sed -n 's/^plan: \([0-9]*\/[0-9]*\) layouts.*/\1/p' | tail -1)
         wall=">$limit_s" best="(stopped at $limit_s s${got:+: $got layouts planned})" ;;
    *) if [[ -n $killed ]]; then best="(stopped past $limit_gib GiB resident)"
       else best="(exit $rc: $(tail -c 120 "$work/err.txt" | tr '\n' ' '))"; fi ;;
  esac
  echo "| $model | $gpus | $wall | $user | $rss | $best |"
done

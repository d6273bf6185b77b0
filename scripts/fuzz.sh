#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang, AddressSanitizer and UBSan into
# build-fuzz/ (a build of its own: the normal build is untouched), replays the kept inputs of
# fuzz/regressions/, then fuzzes each target for the given time, one after the other, and
# prints per target the executions, the new findings and the seconds it ran.
#
# Usage: scripts/fuzz.sh [--seconds N | --runs N] [--install] [TARGET...]
#   --seconds N  how long each target runs (default 60); 0 only builds and replays
#   --runs N     run each target for N executions (with --seconds too: whichever comes first)
#   --install    install clang and libFuzzer from Debian first (needs root or sudo)
#   TARGET       recipe dataset_manifest shard_attributes megatron_idx llmc npy safetensors
#                checkpoint_manifest tokenizer_json tiktoken hf_config jsonl compressed_stream
#                deep_json calibration (default: all)
# A finding ends that target's run and is saved as build-fuzz/findings/TARGET/crash-* (or leak-,
# timeout-, oom-; the log is build-fuzz/fuzz-TARGET.log): fix the cause, then copy the input into
# fuzz/regressions/TARGET/ so that every later run replays it.
# Exit status: 0 when nothing was found and every kept input replays cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(recipe dataset_manifest shard_attributes megatron_idx llmc npy safetensors checkpoint_manifest tokenizer_json tiktoken hf_config jsonl
             compressed_stream deep_json calibration)
seconds=
runs=0
install=0
targets=()
while (($#)); do
  case $1 in
    --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
    --runs) runs=${2:?--runs needs a number}; shift 2 ;;
    --install) install=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${all_targets[@]}")
[[ -n $seconds ]] || { ((runs > 0)) && seconds=0 || seconds=60; }

if ((install)); then
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends clang libclang-rt-dev
fi
if ! command -v clang++ >/dev/null || [[ -z $(clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a | grep /) ]]; then
  echo "fuzz: clang and its libFuzzer runtime are needed: run scripts/fuzz.sh --install (Debian: clang libclang-rt-dev)" >&2
  exit 2
fi

cmake -S . -B build-fuzz -G Ninja -DUSTRAIN_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

# UBSan stops at the first report (-fno-sanitize-recover) and prints where it was.
export UBSAN_OPTIONS=print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1
status=0
for t in "${targets[@]}"; do
  kept=(fuzz/regressions/"$t"/*)
  if [[ -e ${kept[0]} ]]; then
    if ! build-fuzz/fuzz/fuzz_"$t" "${kept[@]}" >build-fuzz/replay-"$t".log 2>&1; then
      echo "fuzz: $t: a kept input of fuzz/regressions/$t fails again; see build-fuzz/replay-$t.log" >&2
      status=1
    fi
  fi
done

rows=()
limit=()
((seconds > 0)) && limit+=(-max_total_time="$seconds")
((runs > 0)) && limit+=(-runs="$runs")
if ((seconds > 0 || runs > 0)); then
  for t in "${targets[@]}"; do
    corpus=build-fuzz/corpus/$t findings=build-fuzz/findings/$t
    mkdir -p "$corpus" "$findings"
    seeds=()
    [[ -d fuzz/seeds/$t ]] && seeds+=(fuzz/seeds/"$t")
    [[ -d fuzz/regressions/$t ]] && seeds+=(fuzz/regressions/"$t")
    # crash-, leak-, timeout- and oom- files are findings; slow-unit reports only say that the
    # machine was busy.
    count_findings() {
      find "$findings" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l
    }
    before=$(count_findings)
    start=$SECONDS
    # Inputs of up to 64 KiB; one input may take 60 s (a shared machine stalls now and then;
    # an endless loop is still caught). A finding ends the target's run.
    build-fuzz/fuzz/fuzz_"$t" "$corpus" "${seeds[@]}" "${limit[@]}" -max_len=65536 -timeout=60 \
      -report_slow_units=60 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$findings/" \
      >build-fuzz/fuzz-"$t".log 2>&1 || true
    ran=$((SECONDS - start))
    execs=$(awk '/stat::number_of_executed_units:/ {n = $2} END {print n + 0}' build-fuzz/fuzz-"$t".log)
    found=$(($(count_findings) - before))
    ((found == 0)) || status=1
    rows+=("$(printf '%-20s %14s %9s %8s' "$t" "$execs" "$found" "$ran")")
  done
  printf '%-20s %14s %9s %8s\n' target executions findings seconds
  printf '%s\n' "${rows[@]}"
fi
exit "$status"

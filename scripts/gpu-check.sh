#!/usr/bin/env bash
# The check to run on a lent GPU machine (CUDA, cmake, ninja, python3 with PyTorch; none of our
# Debian libraries; no network), from the repository root:
#
#   scripts/gpu-check.sh [PHASE...]
#     probe      the machine: OS, glibc, GPU, driver, toolchain, PyTorch, where cuDNN/NCCL are
#     unpack     the dependency bundle made by scripts/gpu-bundle.sh (carry .deps/gpu)
#     prebuilt   use the binaries built here and carried in .deps/gpu/bin.txz (unpacked with the bundle)
#                (scripts/gpu-bundle.sh --binaries build): no build on the GPU machine
#     configure  the fallback: CMake, Release, Ninja, CUDA for sm_90, against the bundle
#     build      ustrain and the GPU tests, on the GPU machine
#     test       every GPU test (each CUDA op against the CPU; CPU vs GPU training, fp8 too), with a skip
#                counted as a failure (USTRAIN_REQUIRE_GPU=1) and cuDNN refusing a shape it
#                should take as an error (USTRAIN_REQUIRE_CUDNN=1); cuDNN's own log of the
#                attention tests
#     bench      `ustrain bench` and scripts/bench-torch.py on recipes/bench-1b.toml, side by side
#     profile    where the benchmark step's time goes: a kernel timeline by op class with the idle
#                gaps (scripts/kernel-timeline.py) beside PyTorch's kernels (from bench), Nsight
#                Compute on our own largest kernels (not in the default list: run it after bench)
#     runs       the quickstart model 300 steps in bf16 (twice), fp32 and fp16, and resumed at step 150
#                (carry runs/data/fortunes): determinism, resume exactness, loss curves
#     ranks      dp = 2, tp = 2, pp = 2 and cp = 2 runs of two processes on the one GPU (host-staged
#                communicator) against the one-process run, fp32 and bf16 (carry runs/data/fortunes)
#     moe        the mixture-of-experts quickstart 300 steps in bf16 and fp32 (carry runs/data/fortunes)
#     sanitize   compute-sanitizer memcheck and racecheck over three training steps of a tiny model
#   Default: probe unpack prebuilt test ranks moe bench sanitize runs when .deps/gpu/bin.txz was
#   carried, else probe unpack configure build test ranks moe bench sanitize runs (what is new
#   first, so that a short budget spends itself on it).
#
# Everything shares one time budget (GPU_CHECK_BUDGET seconds, default 540, so that the whole
# check fits one 10-minute device call); each phase runs under the smaller of its own limit and
# what is left, and a phase that no longer fits is reported as skipped. With carried binaries
# the whole default list took 232 s plus the ranks phase's 50 s on an H100 (2026-11-25): one
# call. Building on the machine instead takes longer; then run two calls, the build and the
# tests first (`probe unpack configure build test ranks`), the measurements second (`bench
# runs sanitize`); the second must follow while the machine is still held (it is given back
# 30 s after a call ends), or its unpack and build start again.
# Logs go to runs/gpu-check (and back from a device call as one archive, see below); the
# console gets a summary.
#
# Environment: OUT, GPU_CHECK_BUDGET, BUNDLE (.deps/gpu/deps.txz), DEPS (.deps/gpu-root), BENCH_TORCH (0: no PyTorch),
# BUILD (build-gpu), CUDA_ARCH (90), BENCH_STEPS (10 timed), BENCH_WARMUP (3 untimed),
# GPU_CHECK_CMAKE_ARGS (more configure arguments), BENCH_CALIBRATION_OUT (set: bench also measures
# the planner's calibration curves into calibration.json, about 30 s more), PROFILE_STEPS (5),
# PROFILE_NCU_KERNELS (4: our own kernels Nsight Compute looks at).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
start=$SECONDS
budget=${GPU_CHECK_BUDGET:-540}
bundle=${BUNDLE:-.deps/gpu/deps.txz}
deps=$(realpath -m "${DEPS:-.deps/gpu-root}")
build=${BUILD:-build-gpu}
arch=${CUDA_ARCH:-90}
bench_steps=${BENCH_STEPS:-10}
bench_warmup=${BENCH_WARMUP:-3}
recipe=recipes/bench-1b.toml
ustrain_bin=$build/app/ustrain
gpu_tests_bin=$build/tests/gpu/ustrain_gpu_tests
prebuilt_archive=${bundle%/*}/bin.txz  # scripts/gpu-bundle.sh --binaries; unpacked beside the deps
prebuilt_dir=$deps/bin
# Logs are written under runs/gpu-check; with OUT set (a device call), they go back as one
# archive, $OUT/gpu-check-logs.tgz, beside $OUT/summary.txt (a call returns at most 8 files).
logs=$(realpath -m runs/gpu-check)
rm -rf "$logs" && mkdir -p "$logs"
summary=()
failed=0

note() { echo "gpu-check: $*"; }
# limit CAP: seconds a command may take: CAP, or what is left of the budget if less.
limit() {
  local left=$((budget - (SECONDS - start)))
  echo $((left < $1 ? left : $1))
}
# timed CAP LOG CMD...: CMD under `limit CAP`, stdout and stderr into LOG; its status.
timed() {
  local cap=$1 log=$2 t; shift 2
  t=$(limit "$cap")
  if ((t < 15)); then
    echo "skipped: out of time (${t}s left of ${budget}s)" >>"$log"
    return 124
  fi
  timeout -k 10 "$t" "$@" >>"$log" 2>&1
}
# record PHASE STATUS LOG [quiet]: one summary line; on failure the log's tail goes to the
# console, unless the phase has shown its log already.
record() {
  local phase=$1 status=$2 log=$3 quiet=${4:-} what
  case $status in
    0) what=ok ;;
    124 | 137) what="TIMED OUT or skipped (budget ${budget}s; see $log)" ;;
    *) what="FAILED (exit $status; see $log)" ;;
  esac
  summary+=("$(printf '%-10s %s (%ds in)' "$phase" "$what" $((SECONDS - start)))")
  ((status == 0)) || failed=1
  if ((status != 0)) && [[ -z $quiet ]]; then
    echo "---- last lines of $log"
    tail -n 40 "$log"
  fi
}

# The bundle on every search path, before the system; its fallback/ libraries after it.
use_deps() {
  local D=$deps/usr L=$deps/usr/lib/x86_64-linux-gnu F=$deps/fallback/usr/lib/x86_64-linux-gnu
  export CMAKE_PREFIX_PATH=$D
  export CPATH=$D/include:$D/include/x86_64-linux-gnu${CPATH:+:$CPATH}
  export LIBRARY_PATH=$L:$L/openblas-pthread:$L/openmpi/lib:$F
  local system=/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu
  export LD_LIBRARY_PATH=$L:$L/openblas-pthread:$L/openmpi/lib:$L/pmix2/lib:$system:$F${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_PATH=$L/pkgconfig:$D/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$deps
  # Open MPI finds its components and help files under the bundle; absent transports stay quiet.
  export OPAL_PREFIX=$D OMPI_MCA_mca_base_component_show_load_errors=0
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  [[ -d /usr/local/cuda/bin ]] && export PATH=/usr/local/cuda/bin:$PATH
  export PATH=$PATH:$D/bin  # the bundle's pkg-config where the machine has none
  # The CUDA libraries the binaries need, where this machine has them: the toolkit first, then
  # the pip wheels' copies (cuDNN and NCCL come only as wheels on the lent machines).
  local lib dir
  for lib in libcudart.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
    dir=$(cuda_lib_dir "$lib")
    [[ -n $dir && :$LD_LIBRARY_PATH: != *:$dir:* ]] && LD_LIBRARY_PATH=$dir:$LD_LIBRARY_PATH
  done
  [[ -d $prebuilt_dir/lib ]] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(realpath "$prebuilt_dir/lib")
  export LD_LIBRARY_PATH
  return 0
}

# The folder holding LIB on this machine (toolkit, system, or a Python wheel), or nothing.
cuda_lib_dir() {
  local f
  f=$(find /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu \
        /opt /usr/local/lib -maxdepth 7 -name "$1*" \( -type f -o -type l \) -print -quit 2>/dev/null)
  [[ -n $f ]] && dirname "$f"
}

phase_probe() {
  local log=$logs/probe.log
  {
    echo "== os";     grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release; uname -srm
    echo "== glibc";  ldd --version | head -1
    echo "== cpu";    nproc; free -g | head -2; df -h . | tail -1
    echo "== gpu";    nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader
    echo "== tools";  "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" --version | tail -2
    cmake --version | head -1; echo "ninja $(ninja --version)"; c++ --version | head -1
    for lib in libcudart.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
      echo "$lib: $(cuda_lib_dir "$lib")"
    done
    command -v compute-sanitizer
    echo "== python"
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())'
    echo "== bundle"
    [[ -f ${bundle%/*}/bundle.txt ]] && head -3 "${bundle%/*}/bundle.txt" || echo "no bundle.txt beside $bundle"
    [[ -f $prebuilt_archive ]] && tar xJOf "$prebuilt_archive" bin/BUILT_FROM
  } >"$log" 2>&1
  local status=0
  nvidia-smi -L >/dev/null 2>&1 || status=1
  local need have
  need=$(sed -n 's/^needs glibc >= //p' "${bundle%/*}/bundle.txt" 2>/dev/null)
  have=$(ldd --version 2>/dev/null | head -1 | grep -o '[0-9]*\.[0-9]*$')
  if [[ -n $need && -n $have ]] && [[ $(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1) != "$need" ]]; then
    echo "the bundle's libraries need glibc >= $need, this machine has $have" >>"$log"
    status=1
  fi
  sed 's/^/  /' "$log"
  record probe $status "$log" quiet
}

phase_unpack() {
  local log=$logs/unpack.log status=0
  : >"$log"
  if [[ ! -f $bundle ]]; then
    echo "no dependency bundle at $bundle: run scripts/gpu-bundle.sh on a Debian 12 machine" \
         "and carry .deps/gpu" >>"$log"
    status=1
  else
    rm -rf "$deps" && mkdir -p "$deps"
    timed 120 "$log" tar xJf "$bundle" -C "$deps" || status=$?
    if [[ -f $prebuilt_archive ]] && ((status == 0)); then
      timed 60 "$log" tar xJf "$prebuilt_archive" -C "$deps" || status=$?
    fi
  fi
  record unpack $status "$log"
}

phase_prebuilt() {
  local log=$logs/prebuilt.log status=0 b
  : >"$log"
  for b in ustrain ustrain_gpu_tests; do
    if [[ ! -x $prebuilt_dir/$b ]]; then
      echo "no $prebuilt_dir/$b: run scripts/gpu-bundle.sh --binaries build here, carry .deps/gpu and" \
           "run the unpack phase first" >>"$log"
      status=1
    fi
  done
  if ((status == 0)); then
    ustrain_bin=$(realpath "$prebuilt_dir/ustrain")
    gpu_tests_bin=$(realpath "$prebuilt_dir/ustrain_gpu_tests")
    # Every library found, or the loader's own words for what is not.
    (use_deps && ldd "$ustrain_bin" "$gpu_tests_bin") >>"$log" 2>&1
    if grep -q "not found" "$log"; then status=1; fi
    (use_deps && timeout 60 "$ustrain_bin" --version) >>"$log" 2>&1 || status=1
  fi
  grep -E "not found|ustrain [0-9]" "$log" | sed 's/^/  /'
  record prebuilt $status "$log"
}

phase_configure() {
  local log=$logs/configure.log status=0 L=$deps/usr/lib/x86_64-linux-gnu
  : >"$log"
  if [[ ! -d $deps/usr ]]; then
    echo "no unpacked bundle at $deps: run the unpack phase" >>"$log"
    record configure 1 "$log"
    return
  fi
  # MPI and HDF5 are found from explicit paths: the bundle's compiler wrappers name /usr.
  (use_deps && timed 120 "$log" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
     -DMPI_C_LIBRARIES="$L/openmpi/lib/libmpi.so" -DMPI_C_ADDITIONAL_INCLUDE_DIRS="$L/openmpi/include" \
     -DMPI_CXX_LIBRARIES="$L/openmpi/lib/libmpi_cxx.so;$L/openmpi/lib/libmpi.so" \
     -DMPI_CXX_ADDITIONAL_INCLUDE_DIRS="$L/openmpi/include" -DMPIEXEC_EXECUTABLE="$deps/usr/bin/mpiexec.openmpi" \
     -DHDF5_ROOT="$L/hdf5/serial" \
     -DBLAS_LIBRARIES="$L/openblas-pthread/libopenblas.so" ${GPU_CHECK_CMAKE_ARGS:-}) || status=$?
  if ! grep -q "ustrain: CUDA backend target ON" "$log"; then
    echo "configure did not enable the CUDA backend" >>"$log"
    ((status)) || status=1
  fi
  record configure $status "$log"
}

phase_build() {
  local log=$logs/build.log status=0
  : >"$log"
  (use_deps && timed 360 "$log" cmake --build "$build" -j "$(nproc)" \
     --target ustrain ustrain_gpu_tests) || status=$?
  record build $status "$log"
}

phase_test() {
  local log=$logs/test.log status=0 tstatus=0
  : >"$log"
  if [[ ! -x $gpu_tests_bin || ! -x $ustrain_bin ]]; then
    echo "no $gpu_tests_bin or $ustrain_bin: run the prebuilt or the build phase first" >>"$log"
    record test 1 "$log"
    return
  fi
  local strict=(env USTRAIN_REQUIRE_GPU=1 USTRAIN_REQUIRE_CUDNN=1)
  (use_deps && timed 200 "$log" "${strict[@]}" "$gpu_tests_bin") || status=$?
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests? ran|^\[ gpu' "$log" | sed 's/^/  /' | tail -n 25
  # cuDNN's own account of the attention tests (info level): which engines ran.
  (use_deps && CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG="$logs/cudnn.log" \
     timed 60 "$logs/cudnn-run.log" "${strict[@]}" "$gpu_tests_bin" --gtest_filter='*ttention*') || status=$?
  if [[ -f $logs/cudnn.log ]]; then
    truncate -s '<4M' "$logs/cudnn.log"
    echo "  cuDNN log: $(grep -c . "$logs/cudnn.log") lines; engines: $(grep -o 'engine[_ ]*[iI]d[^,;]*' "$logs/cudnn.log" | sort | uniq -c | head -5 | tr '\n' ' ')"
  fi
  cat "$logs/cudnn-run.log" >>"$log"; rm -f "$logs/cudnn-run.log"
  (use_deps && timed 120 "$log" "${strict[@]}" bash tests/gpu/gpu_train_trajectory.sh "$ustrain_bin" .) ||
    tstatus=$?
  grep -E '^(ok|FAIL|SKIP)' "$log" | tail -n 8 | sed 's/^/  /'
  ((status)) || status=$tstatus
  # FP8 training, each scaling recipe on the GPU against the CPU's emulation.
  local fstatus=0 before
  before=$(wc -l <"$log")
  (use_deps && timed 120 "$log" "${strict[@]}" bash tests/gpu/gpu_train_fp8.sh "$ustrain_bin" .) || fstatus=$?
  tail -n +"$((before + 1))" "$log" | grep -E '^(ok|FAIL|SKIP)' | grep -v 'run$' | tail -n 12 | sed 's/^/  /'
  ((status)) || status=$fstatus
  record test $status "$log" quiet
}

# The mean over the timed steps (after the warm-up ones) of one field of ustrain's metrics.
metrics_mean() {
  sed -n "s/.*\"kind\":\"train\".*\"$2\":\([-0-9.e+]*\).*/\1/p" "$1" |
    awk -v skip="$bench_warmup" 'NR > skip { s += $1; n++ } END { if (n) printf "%.6g", s / n }'
}

# bench_data LOG: runs/data/bench-random, random token ids for the benchmark (speed does not
# depend on the ids, and the machine has no corpus to download).
bench_data() {
  local log=$1 ustrain=$ustrain_bin data=runs/data/bench-random
  [[ -f $data/manifest.json ]] && return 0
  mkdir -p runs
  python3 - <<'PY' >>"$log" 2>&1
import random, struct
rows, cols, vocab = 128, 4096, 32000
rng = random.Random(1234)
header = "{'descr': '<u2', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open("runs/bench-tokens.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<%dH" % (rows * cols), *(rng.randrange(vocab) for _ in range(rows * cols))))
PY
  (use_deps && timed 60 "$log" "$ustrain" data convert --input runs/bench-tokens.npy --output "$data" \
     --format npy --tokenizer random --vocab-size 32000 --no-eos --val-fraction 0)
}

# clocks_start NAME / clocks_stop: the GPU's SM clock, power and temperature once a second
# into clocks-NAME.csv while a benchmark runs (read only: nothing is set), so that two runs'
# speeds can be compared knowing the clocks each had; clocks_stop prints their means.
clocks_pid="" clocks_file=""
clocks_start() {
  clocks_file=$logs/clocks-$1.csv
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 1000 \
    >"$clocks_file" 2>/dev/null &
  clocks_pid=$!
}
clocks_stop() {
  [[ -n $clocks_pid ]] && kill "$clocks_pid" 2>/dev/null && wait "$clocks_pid" 2>/dev/null
  clocks_pid=""
  awk -F', *' -v f="${clocks_file##*/}" '$2 + 0 > 0 && $3 + 0 > 300 { c += $2; p += $3; t += $4; n++ }
    END { if (n) printf "  %s: while above 300 W (%d s): SM clock %.0f MHz, power %.0f W, %.0f C\n", f, n, c / n, p / n, t / n }' \
    "$clocks_file"
}

phase_bench() {
  local log=$logs/bench-ustrain.log tlog=$logs/bench-torch.log status=0 tstatus=0
  : >"$log"; : >"$tlog"
  local ustrain=$ustrain_bin run=runs/bench-1b-bench
  if [[ ! -x $ustrain ]]; then
    echo "no $ustrain: run the build phase first" >>"$log"
    record bench-ours 1 "$log"
    return
  fi
  bench_data "$log" || status=$?
  if ((status == 0)); then
    # bench trains one warm-up step of its own before --steps: the run has warm-up + timed steps.
    clocks_start ours
    (use_deps && timed 210 "$log" "$ustrain" bench "$recipe" ${BENCH_CALIBRATION_OUT:+--calibration-out "$logs/calibration.json"} \
       --steps $((bench_warmup + bench_steps > 1 ? bench_warmup + bench_steps - 1 : 1))) || status=$?
    clocks_stop
  fi
  record bench-ours $status "$log"

  # PyTorch runs in the machine's own environment, without the bundle (BENCH_TORCH=0: not at all).
  if [[ ${BENCH_TORCH:-1} != 0 ]]; then
    clocks_start torch
    timed 150 "$tlog" python3 scripts/bench-torch.py "$recipe" --steps "$bench_steps" --warmup "$bench_warmup" \
      --profile "$logs/torch-kernels.csv" ||
      tstatus=$?
    clocks_stop
    record bench-torch $tstatus "$tlog"
  fi

  # ustrain's numbers by the baseline's convention: timed steps only, the same FLOPs and peak.
  local sizes fpt tokens step_s rate mfu mem
  sizes=$(python3 scripts/bench-torch.py "$recipe" --dry-run)
  fpt=$(grep -o 'flops_per_token=[0-9.e+]*' <<<"$sizes" | cut -d= -f2)
  tokens=$(grep -o 'tokens_per_step=[0-9]*' <<<"$sizes" | cut -d= -f2)
  : >"$logs/bench-summary.txt"
  if ((status == 0)) && [[ -f $run/metrics.jsonl ]]; then
    step_s=$(metrics_mean "$run/metrics.jsonl" step_s)
    rate=$(awk -v s="$step_s" -v t="$tokens" 'BEGIN { if (s > 0) printf "%.0f", t / s }')
    mfu=$(awk -v r="$rate" -v f="$fpt" 'BEGIN { printf "%.4f", r * f / 989e12 }')
    mem=$(sed -n 's/.*bench: peak device memory \([0-9.]*\) MiB.*/\1/p' "$log" | awk '{ printf "%.2f", $1 / 1024 }')
    echo "ustrain: tokens/s=${rate:-?} mfu=$mfu peak_mem_gib=${mem:-?}" \
         "step_ms=$(awk -v s="$step_s" 'BEGIN { printf "%.1f", 1e3 * s }')" \
         "(mean of steps $((bench_warmup + 1))-$((bench_warmup + bench_steps)))" | tee -a "$logs/bench-summary.txt"
  fi
  grep -h '^torch:' "$tlog" | tee -a "$logs/bench-summary.txt"
  grep -h 'bench: ' "$log" | sed 's/^.*bench: /  ustrain bench: /' | tail -n 6
}

# Where the benchmark step's time goes: a kernel timeline of a few steps of `ustrain bench`
# (kernels/cuda/tools/kernel_trace.cpp; else Nsight Systems' kernel sums, else Nsight Compute's
# serialised durations), sorted into op classes with the idle gaps (scripts/kernel-timeline.py,
# scripts/kernel-classes.py) beside PyTorch's kernels from the bench phase (torch-kernels.csv),
# and Nsight Compute's speed-of-light sections of our own largest kernels. Run after bench.
phase_profile() {
  local log=$logs/profile.log status=0 nsys ncu steps=${PROFILE_STEPS:-5} run=runs/bench-1b-bench
  : >"$log"
  nsys=$(command -v nsys || find /usr/local/cuda*/ /opt/nvidia -maxdepth 4 -name nsys -type f 2>/dev/null | head -1)
  ncu=$(command -v ncu || find /usr/local/cuda*/ /opt/nvidia -maxdepth 4 -name ncu -type f 2>/dev/null | head -1)
  local kernels=$logs/ours-kernels.csv tracer accum
  tracer=$(ls "$prebuilt_dir/libustrain_kernel_trace.so" "$build/kernels/libustrain_kernel_trace.so" 2>/dev/null | head -1)
  echo "kernel timeline library: ${tracer:-none}; nsys: ${nsys:-none}; ncu: ${ncu:-none}" >>"$log"
  if [[ ! -x $ustrain_bin || -z $tracer$nsys$ncu ]]; then
    echo "no $ustrain_bin, or no kernel timeline library, nsys or ncu" >>"$log"
    record profile 1 "$log"
    return
  fi
  # the step time of the runs before this one (bench), not of profiled runs
  local step_ms
  step_ms=$(sed -n 's/.*"kind":"train".*"step_s":\([-0-9.e+]*\).*/\1/p' "$run/metrics.jsonl" 2>/dev/null |
    awk 'NR > 1 { s += $1; n++ } END { if (n) printf "%.2f", 1e3 * s / n }')
  bench_data "$log" || status=$?
  accum=$(python3 scripts/bench-torch.py "$recipe" --dry-run | grep -o 'accum=[0-9]*' | cut -d= -f2)
  if [[ -n $tracer ]]; then
    # The kernel timeline of a run at full speed (kernels/cuda/tools/kernel_trace.cpp): busy
    # time per op class and the idle gaps; bench's own warm-up step is left out.
    ((status == 0)) && { (use_deps && timed 150 "$log" env CUDA_INJECTION64_PATH="$(realpath "$tracer")" \
        USTRAIN_KERNEL_TRACE="$logs/ours-trace.csv" "$ustrain_bin" bench "$recipe" --steps "$steps") || status=$?; }
    ((status == 0)) && { python3 scripts/kernel-timeline.py "$logs/ours-trace.csv" --per-step "${accum:-1}" --top 25 \
        >"$logs/classes-ours.txt" 2>>"$log" || status=$?; }
    ((status == 0)) && { echo "ustrain (kernel timeline, $((steps - 1)) steps):"; sed 's/^/  /' "$logs/classes-ours.txt"; }
    gzip -f "$logs/ours-trace.csv"
  elif [[ -n $nsys ]]; then
    # bench's own warm-up step plus steps-1 more: `steps` steps in the profile.
    ((status == 0)) && { (use_deps && timed 150 "$log" "$nsys" profile -t cuda --sample none --cpuctxsw none \
        --force-overwrite true -o "$logs/ours" "$ustrain_bin" bench "$recipe" --steps $((steps - 1))) || status=$?; }
    ((status == 0)) && { timed 90 "$log" "$nsys" stats --report cuda_gpu_kern_sum --format csv \
        --force-export true --output "$logs/ours" "$logs/ours.nsys-rep" || status=$?; }
    [[ -f $logs/ours_cuda_gpu_kern_sum.csv ]] && mv "$logs/ours_cuda_gpu_kern_sum.csv" "$kernels"
    rm -f "$logs"/ours.nsys-rep "$logs"/ours.sqlite  # too large to bring back; the CSV holds the sums
  else
    # Nsight Compute instead: every kernel's duration, one at a time (serialised, so launch gaps
    # are not seen; the step time comes from the bench phase's run).
    steps=${PROFILE_STEPS_NCU:-2}
    ((status == 0)) && { (use_deps && timed 240 "$logs/ncu-all.csv" "$ncu" --metrics gpu__time_duration.sum \
        --cache-control none --clock-control none --csv --page raw "$ustrain_bin" bench "$recipe" \
        --steps $((steps - 1))) || status=$?; }
    python3 - "$logs/ncu-all.csv" "$kernels" <<'PY' >>"$log" 2>&1 || status=$?
import csv, sys
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
sums = {}
for r in csv.DictReader(rows):
    try:
        ns = float(r["gpu__time_duration.sum"].replace(",", ""))
    except (KeyError, ValueError):
        continue  # the units row
    calls, total = sums.get(r["Kernel Name"], (0, 0.0))
    sums[r["Kernel Name"]] = (calls + 1, total + ns)
with open(sys.argv[2], "w") as f:
    f.write("name,calls,total_ns\n")
    for name, (calls, total) in sorted(sums.items(), key=lambda kv: -kv[1][1]):
        f.write('"%s",%d,%.0f\n' % (name.replace('"', "'"), calls, total))
print(f"ncu: {sum(c for c, _ in sums.values())} kernels, {len(sums)} distinct")
PY
    gzip -f "$logs/ncu-all.csv"
  fi
  if ((status == 0)) && [[ -z $tracer ]]; then
    python3 scripts/kernel-classes.py "$kernels" --steps "$steps" --top 25 \
      ${step_ms:+--step-ms "$step_ms"} >"$logs/classes-ours.txt" 2>>"$log" || status=$?
    echo "ustrain (all $steps profiled steps; step_ms is the mean after the first):"; sed 's/^/  /' "$logs/classes-ours.txt"
  fi
  if [[ -f $logs/torch-kernels.csv ]]; then
    python3 scripts/kernel-classes.py "$logs/torch-kernels.csv" >"$logs/classes-torch.txt" 2>>"$log"
    echo "PyTorch (one step):"; sed 's/^/  /' "$logs/classes-torch.txt"
  fi
  # Nsight Compute on our own largest kernels (not cuBLASLt's or cuDNN's): one launch each.
  if ((status == 0)) && [[ -n $ncu ]]; then
    local k
    for k in $(grep -E ' (norm|elementwise|cross-entropy|optimizer|embedding|copy/cast) ' "$logs/classes-ours.txt" |
               grep -oE '[a-z_0-9]+_kernel' | awk '!seen[$0]++' | head -n "${PROFILE_NCU_KERNELS:-4}"); do
      (use_deps && timed 60 "$logs/ncu-$k.txt" "$ncu" --section SpeedOfLight --section LaunchStats \
         --section Occupancy -k "regex:$k" -c 1 "$ustrain_bin" bench "$recipe" --steps 1) ||
        echo "ncu $k: exit $?" >>"$log"
    done
  fi
  record profile $status "$log"
}

# The quickstart model (carry runs/data/fortunes, made by scripts/quickstart.sh's convert) trained
# 300 steps on the GPU in bf16, fp32 and fp16, the bf16 run again (run-to-run determinism), and resumed
# from its step-150 checkpoint (resume exactness); their metrics come back in the log archive.
phase_runs() {
  local log=$logs/runs.log status=0 run
  : >"$log"
  if [[ ! -f runs/data/fortunes/manifest.json ]]; then
    echo "no runs/data/fortunes: convert it here (scripts/quickstart.sh) and carry it" >>"$log"
    record runs 1 "$log"
    return
  fi
  local q=(recipes/quickstart.toml --overwrite --set device.type=cuda --set checkpoint.interval=150)
  for run in bf16:bf16 bf16-again:bf16 fp32:fp32 fp16:fp16; do
    (use_deps && timed 90 "$log" "$ustrain_bin" train "${q[@]}" --set "run.name=gpu-${run%%:*}" \
       --set "train.precision=${run##*:}") || status=$?
  done
  (use_deps && timed 90 "$log" "$ustrain_bin" train recipes/quickstart.toml --set device.type=cuda \
     --set checkpoint.interval=150 --set train.precision=bf16 --set run.name=gpu-bf16-resumed \
     --resume runs/gpu-bf16/checkpoints/step-00000150) || status=$?
  for run in gpu-bf16 gpu-bf16-again gpu-fp32 gpu-fp16 gpu-bf16-resumed; do
    cp "runs/$run/metrics.jsonl" "$logs/$run.metrics.jsonl" 2>/dev/null
  done
  # Steps 151-300: the same losses to the last digit, or how far apart.
  compare_runs() {
    paste <(sed -n 's/.*"kind":"train".*"step":\([0-9]*\).*"loss":\([-0-9.e+]*\).*/\1 \2/p' "$1" | awk '$1 > 150') \
          <(sed -n 's/.*"kind":"train".*"step":\([0-9]*\).*"loss":\([-0-9.e+]*\).*/\1 \2/p' "$2" | awk '$1 > 150') |
      awk '{ n++; if ($2 == $4) same++; d = ($4 - $2) / $2; if (d < 0) d = -d; if (d > worst) worst = d }
           END { printf "%d of %d logged steps identical, worst relative difference %.3g", same, n, worst }'
  }
  echo "  bf16 rerun vs bf16 (steps 151-300): $(compare_runs runs/gpu-bf16/metrics.jsonl runs/gpu-bf16-again/metrics.jsonl)" | tee -a "$log"
  echo "  bf16 resumed at 150 vs bf16: $(compare_runs runs/gpu-bf16/metrics.jsonl runs/gpu-bf16-resumed/metrics.jsonl)" | tee -a "$log"
  grep -h "info done:" "$log" | sed 's/^/  /'
  record runs $status "$log"
}

# The mixture-of-experts quickstart (recipes/moe-quickstart.toml: routing, the router's
# backward with its z-loss, the weighted combine, expert MLPs) 300 steps on the GPU in bf16 and
# fp32 (carry runs/data/fortunes); the metrics come back in the log archive, to set against the
# CPU's run of the same recipe.
phase_moe() {
  local log=$logs/moe.log status=0 prec
  : >"$log"
  if [[ ! -f runs/data/fortunes/manifest.json ]]; then
    echo "no runs/data/fortunes: convert it here (scripts/quickstart.sh) and carry it" >>"$log"
    record moe 1 "$log"
    return
  fi
  for prec in bf16 fp32; do
    (use_deps && timed 90 "$log" "$ustrain_bin" train recipes/moe-quickstart.toml --overwrite \
       --set device.type=cuda --set checkpoint.interval=0 --set "train.precision=$prec" \
       --set "run.name=gpu-moe-$prec") || status=$?
    cp "runs/gpu-moe-$prec/metrics.jsonl" "$logs/gpu-moe-$prec.metrics.jsonl" 2>/dev/null
  done
  grep -h "info done:" "$log" | sed 's/^/  /'
  record moe $status "$log"
}

# Several processes on the one GPU (NCCL refuses that, so parallel.device_comm = "auto" takes
# the host-staged communicator): the quickstart model 30 steps under dp = 2, tp = 2, pp = 2 and
# cp = 2 (ring attention over the block ops),
# each against the one-process run, in fp32 and bf16. RANKS_DEVICE=cpu runs the same on CPUs.
phase_ranks() {
  local log=$logs/ranks.log status=0 prec layout dev=${RANKS_DEVICE:-cuda} mpiexec
  : >"$log"
  if [[ ! -f runs/data/fortunes/manifest.json ]]; then
    echo "no runs/data/fortunes: convert it here (scripts/quickstart.sh) and carry it" >>"$log"
    record ranks 1 "$log"
    return
  fi
  mpiexec=$deps/usr/bin/mpiexec
  [[ -x $mpiexec ]] || mpiexec=$(command -v mpiexec)
  local base=(recipes/quickstart.toml --overwrite --set "device.type=$dev" --set train.steps=30
              --set train.eval_interval=30 --set checkpoint.interval=0)
  # losses_of RUN: "train STEP LOSS" and "val STEP LOSS" lines of its metrics.
  losses_of() {
    sed -n -e 's/.*"kind":"train".*"step":\([0-9]*\),"loss":\([-0-9.e+]*\).*/train \1 \2/p' \
           -e 's/.*"kind":"eval".*"step":\([0-9]*\),"val_loss":\([-0-9.e+]*\).*/val \1 \2/p' "runs/$1/metrics.jsonl"
  }
  for prec in ${RANKS_PRECISIONS:-fp32 bf16}; do
    (use_deps && timed 60 "$log" "$ustrain_bin" train "${base[@]}" --set "train.precision=$prec" \
       --set "run.name=ranks-$prec-1") || status=$?
    for layout in dp tp pp cp; do
      (use_deps && timed 90 "$log" "$mpiexec" -n 2 --oversubscribe --bind-to none "$ustrain_bin" train "${base[@]}" \
         --set "train.precision=$prec" --set "parallel.$layout=2" --set "run.name=ranks-$prec-${layout}2") ||
        status=$?
      local report
      report=$(paste <(losses_of "ranks-$prec-1" 2>/dev/null) <(losses_of "ranks-$prec-${layout}2" 2>/dev/null) |
        awk '$1 != $4 || $2 != $5 { bad = 1 } { d = ($6 - $3) / $3; if (d < 0) d = -d; if (d > w) w = d; n++ }
             END { if (bad || n < 31) print "missing or mismatched steps"; else printf "%d losses, worst relative difference %.3g", n, w }')
      echo "  $prec $layout=2 vs one process: $report" | tee -a "$log"
      [[ $report == missing* ]] && status=1
    done
  done
  grep -h "share .* GPU" "$log" | head -1 | sed 's/^/  /'
  record ranks $status "$log"
}

# compute-sanitizer over three training steps of a tiny model on the GPU (one dense layer and one
# of four experts, so the routing kernels run too): our kernels, cuBLASLt and cuDNN under
# memcheck, then racecheck; any error reported fails the phase.
phase_sanitize() {
  local log=$logs/sanitize.log status=0 dir tool
  : >"$log"
  dir=$(realpath -m runs/sanitize) && rm -rf "$dir" && mkdir -p "$dir/corpus"
  python3 -c 'import random
r = random.Random(7); w = "the quick brown fox jumps over a lazy dog while rain falls on plains".split()
print("\n\n".join(" ".join(r.choice(w) for _ in range(40)) for _ in range(300)))' >"$dir/corpus/a.txt"
  cat >"$dir/tiny.toml" <<TOML
[run]
name = "sanitize"
output_dir = "$dir/runs"
[model]
vocab_size = 257
d_model = 64
n_layers = 2
n_heads = 4
n_kv_heads = 2
ffn_hidden = 128
max_seq_len = 64
n_experts = 4
experts_per_token = 2
expert_ffn_hidden = 64
first_dense_layers = 1
router_z_loss = 0.001
[data]
path = "$dir/data"
[train]
steps = 3
micro_batch = 2
global_batch = 4
seq_len = 64
eval_interval = 0
precision = "bf16"
[device]
type = "cuda"
TOML
  (use_deps && timed 60 "$log" "$ustrain_bin" data convert --input "$dir/corpus" --output "$dir/data" \
     --val-fraction 0.1) || status=$?
  for tool in memcheck racecheck; do
    ((status == 0)) || break
    rm -rf "$dir/runs"
    (use_deps && timed 150 "$dir/$tool.log" compute-sanitizer --tool "$tool" --error-exitcode 9 \
       "$ustrain_bin" train "$dir/tiny.toml") || status=$?
    cat "$dir/$tool.log" >>"$log"
    echo "  $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$dir/$tool.log" | tail -1)"
    # racecheck also reports hazards inside cuDNN's generated Hopper kernels (warp-specialised,
    # asynchronous copies it cannot follow); only hazards in other kernels fail the phase.
    if [[ $tool == racecheck && $status == 9 ]] && grep -q 'Race reported' "$dir/$tool.log"; then
      local ours
      ours=$(grep -E 'Race reported|^=========     and ' "$dir/$tool.log" | grep -vc 'cudnn_generated')
      echo "  racecheck: $(grep -c 'Race reported' "$dir/$tool.log") reports, all but $ours inside cuDNN's kernels"
      ((ours == 0)) && status=0
    fi
  done
  record sanitize $status "$log"
}

phases=("$@")
if ((${#phases[@]} == 0)); then
  if [[ -f $prebuilt_archive ]]; then phases=(probe unpack prebuilt test ranks moe bench sanitize runs)
  else phases=(probe unpack configure build test ranks moe bench sanitize runs); fi
fi
all='probe unpack prebuilt configure build test bench profile runs ranks moe sanitize'
for p in "${phases[@]}"; do
  case " $all " in
    *" $p "*)
      note "== $p ($((SECONDS - start))s of ${budget}s)"
      "phase_$p" ;;
    *) echo "gpu-check: unknown phase '$p' ($all)" >&2; exit 2 ;;
  esac
done
{
  echo "gpu-check: summary (logs in $logs${OUT:+, and in \$OUT/gpu-check-logs.tgz})"
  printf '  %s\n' "${summary[@]}"
} | tee "$logs/summary.txt"
if [[ -n ${OUT:-} ]]; then
  cp "$logs/summary.txt" "$OUT/summary.txt"
  tar czf "$OUT/gpu-check-logs.tgz" -C "${logs%/*}" "${logs##*/}"
fi
exit $failed

#!/usr/bin/env bash
# The check to run on a lent GPU machine (CUDA, cmake, ninja, python3 with PyTorch; none of our
# Debian libraries; no network), from the repository root:
#
#   scripts/gpu-check.sh [PHASE...]      default: every phase, in this order
#     probe      the machine: OS, glibc, GPU, driver, toolchain, PyTorch
#     unpack     the dependency bundle made by scripts/gpu-bundle.sh (carry .deps/gpu)
#     configure  CMake, Release, Ninja, CUDA for sm_90, against the bundle
#     build      ustrain, the GPU tests and the kernels unit tests
#     test       ctest -L gpu (every CUDA op against the CPU; CPU vs GPU training)
#     unit       ctest -L kernels (the op unit tests)
#     bench      `ustrain bench` and scripts/bench-torch.py on recipes/bench-1b.toml, side by side
#
# Everything shares one time budget (GPU_CHECK_BUDGET seconds, default 540, so that the whole
# check fits one 10-minute device call); each phase runs under the smaller of its own limit and
# what is left, and a phase that no longer fits is reported as skipped. Phases may also run in
# separate calls while the machine stays up: the unpacked bundle and the build directory stay.
# Logs go to $OUT when it is set (else runs/gpu-check); the console gets a summary.
#
# Environment: OUT, GPU_CHECK_BUDGET, BUNDLE (.deps/gpu/deps.tgz), DEPS (.deps/gpu/root),
# BUILD (build-gpu), CUDA_ARCH (90), BENCH_STEPS (10 timed), BENCH_WARMUP (3 untimed),
# GPU_CHECK_CMAKE_ARGS (more configure arguments).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
start=$SECONDS
budget=${GPU_CHECK_BUDGET:-540}
bundle=${BUNDLE:-.deps/gpu/deps.tgz}
deps=$(realpath -m "${DEPS:-.deps/gpu/root}")
build=${BUILD:-build-gpu}
arch=${CUDA_ARCH:-90}
bench_steps=${BENCH_STEPS:-10}
bench_warmup=${BENCH_WARMUP:-3}
recipe=recipes/bench-1b.toml
logs=$(realpath -m "${OUT:-runs/gpu-check}")
mkdir -p "$logs"
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
  return 0
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
    ls /usr/local/cuda/lib64/libcudnn.so* /usr/lib/x86_64-linux-gnu/libcudnn.so* 2>/dev/null | head -2
    echo "== python"
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())'
    echo "== bundle"
    [[ -f ${bundle%/*}/bundle.txt ]] && head -3 "${bundle%/*}/bundle.txt" || echo "no bundle.txt beside $bundle"
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
    timed 120 "$log" tar xzf "$bundle" -C "$deps" || status=$?
  fi
  record unpack $status "$log"
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
     --target ustrain ustrain_gpu_tests ustrain_kernels_tests) || status=$?
  record build $status "$log"
}

phase_test() {
  local log=$logs/test.log status=0
  : >"$log"
  (use_deps && timed 300 "$log" ctest --test-dir "$build" -L gpu --no-tests=error --output-on-failure -j 4 \
     --timeout 280) || status=$?
  grep -E 'tests passed|Skipped|\(Failed\)|\(Timeout\)' "$log" | sed 's/^/  /' | tail -n 25
  record test $status "$log"
}

phase_unit() {
  local log=$logs/unit.log status=0
  : >"$log"
  (use_deps && export OMP_NUM_THREADS=2 && timed 180 "$log" ctest --test-dir "$build" -L kernels --no-tests=error \
     --output-on-failure -j "$(($(nproc) / 2))") || status=$?
  grep -E 'tests passed|\(Failed\)' "$log" | sed 's/^/  /' | tail -n 10
  record unit $status "$log"
}

# The mean over the timed steps (after the warm-up ones) of one field of ustrain's metrics.
metrics_mean() {
  sed -n "s/.*\"kind\":\"train\".*\"$2\":\([-0-9.e+]*\).*/\1/p" "$1" |
    awk -v skip="$bench_warmup" 'NR > skip { s += $1; n++ } END { if (n) printf "%.6g", s / n }'
}

phase_bench() {
  local log=$logs/bench-ustrain.log tlog=$logs/bench-torch.log status=0 tstatus=0
  : >"$log"; : >"$tlog"
  local ustrain=$build/app/ustrain data=runs/data/bench-random run=runs/bench-1b-bench
  if [[ ! -x $ustrain ]]; then
    echo "no $ustrain: run the build phase first" >>"$log"
    record bench-ours 1 "$log"
    return
  fi
  if [[ ! -f $data/manifest.json ]]; then  # random ids: speed does not depend on them
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
       --format npy --tokenizer random --vocab-size 32000 --no-eos --val-fraction 0) || status=$?
  fi
  if ((status == 0)); then
    # bench trains one warm-up step of its own before --steps: the run has warm-up + timed steps.
    (use_deps && timed 240 "$log" "$ustrain" bench "$recipe" --steps $((bench_warmup + bench_steps > 1 ? bench_warmup + bench_steps - 1 : 1))) || status=$?
  fi
  record bench-ours $status "$log"

  # PyTorch runs in the machine's own environment, without the bundle.
  timed 300 "$tlog" python3 scripts/bench-torch.py "$recipe" --steps "$bench_steps" --warmup "$bench_warmup" ||
    tstatus=$?
  record bench-torch $tstatus "$tlog"

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

phases=("$@")
((${#phases[@]})) || phases=(probe unpack configure build test unit bench)
for p in "${phases[@]}"; do
  case $p in
    probe | unpack | configure | build | test | unit | bench)
      note "== $p ($((SECONDS - start))s of ${budget}s)"
      "phase_$p" ;;
    *) echo "gpu-check: unknown phase '$p' (probe unpack configure build test unit bench)" >&2; exit 2 ;;
  esac
done
echo "gpu-check: summary (logs in $logs)"
printf '  %s\n' "${summary[@]}"
exit $failed

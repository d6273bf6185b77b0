#!/usr/bin/env bash
# Installs the Debian packages ustrain needs (idempotent, non-interactive), then configures
# and builds it in Release into build/.
# Usage: scripts/setup.sh [--target TARGET | --packages-only] [extra cmake args...]
#   --target ustrain builds only the binary (the quickstart); the default builds everything.
#   --packages-only installs the packages and stops.
# Packages are installed without their recommended ones, as on a minimal machine: what the
# build needs is named here (scripts/fresh-machine.sh checks that on a clean Debian root).
set -euo pipefail
cd "$(dirname "$0")/.."
target=()
packages_only=0
if [[ ${1:-} == --target ]]; then
  target=(--target "${2:?--target needs a target name}")
  shift 2
elif [[ ${1:-} == --packages-only ]]; then
  packages_only=1
  shift
fi

packages=(cmake ninja-build g++ pkg-config
          libtomlplusplus-dev libcli11-dev libhdf5-dev hdf5-tools libspdlog-dev libfmt-dev
          libgtest-dev libopenmpi-dev openmpi-bin libopenblas-dev libdnnl-dev libsentencepiece-dev libpcre2-dev libicu-dev
          nlohmann-json3-dev zlib1g-dev libzstd-dev libprotobuf-dev protobuf-compiler python3-protobuf python3-crcmod python3-matplotlib
          python3-sentencepiece
          gzip zstd fortunes fortunes-min slurm-wlm munge)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi
((packages_only)) && exit 0

# The CUDA toolkit is optional: when nvcc is found, the CUDA part of kernels/ builds too.
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "$(nproc)" "${target[@]}"
echo "setup: built build/app/ustrain"

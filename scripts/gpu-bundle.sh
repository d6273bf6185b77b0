#!/usr/bin/env bash
# Packs the Debian libraries ustrain's build needs (headers, shared libraries, CMake and
# pkg-config files), Open MPI included, into one tarball for a GPU machine that has CUDA,
# cmake, ninja and python3 but none of our packages and no network. scripts/gpu-check.sh
# unpacks it there.
#
#   scripts/gpu-bundle.sh [--binaries BUILD_DIR] [OUT_DIR]     (default .deps/gpu, ignored by git)
#
# With --binaries, the ustrain and GPU test binaries of BUILD_DIR (configured here with CUDA, for
# sm_90) travel too, stripped, in OUT_DIR/bin.txz, with any library they need that neither the
# bundle nor a machine with CUDA has (bin/lib): gpu-check.sh's prebuilt phase runs them, so the
# GPU window starts with tests instead of a build. The CUDA libraries (cudart, cuBLAS, cuDNN,
# NCCL) are the GPU machine's own.
#
# Writes OUT_DIR/deps.txz and OUT_DIR/bundle.txt (packages, versions, the newest glibc symbol
# the libraries need). The tarball holds two trees:
#   usr/       the packages we build against, first on every search path;
#   fallback/  the libraries those need beyond glibc and the compiler's runtime (zlib, OpenSSL,
#              curl for HDF5, udev for hwloc, ...), found by following the ELF dependencies;
#              gpu-check.sh puts them after the system's own, so the machine's copies win.
# Open MPI comes without its network transports (UCX, libfabric, verbs, PSM): on one machine
# it runs over shared memory and TCP, and the components for those transports stay unloaded.
set -euo pipefail
export LC_ALL=C  # one collation for sort and comm
cd "$(dirname "$0")/.."
binaries=""
if [[ ${1:-} == --binaries ]]; then
  binaries=${2:?"--binaries needs a build directory"}
  shift 2
fi
out=${1:-.deps/gpu}
arch=x86_64-linux-gnu

# What we build against: the Debian packages of scripts/setup.sh, as runtime libraries and
# headers, and Open MPI's minimal set (libraries, headers, launcher, wrapper data, and what
# libmpi and the pmix launcher component load).
packages=(libtomlplusplus-dev libtomlplusplus3 libcli11-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
          libhdf5-dev libhdf5-103-1 libhdf5-cpp-103-1 libhdf5-hl-100 libhdf5-hl-cpp-100 libsz2 libaec0
          libopenblas-dev libopenblas0-pthread libopenblas-pthread-dev libopenblas0 libgfortran5
          libdnnl-dev libdnnl2
          libsentencepiece-dev libsentencepiece0 nlohmann-json3-dev libgtest-dev zlib1g-dev zlib1g libzstd-dev libzstd1
          libprotobuf-dev libprotobuf-lite32 libprotobuf32 libprotoc32 protobuf-compiler
          libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libhwloc15 libevent-core-2.1-7
          libevent-pthreads-2.1-7 libpmix2 libmunge2 pkgconf pkgconf-bin libpkgconf3)
# Present on any machine with a C++ toolchain: never bundled.
system_libs='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so'
# Open MPI's network transports (see above), and Java bindings nobody loads.
optional_libs='^(libfabric|libucp|libucs|libuct|libucm|libibverbs|librdmacm|libpsm_infinipath|libpsm2|libnl-3'
optional_libs+='|libnl-route-3|libjvm)\.so'

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/usr-root" "$work/fallback-root"

download() {  # download PACKAGE... into $work/debs
  (cd "$work/debs" && apt-get download "$@" >/dev/null 2>&1) ||
    { apt-get update -qq && (cd "$work/debs" && apt-get download "$@" >/dev/null); }
}
extract() {  # extract ROOT PACKAGE...
  local root=$1 p; shift
  for p in "$@"; do dpkg -x "$(ls "$work"/debs/"${p}"_*.deb | head -1)" "$root"; done
}
# needed_sonames ROOT: the DT_NEEDED entries of every ELF file under ROOT.
needed_sonames() {
  find "$1" -type f \( -name '*.so*' -o -path '*/bin/*' \) -print0 |
    xargs -0 -r readelf -d 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u
}
provided_sonames() { find "$@" \( -type f -o -type l \) -name '*.so*' -printf '%f\n' | sort -u; }

echo "gpu-bundle: downloading ${#packages[@]} packages"
download "${packages[@]}"
extract "$work/usr-root" "${packages[@]}"

# Follow the dependencies: a library some bundled file needs, that the bundle lacks and that is
# neither glibc's nor optional, comes from the package that holds it on this machine.
ldconfig -p >"$work/ldconfig.txt"
fallback=()
while true; do
  missing=$(comm -23 <({ needed_sonames "$work/usr-root"; needed_sonames "$work/fallback-root"; } | sort -u) \
                     <(provided_sonames "$work/usr-root" "$work/fallback-root") |
            grep -Ev "$system_libs" | grep -Ev "$optional_libs" || true)
  [[ -z $missing ]] && break
  new=()
  for soname in $missing; do
    path=$(awk -v s="$soname" '$1 == s && /x86-64/ { print $NF; exit }' "$work/ldconfig.txt")
    [[ -n $path ]] || { echo "gpu-bundle: $soname is needed but not installed here; install it first" >&2; exit 1; }
    pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1) ||
      pkg=$(dpkg -S "$path" | head -1 | cut -d: -f1)
    [[ " ${packages[*]} ${fallback[*]} ${new[*]} " == *" $pkg "* ]] || new+=("$pkg")
  done
  ((${#new[@]})) || { echo "gpu-bundle: cannot place $missing" >&2; exit 1; }
  echo "gpu-bundle: libraries they need beyond glibc: ${new[*]}"
  download "${new[@]}"
  extract "$work/fallback-root" "${new[@]}"
  fallback+=("${new[@]}")
done

# Debian points some names through /etc/alternatives (cblas.h, libopenblas.so.0, mpicc, the mpi
# include directory, hdf5.pc): recreate those links inside the bundle, relative.
while IFS= read -r link; do
  target=$(readlink -f "$link")
  if [[ -e $work/usr-root$target && ! -e $work/usr-root$link ]]; then
    mkdir -p "$(dirname "$work/usr-root$link")"
    ln -s "$(realpath --relative-to="$(dirname "$link")" "$target")" "$work/usr-root$link"
  fi
done < <(find /usr/bin /usr/include /usr/lib/$arch /usr/lib/$arch/pkgconfig -maxdepth 2 -type l \
           -lname '/etc/alternatives/*' 2>/dev/null)

for root in "$work/usr-root" "$work/fallback-root"; do
  rm -rf "${root:?}/usr/share/doc" "$root/usr/share/man" "$root/usr/share/lintian" "${root:?}/etc"
  # Static libraries are left out but for GoogleTest's and protobuf-lite, which ustrain links
  # statically (core/tensorboard/CMakeLists.txt says why).
  find "$root" -name '*.a' ! -name 'libgtest*' ! -name 'libgmock*' ! -name 'libprotobuf-lite.a' -delete
done
# Fortran and Java bindings of Open MPI: large, and nothing here uses them.
rm -rf "$work/usr-root/usr/lib/$arch/fortran" "$work/usr-root/usr/share/java"

mkdir -p "$work/tree/fallback" "$out"
mv "$work/usr-root/usr" "$work/tree/usr"
[[ -d $work/fallback-root/usr ]] && mv "$work/fallback-root/usr" "$work/tree/fallback/usr"
if [[ -d $work/fallback-root/lib ]]; then  # a few Debian packages still ship /lib
  mkdir -p "$work/tree/fallback/usr"
  cp -a "$work/fallback-root/lib/." "$work/tree/fallback/usr/lib/"
fi
# The newest glibc symbol version the libraries we build against need, and who needs it (the
# fallback libraries load only where the machine lacks its own).
glibc_of() {
  find "$@" -type f -name '*.so*' -print0 | xargs -0 -r objdump -T 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' |
    sed 's/GLIBC_//' | sort -V | tail -1
}
glibc=$(glibc_of "$work/tree/usr")
needers=$(find "$work/tree/usr" -type f -name '*.so*' -exec sh -c \
            'objdump -T "$1" 2>/dev/null | grep -qF "(GLIBC_$2)" && basename "$1"' _ {} "$glibc" \; | sort | head -5)
{
  echo "built $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "needs glibc >= $glibc"
  echo "needed by: $(echo $needers) (fallback libraries: glibc >= $(glibc_of "$work/tree/fallback"))"
  echo "packages: $(dpkg-query -W -f='${Package}=${Version} ' "${packages[@]}")"
  echo "fallback: $( ((${#fallback[@]})) && dpkg-query -W -f='${Package}=${Version} ' "${fallback[@]}")"
} >"$out/bundle.txt"
# xz: oneDNN and OpenBLAS alone are 76 MiB; gzip left the call too little room.
XZ_OPT=${XZ_OPT:--6 -T0} tar cJf "$out/deps.txz" -C "$work/tree" .

if [[ -n $binaries ]]; then
  # One xz archive: the binaries and the libraries they bring (ICU's data alone is 30 MiB) fit
  # the call's 64 MiB only compressed.
  rm -rf "$out/bin" "$out/bin.txz" && mkdir -p "$work/bin/lib"
  cuda_libs='^(libcudart|libcublas|libcublasLt|libcudnn|libnccl|libcuda)\.so'
  provided=$(provided_sonames "$work/tree")
  # The kernel timeline library (kernels/cuda/tools) comes along where the build has it (CUPTI found).
  traced=""; [[ -f $binaries/kernels/libustrain_kernel_trace.so ]] && traced=kernels/libustrain_kernel_trace.so
  for b in app/ustrain tests/gpu/ustrain_gpu_tests $traced; do
    [[ -x $binaries/$b ]] || { echo "gpu-bundle: no $binaries/$b: build it first (CUDA on)" >&2; exit 1; }
    strip --strip-unneeded -o "$work/bin/${b##*/}" "$binaries/$b"
    while read -r soname path; do
      grep -Eq "$system_libs|$cuda_libs" <<<"$soname" && continue
      grep -qxF "$soname" <<<"$provided" && continue
      cp -L "$path" "$work/bin/lib/$soname"
    done < <(ldd "$binaries/$b" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
  done
  echo "built from $(git describe --always --dirty 2>/dev/null) at $(date -u +%Y-%m-%dT%H:%MZ)" >"$work/bin/BUILT_FROM"
  tar cJf "$out/bin.txz" -C "$work" bin
fi
size=$(du -sm "$out" | cut -f1)
tracked=$(git ls-files -z 2>/dev/null | xargs -0 du -cb 2>/dev/null | tail -1 | awk '{ print int($1 / 1048576) }')
if ((size + tracked > 60)); then
  echo "gpu-bundle: $out ($size MiB) and the tracked tree (${tracked} MiB) come near the 64 MiB a device call" \
       "carries; carry less" >&2
  exit 1
fi
echo "gpu-bundle: wrote $out/deps.txz ($(du -h "$out/deps.txz" | cut -f1))${binaries:+ and $out/bin.txz}," \
     "needs glibc >= $glibc; $size MiB in all: carry '$out' in the device call"

#!/usr/bin/env bash
# The README's two commands on a fresh machine: builds a clean Debian 12 (minbase) root from
# the Debian archive with mmdebstrap, copies this checkout's last commit into it (as a clean
# clone has it; --working-tree copies the working tree instead, uncommitted changes and
# untracked files git does not ignore included), and runs there, as a new user would, the
# test command (scripts/test.sh) and then the quickstart (scripts/quickstart.sh), timing each. The CUDA
# toolkit, which a real machine has preinstalled and Debian does not provide, is bind-mounted
# read-only from this machine when present (--no-cuda leaves it out).
#
# With --missing-packages it checks instead that each Debian package ustrain builds against,
# removed in turn from an installed root, stops configure with one message naming that package.
#
# Needs root (chroot and mounts) and mmdebstrap (installed when missing). Cleans up after
# itself; logs stay in runs/fresh-machine/. Exits non-zero on any failure; the last line it
# prints is a one-line summary.
#
# Usage: scripts/fresh-machine.sh [--no-cuda] [--keep] [--working-tree] [--quickstart-steps N]
#                                 [--missing-packages]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
with_cuda=1 keep=0 working_tree=0 quickstart_args=() mode=commands
while (($#)); do
  case $1 in
    --no-cuda) with_cuda=0 ;;
    --keep) keep=1 ;;
    --working-tree) working_tree=1 ;;
    --quickstart-steps) quickstart_args=(--set "train.steps=${2:?--quickstart-steps needs a number}"); shift ;;
    --missing-packages) mode=missing ;;
    -h|--help) usage; exit 0 ;;
    *) echo "fresh-machine: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [[ $(id -u) -ne 0 ]]; then
  echo "fresh-machine: needs root (it builds a chroot and mounts /proc, /sys and /dev in it)" >&2
  exit 2
fi
if ! command -v mmdebstrap >/dev/null; then
  echo "fresh-machine: installing mmdebstrap"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap
fi

logs=$repo/runs/fresh-machine
mkdir -p "$logs"
work=$(mktemp -d /var/tmp/ustrain-fresh.XXXXXX)
root=$work/root
summary="fresh-machine: FAIL (setting up the root)"

# Ends every process still running inside the root, unmounts what was mounted, removes it.
cleanup() {
  local rc=$?
  set +e
  for proc in /proc/[0-9]*; do
    [[ $(readlink "$proc/root" 2>/dev/null) == "$root" ]] && kill -9 "${proc#/proc/}" 2>/dev/null
  done
  sleep 1
  for m in $(awk -v r="$root" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m"
  done
  if ((keep)); then
    echo "fresh-machine: root kept at $root"
  else
    rm -rf --one-file-system "$work"
  fi
  echo "$summary"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The machine's own Debian sources (the archive a machine like this one installs from).
sources=()
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
  [[ -s $f ]] && { sources=("$f"); break; }
done
echo "fresh-machine: building a Debian 12 minbase root in $root"
start=$SECONDS
mmdebstrap --quiet --variant=minbase bookworm "$root" "${sources[@]}" >"$logs/mmdebstrap.log" 2>&1 \
  || { echo "fresh-machine: mmdebstrap failed, see $logs/mmdebstrap.log" >&2; exit 1; }
echo "fresh-machine: root built in $((SECONDS - start)) s"

mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# What an installed system has and a minbase root lacks: its name, and localhost resolving
# (Slurm's daemons and munge look both up).
hostname >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$(hostname)" >"$root/etc/hosts"
if ((with_cuda)) && [[ -d /usr/local/cuda ]]; then
  cuda=$(readlink -f /usr/local/cuda)
  mkdir -p "$root$cuda"
  mount --bind "$cuda" "$root$cuda" && mount -o remount,bind,ro "$root$cuda"
  ln -s "$cuda" "$root/usr/local/cuda"
  printf '%s\n' "$cuda/lib" "$cuda/lib64" >"$root/etc/ld.so.conf.d/cuda.conf"
  chroot "$root" ldconfig
  echo "fresh-machine: CUDA toolkit from $cuda mounted read-only"
fi

mkdir -p "$root/root/ustrain"
if ((working_tree)); then
  git -C "$repo" ls-files -z --cached --others --exclude-standard \
    | (cd "$repo" && tar --null -T - -cf -) | tar -xf - -C "$root/root/ustrain"
else
  git -C "$repo" archive HEAD | tar -xf - -C "$root/root/ustrain"
  echo "fresh-machine: copied commit $(git -C "$repo" rev-parse --short HEAD)"
fi

# A login-like environment: nothing of this machine's but the terminal type.
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /root/ustrain && $1"
}

# Runs one README command in the root; its time goes into the summary.
times=()
run_step() {
  local name=$1 cmd=$2 t0=$SECONDS
  echo "fresh-machine: $name: $cmd (log: $logs/$name.log)"
  summary="fresh-machine: FAIL at $name (${times[*]:-first step}; log: $logs/$name.log)"
  if ! in_root "$cmd" >"$logs/$name.log" 2>&1; then
    tail -n 30 "$logs/$name.log" >&2
    exit 1
  fi
  local t=$((SECONDS - t0))
  times+=("$name $((t / 60))m$(printf %02d $((t % 60)))s")
  echo "fresh-machine: $name passed in $((t / 60))m$(printf %02d $((t % 60)))s"
}

if [[ $mode == commands ]]; then
  run_step tests "scripts/test.sh"
  run_step quickstart "scripts/quickstart.sh ${quickstart_args[*]}"
  summary="fresh-machine: PASS (${times[*]})"
  exit 0
fi

# --missing-packages: install everything, then remove each build dependency in turn (leaving
# what depends on it) and check that configure names the package to install. Each entry is
# PACKAGE or REMOVED=NAMED, REMOVED a comma-separated list: pkg-config's programs come from
# pkgconf and pkgconf-bin, OpenBLAS's development files from libopenblas-pthread-dev.
run_step install "scripts/setup.sh --packages-only"
checked=() failed=()
for entry in pkgconf,pkgconf-bin=pkg-config libtomlplusplus-dev libcli11-dev libfmt-dev libspdlog-dev \
             nlohmann-json3-dev libhdf5-dev libopenmpi-dev libopenblas-pthread-dev=libopenblas-dev libprotobuf-dev \
             protobuf-compiler libsentencepiece-dev zlib1g-dev libzstd-dev libpcre2-dev libicu-dev libdnnl-dev \
             libgtest-dev; do
  removed=${entry%%=*} named=${entry#*=}
  removed=${removed//,/ }
  in_root "dpkg --remove --force-depends $removed" >"$logs/remove-${removed// /+}.log" 2>&1 || true
  # CMake wraps long messages over several lines: read them as one.
  out=$(in_root "rm -rf /tmp/cfg && cmake -S . -B /tmp/cfg -G Ninja -DUSTRAIN_WITH_CUDA=OFF 2>&1" | tr -s ' \n' ' ' || true)
  message=$(grep -oE "ustrain: .{1,80} (was|were) not found\. Install the Debian package '[^']*'" <<<"$out" || true)
  if grep -q "Install the Debian package '$named'" <<<"$out"; then
    checked+=("$named")
    echo "  without $removed: $message"
  else
    failed+=("$removed")
    echo "  without $removed: NO CLEAR MESSAGE; configure said: ${out: -600}"
  fi
  in_root "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $removed $named" \
    >>"$logs/remove-${removed// /+}.log" 2>&1
done
if ((${#failed[@]})); then
  summary="fresh-machine: FAIL (${#checked[@]} packages named when missing; no clear message without ${failed[*]})"
  exit 1
fi
summary="fresh-machine: PASS (each of ${#checked[@]} packages, removed, is named by configure)"

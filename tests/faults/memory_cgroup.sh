# A memory cgroup, as Slurm's --mem makes one: a memory plan larger than its limit is refused
# with the numbers before anything is allocated (it used to be killed by the kernel after a
# few seconds, with no output); a plan within 10% of it is warned about; page cache the job's
# own file copies left in the cgroup is not counted as used; device.memory_check = "warn" runs
# past the check with a warning. Skipped, with the reason, where this user cannot make a memory
# cgroup.
source "$(dirname "$0")/lib/faults.bash"

# A fresh cgroup with `limit` bytes: v2 (memory.max) or v1 (memory.limit_in_bytes).
make_cgroup() {
  local name=ustrain-fault-$$ limit=$1
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
    cgroup=/sys/fs/cgroup/$name
    mkdir -p "$cgroup" 2>/dev/null && echo "$limit" >"$cgroup/memory.max" 2>/dev/null && return 0
  elif [[ -d /sys/fs/cgroup/memory ]]; then
    cgroup=/sys/fs/cgroup/memory/$name
    mkdir -p "$cgroup" 2>/dev/null && echo "$limit" >"$cgroup/memory.limit_in_bytes" 2>/dev/null && return 0
  fi
  return 1
}
# in_cgroup COMMAND...: runs the command inside the cgroup.
in_cgroup() { bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cgroup" "$@"; }

setup_tiny_run
if ! make_cgroup $((1 << 30)); then
  skip "memory cgroup of 1 GiB" "cannot create a memory cgroup here (needs root and a writable cgroup filesystem)"
  finish
fi
trap 'rmdir "$cgroup" 2>/dev/null; rm -rf "$WORK"' EXIT

# About 2.2 GiB of plan (3.7 GiB with the checkpoint snapshot): a wide model on the tiny data.
wide=(--set model.d_model=1024 --set model.n_heads=8 --set model.n_kv_heads=8 --set model.ffn_hidden=4096
      --set model.n_layers=8 --set train.micro_batch=8 --set train.global_batch=8)
fault "2.2 GiB plan in a 1 GiB cgroup: refused with the numbers" 2 \
  "(the model does not fit|the memory plan needs).*, but this host has [0-9.]+ [MG]iB available" -- \
  in_cgroup timeout 120 "$USTRAIN" train tiny.toml "${wide[@]}"
fault "2.2 GiB plan in a 1 GiB cgroup, device.memory_check = warn: a warning" 0 \
  "running anyway as device.memory_check = \"warn\" asks" -- \
  in_cgroup timeout 120 "$USTRAIN" train tiny.toml "${wide[@]}" --dry-run --set device.memory_check=warn
# A dataset copied inside the job fills the cgroup with page cache the kernel reclaims at need:
# the tiny model still fits (it used to be refused with "this host has 104 KiB available").
in_cgroup dd if=/dev/zero of="$WORK/copied-dataset" bs=1M count=1200 conv=fsync status=none
fault "a cgroup full of the job's file cache: the tiny model fits" 0 "" -- \
  in_cgroup timeout 120 "$USTRAIN" train tiny.toml --set train.steps=1 --set run.name=cached
rm -f "$WORK/copied-dataset"
# Within 10% of what the cgroup leaves (the limit less what the runs before keep in it, which
# differs from machine to machine): the check says how much that is, and two dry-runs give the
# MLP width whose plan (with the checkpoint snapshot) is 95% of it.
mib() { awk -v n="$1" -v u="$2" 'BEGIN { print (u == "GiB" ? n * 1024 : u == "KiB" ? n / 1024 : n) }'; }
read -r amount unit < <(in_cgroup "$USTRAIN" train tiny.toml "${wide[@]}" 2>&1 |
  sed -n 's/.*but this host has \([0-9.]*\) \([KMG]iB\) available.*/\1 \2/p' | head -1)
near=(--set model.d_model=1024 --set model.n_heads=8 --set model.n_kv_heads=8 --set model.n_layers=4
      --set train.micro_batch=8 --set train.global_batch=8 --set train.steps=1)
plan_mib() {
  read -r n u < <("$USTRAIN" train tiny.toml "${near[@]}" --set model.ffn_hidden="$1" --dry-run 2>&1 |
    sed -n 's/^ *total with host memory *\([0-9.]*\) \([KMG]iB\)$/\1 \2/p')
  mib "$n" "$u"
}
ffn=$(awk -v avail="$(mib "$amount" "$unit")" -v p1="$(plan_mib 512)" -v p2="$(plan_mib 1024)" \
  'BEGIN { f = 512 + (0.95 * avail - p1) / ((p2 - p1) / 512); print int(f / 16) * 16 }')
fault "plan within 10% of a 1 GiB cgroup: warned (then killed)" "*" "within 10% of the [0-9.]+ [MG]iB available on this host" -- \
  in_cgroup timeout 300 "$USTRAIN" train tiny.toml "${near[@]}" --set model.ffn_hidden="$ffn" --set run.name=near
finish

# A real one-node Slurm cluster (munged, slurmctld, slurmd from Debian's slurm-wlm) confined to
# a scratch directory, for end-to-end tests. Source it, then:
#   local_slurm_start DIR   write DIR/slurm.conf, start the daemons, wait until the node is idle;
#                           exports SLURM_CONF so that sbatch, squeue, scontrol... talk to it
#   local_slurm_stop        cancel its jobs and stop the daemons it started, by PID (idempotent;
#                           call it from an EXIT trap)
#   local_slurm_logs        print the tails of the daemons' logs (for a failing test)
# Needs root (slurmd starts jobs as their submitter, munged runs as user munge).

LOCAL_SLURM_DIR=
LOCAL_SLURM_PIDS=()  # munged, slurmctld, slurmd: stopped in reverse order
# The daemons stop themselves after this many seconds even if the test that started them is
# killed without running its EXIT trap (CTest kills a test that runs past its TIMEOUT).
LOCAL_SLURM_LIFETIME=${LOCAL_SLURM_LIFETIME:-900}

local_slurm_missing() {
  local tool missing=()
  for tool in munged slurmctld slurmd sbatch squeue scontrol scancel sinfo srun setpriv; do
    command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] || missing+=("$tool")
  done
  # srun --mpi=pmix: Slurm's plugin, and the PMIx library it opens (libpmix-dev).
  compgen -G '/usr/lib/*/slurm-wlm/mpi_pmix.so' >/dev/null || missing+=(mpi_pmix.so)
  compgen -G '/usr/lib/*/libpmix.so' >/dev/null || missing+=(libpmix.so)
  id munge >/dev/null 2>&1 || missing+=("user munge")
  echo "${missing[*]}"
}

# Two adjacent TCP ports nobody listens on, away from Slurm's defaults (6817/6818), so that
# this cluster never meets a real one or a second copy of the test.
_local_slurm_ports() {
  local base tries
  for ((tries = 0; tries < 50; tries++)); do
    base=$((20000 + RANDOM % 20000))
    if ! ss -Htln 2>/dev/null | awk '{print $4}' | grep -Eq ":($base|$((base + 1)))\$"; then
      echo "$base"
      return 0
    fi
  done
  return 1
}

# _local_slurm_daemon NAME COMMAND...: starts COMMAND in the background under a watchdog.
_local_slurm_daemon() {
  local name=$1
  shift
  # GNU timeout passes a TERM it receives on to the daemon, so its PID stands for the daemon's.
  timeout --kill-after=10 "$LOCAL_SLURM_LIFETIME" "$@" >"$LOCAL_SLURM_DIR/log/$name.out" 2>&1 &
  LOCAL_SLURM_PIDS+=($!)
}

# _local_slurm_wait SECONDS COMMAND...: retries COMMAND every 0.5 s until it succeeds.
_local_slurm_wait() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

_local_slurm_node_idle() { [[ $(timeout 10 sinfo -h -n localhost -o %t 2>/dev/null) == idle ]]; }
_local_slurm_no_jobs() { local out; out=$(timeout 10 squeue -h -o %i 2>&1) && [[ -z $out ]]; }
_local_slurm_gone() { ! kill -0 "$1" 2>/dev/null; }

local_slurm_start() {
  local dir=$1 missing port
  missing=$(local_slurm_missing)
  if [[ -n $missing ]]; then
    echo "local_slurm: missing $missing; install the Slurm packages with scripts/setup.sh" >&2
    return 1
  fi
  port=$(_local_slurm_ports) || { echo "local_slurm: found no free TCP ports" >&2; return 1; }
  LOCAL_SLURM_DIR=$dir
  mkdir -p "$dir"/{state,spool/localhost,log,tmp,munge} || return 1
  # munged refuses a socket unless every directory above it is searchable by user, group and
  # others (mktemp makes its directories 0700): open the path for searching, not for reading.
  local parent=$dir
  while [[ $parent != / ]]; do
    (( (8#$(stat -c %a "$parent") & 8#111) == 8#111 )) || chmod a+x "$parent"
    parent=$(dirname "$parent")
  done
  # A private munge key and socket: jobs and commands authenticate as on a real cluster, and
  # neither a system munged nor /etc/munge/munge.key is needed or touched. munged insists on
  # a key only its user can read and a socket directory everyone can search.
  head -c 1024 /dev/urandom >"$dir/munge/munge.key"
  chown -R munge:munge "$dir/munge"
  chmod 755 "$dir/munge"
  chmod 400 "$dir/munge/munge.key"

  cat >"$dir/slurm.conf" <<EOF
ClusterName=ustraintest
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire is also how long a requeued job must wait before it may start again (Slurm's
# default is 120 s, the minimum 5 s): 10 s keeps the requeue test short and still leaves
# step launches on a loaded two-core machine plenty of time to use their credentials.
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
# No cgroups: plain process tracking works in containers and unprivileged CI runners.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
# PMIx keeps per-job files under TmpFS; a private one keeps two clusters' job 1 apart.
TmpFS=$dir/tmp
# The main scheduling loop runs every 60 s by default; a requeued job whose begin time has
# passed waits for it, so run it every 2 s.
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=2
KillWait=5
ReturnToService=2
# Finished jobs stay visible to scontrol (no accounting here) for the whole test.
MinJobAge=600
# The node may claim more CPUs than the machine has, so that 4 ranks fit on 2 cores.
SlurmdParameters=config_overrides
NodeName=localhost CPUs=8 RealMemory=1024 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$dir/slurm.conf

  # -F: in the foreground (its PID is ours to stop), logging to stderr (log/munged.out).
  _local_slurm_daemon munged setpriv --reuid=munge --regid=munge --clear-groups \
    munged -F --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/munged.seed"
  _local_slurm_wait 20 test -S "$dir/munge/munge.socket" ||
    { echo "local_slurm: munged did not start" >&2; local_slurm_logs >&2; return 1; }
  # -D: in the foreground, for the same reason; -i: no saved state to recover (it is new).
  _local_slurm_daemon slurmctld slurmctld -D -i -f "$SLURM_CONF"
  _local_slurm_daemon slurmd slurmd -D -N localhost -f "$SLURM_CONF"
  _local_slurm_wait 60 _local_slurm_node_idle ||
    { echo "local_slurm: the node did not become idle within 60 s" >&2; local_slurm_logs >&2; return 1; }
}

local_slurm_logs() {
  local f
  for f in "$LOCAL_SLURM_DIR"/log/*; do
    [[ -s $f ]] && { echo "--- $f"; tail -n 30 "$f"; }
  done
}

# PIDs of processes that carry this cluster's SLURM_CONF in their environment (slurmstepd
# and job tasks): what would outlive the daemons if a job were still running. Pure bash, so
# that no child of this shell (which exports SLURM_CONF too) is among them.
_local_slurm_job_pids() {
  local f pid entry entries
  for f in /proc/[0-9]*/environ; do
    pid=${f#/proc/}
    pid=${pid%/environ}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    mapfile -d '' entries 2>/dev/null <"$f" || continue
    for entry in "${entries[@]}"; do
      [[ $entry == "SLURM_CONF=$LOCAL_SLURM_DIR/slurm.conf" ]] && { echo "$pid"; break; }
    done
  done
}

local_slurm_stop() {
  [[ -n $LOCAL_SLURM_DIR ]] || return 0
  local pid i
  # Let Slurm end its jobs first (TERM, then KILL after KillWait), so no task outlives it.
  if ((${#LOCAL_SLURM_PIDS[@]} == 3)) && ! _local_slurm_no_jobs; then
    timeout 10 scancel --quiet --user="$(id -un)" 2>/dev/null
    _local_slurm_wait 30 _local_slurm_no_jobs || echo "local_slurm: jobs still listed after scancel" >&2
  fi
  for ((i = ${#LOCAL_SLURM_PIDS[@]} - 1; i >= 0; i--)); do
    pid=${LOCAL_SLURM_PIDS[i]}
    kill -TERM "$pid" 2>/dev/null || continue
    _local_slurm_wait 15 _local_slurm_gone "$pid" || kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  for pid in $(_local_slurm_job_pids); do
    echo "local_slurm: killing leftover job process $pid" >&2
    kill -KILL "$pid" 2>/dev/null
  done
  LOCAL_SLURM_PIDS=()
  LOCAL_SLURM_DIR=
}

# Helpers of the fault suite (tests/faults/README.md). Each case script is called as
#   bash tests/faults/NAME.sh PATH/TO/ustrain SOURCE_DIR
# FAULT_MODE=ci (the default, what CTest runs) takes the quick form of each case;
# FAULT_MODE=full (scripts/fault-suite.sh) the whole one. Every case adds one row to the file
# $FAULT_RESULTS when it is set:  CASE <TAB> EXIT <TAB> FIRST MESSAGE LINE <TAB> RESULT
source "$(dirname "${BASH_SOURCE[0]}")/../../cli/lib/common.bash"
FAULT_MODE=${FAULT_MODE:-ci}
full() { [[ $FAULT_MODE == full ]]; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1

# The message line that matters: the first line matching PATTERN when given, else the first
# "error:" line, else the first warning, else the first line; cut to 150 characters.
first_line() {
  local line=""
  [[ -n ${2:-} ]] && line=$(grep -m1 -E -- "$2" "$1")
  [[ -n $line ]] ||
    line=$(grep -m1 -E '^(error|internal error):' "$1" || grep -m1 -iE 'warn' "$1" || grep -m1 . "$1" || true)
  line=${line//$'\t'/ }
  [[ $line =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}\ [0-9:]{8}\ (.*)$ ]] && line=${BASH_REMATCH[1]}  # the log's time stamp
  ((${#line} > 150)) && line="${line:0:147}..."
  printf '%s' "$line"
}

# record CASE EXIT RESULT [MESSAGE_FILE [PATTERN]]: one row of the suite's table.
record() {
  local message=""
  [[ -n ${4:-} && -f $4 ]] && message=$(first_line "$4" "${5:-}")
  [[ -n ${FAULT_RESULTS:-} ]] && printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$message" "$3" >>"$FAULT_RESULTS"
  return 0
}

# fault CASE EXPECTED_EXIT PATTERN -- command...: runs the command (output in $WORK/out.txt),
# which must exit with EXPECTED_EXIT ("*": any status) and print a line matching the extended
# regex PATTERN (empty: anything), and never crash.
fault() {
  local name=$1 code=$2 pattern=$3
  shift 4
  "$@" >"$WORK/out.txt" 2>&1
  local got=$? ok=1
  [[ $code == "*" || $got -eq $code ]] || ok=0
  [[ -z $pattern ]] || grep -Eq -- "$pattern" "$WORK/out.txt" || ok=0
  grep -Eq "internal error|Segmentation|terminate called|Aborted|AddressSanitizer|runtime error" "$WORK/out.txt" && ok=0
  if ((ok)); then
    pass "$name (exit $got)"
    record "$name" "$got" pass "$WORK/out.txt" "$pattern"
  else
    fail "$name: exit $got (expected $code), output should match /$pattern/"
    tail -5 "$WORK/out.txt"
    record "$name" "$got" fail "$WORK/out.txt"
  fi
}

# check CASE EXIT CONDITION_STATUS [MESSAGE_FILE [PATTERN]]: records a case judged by the
# script itself.
check() {
  if [[ $3 -eq 0 ]]; then
    pass "$1"
    record "$1" "$2" pass "${4:-}" "${5:-}"
  else
    fail "$1"
    record "$1" "$2" fail "${4:-}" "${5:-}"
  fi
}

# skip CASE REASON: a case this machine cannot run, with the reason in the table.
skip() {
  echo "skip: $1: $2"
  [[ -n ${FAULT_RESULTS:-} ]] && printf '%s\t-\t%s\tskip\n' "$1" "$2" >>"$FAULT_RESULTS"
  return 0
}

# A tiny dataset and recipe in $WORK: data/ and tiny.toml.
setup_tiny_run() {
  make_corpus
  tiny_recipe | sed 's/^warmup_steps = 5/warmup_steps = 1/' >tiny.toml  # short runs of 1 or 2 steps too
  "$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >convert.log 2>&1 || {
    fail "data convert"
    cat convert.log
  }
}

# The MPI rank number of a process of `mpiexec`, from its environment.
rank_of() { tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p'; }

# The pid of rank R among the ustrain processes below mpiexec pid M.
rank_pid() {
  local m=$1 r=$2 p
  for p in $(pgrep -x ustrain); do
    [[ $(rank_of "$p") == "$r" ]] || continue
    # only processes of this job: descendants of M
    local q=$p
    while [[ -n $q && $q -gt 1 ]]; do
      [[ $q == "$m" ]] && { echo "$p"; return; }
      q=$(ps -o ppid= -p "$q" | tr -d ' ')
    done
  done
}

# Helpers for the CLI end-to-end tests. Each test script is called as
#   bash tests/cli/NAME.sh PATH/TO/ustrain SOURCE_DIR
set -uo pipefail
USTRAIN=$(realpath "$1")
SOURCE_DIR=$(realpath "$2")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
export OMP_NUM_THREADS=1
# The CPU's peak FLOP/s for MFU is kept in the user's cache directory: here, a fresh one.
export XDG_CACHE_HOME="$WORK/cache"
failures=0
# Debian's interpreter: the Python packages scripts/setup.sh installs (protobuf, crcmod,
# matplotlib, sentencepiece) are importable only by it, whatever python3 comes first on PATH.
PYTHON=/usr/bin/python3

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# expect_exit CODE DESCRIPTION -- command...   (stdout+stderr captured in $WORK/out.txt)
expect_exit() {
  local code=$1 what=$2; shift 3
  "$@" >"$WORK/out.txt" 2>&1
  local got=$?
  if [[ $got -eq $code ]]; then pass "$what (exit $got)"; else fail "$what: exit $got, expected $code"; cat "$WORK/out.txt"; fi
}
# expect_output PATTERN DESCRIPTION: the last command's output matches the extended regex.
expect_output() {
  if grep -Eq -- "$1" "$WORK/out.txt"; then pass "$2"; else fail "$2: output lacks /$1/"; cat "$WORK/out.txt"; fi
}

# A small English corpus made here: documents separated by blank lines.
make_corpus() {
  mkdir -p corpus
  local words=(the quick brown fox jumps over lazy dog and cat sat on mat while rain fell in spain
               plains every morning birds sing songs of hope under bright sky)
  local i j doc
  for ((i = 0; i < 400; i++)); do
    doc=""
    for ((j = 0; j < 12; j++)); do doc+="${words[$(( (i * 7 + j * 3 + i * j) % ${#words[@]} ))]} "; done
    printf '%s\n\n' "$doc"
  done >corpus/a.txt
}

# Prints the losses of a run's metrics file, one per line.
losses() { sed -n 's/.*"kind":"train".*"loss":\([-0-9.e+]*\).*/\1/p' "$1"; }

tiny_recipe() {
  cat <<'TOML'
[run]
name = "tiny"
output_dir = "runs"
[model]
vocab_size = 257
d_model = 32
n_layers = 2
n_heads = 4
n_kv_heads = 2
ffn_hidden = 64
max_seq_len = 32
[data]
path = "data"
[train]
steps = 30
micro_batch = 4
global_batch = 8
seq_len = 32
eval_interval = 10
eval_batches = 2
[optim]
lr = 3e-3
[schedule]
warmup_steps = 5
[log]
interval = 5
TOML
}

finish() {
  if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
  echo "all checks passed"
}

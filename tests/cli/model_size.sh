# A recipe that asks for an impossible model is a user error with its numbers, found before
# anything is allocated, for training and for --dry-run alike; never an internal error. (The
# memory cases need a host with less than 4 TiB of memory available.)
source "$(dirname "$0")/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
no_internal() { grep -q "internal error" out.txt && fail "$1: an internal error" || pass "$1: not an internal error"; }

for mode in train dry-run; do
  extra=(); [[ $mode == dry-run ]] && extra=(--dry-run)
  expect_exit 2 "$mode: a billion layers" -- "$USTRAIN" train tiny.toml "${extra[@]}" --set model.n_layers=1000000000
  expect_output "model.n_layers = 1000000000 is not allowed: it must be 1 to 65536" "names the key and its range"
  expect_exit 2 "$mode: byte counts past 2^64" -- "$USTRAIN" train tiny.toml "${extra[@]}" \
    --set model.vocab_size=4611686018427387904
  expect_output "vocabulary of 4611686018427387904 has [0-9.e+]+ parameters.*more than any machine has" \
    "says how large and why"
  expect_exit 2 "$mode: more layers than this host holds" -- "$USTRAIN" train tiny.toml "${extra[@]}" \
    --set model.n_layers=60000 --set model.d_model=4096 --set model.n_heads=32 --set model.n_kv_heads=8 \
    --set model.ffn_hidden=11008
  expect_output "the model does not fit: 60000 layers, d_model 4096, ffn_hidden 11008, vocabulary 257 make [0-9.e+]+ parameters x 16 bytes = [0-9.]+ [KMGTPEZY]?i?B.*this host has [0-9.]+ GiB available" \
    "says what the state needs and what the host has"
  no_internal "$mode: too many layers"
  expect_exit 2 "$mode: micro-batches larger than this host holds" -- "$USTRAIN" train tiny.toml "${extra[@]}" \
    --set model.vocab_size=65536 --set train.micro_batch=62500 --set train.global_batch=62500 \
    --set train.seq_len=256 --set model.max_seq_len=256 --set data.prefetch=0
  expect_output "the memory plan needs [0-9.]+ GiB per process \(parameters .*activations [0-9.]+ GiB.*data batches .*this host has [0-9.]+ GiB available; lower train.micro_batch" \
    "names the plan's parts and the host's memory"
  no_internal "$mode: huge micro-batches"
done
[[ ! -d runs ]] && pass "nothing was written" || fail "a refused run created runs/"
finish

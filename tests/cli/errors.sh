# Every documented error: one clear message, exit status 2, nothing written.
source "$(dirname "$0")/lib/common.bash"

tiny_recipe >tiny.toml
expect_exit 2 "no subcommand" -- "$USTRAIN"
expect_exit 2 "unknown subcommand" -- "$USTRAIN" fly
expect_output "'fly' is not a command of ustrain: use one of train, " "lists the commands"
expect_exit 2 "mistyped subcommand" -- "$USTRAIN" trian
expect_output "did you mean 'train'\?" "suggests the nearest command"
expect_exit 2 "mistyped data subcommand" -- "$USTRAIN" data convrt -i x -o y
expect_output "'convrt' is not a command of ustrain data; did you mean 'convert'\?" "suggests the nearest data command"
expect_exit 0 "--help" -- "$USTRAIN" --help
expect_output "train" "help lists train"
expect_output "data \(ZeRO 0-3\), tensor \(with sequence\)" "help describes the parallelism this build runs"
grep -q "many GPUs" "$WORK/out.txt" && fail "help claims many GPUs, which recipes refuse" || pass "help claims no more than recipes accept"
expect_exit 0 "help" -- "$USTRAIN" help
expect_output "Usage: .*ustrain" "ustrain help prints the help"
expect_exit 0 "help of a subcommand" -- "$USTRAIN" help data convert
expect_output "--text-field" "ustrain help data convert prints that command's help"
expect_exit 0 "--version" -- "$USTRAIN" --version
expect_output "^ustrain [0-9]+\.[0-9]+\.[0-9]+" "version printed"
expect_exit 0 "-V" -- "$USTRAIN" -V
expect_output "^ustrain [0-9]+\.[0-9]+\.[0-9]+" "-V prints the version"

expect_exit 2 "missing recipe file" -- "$USTRAIN" train nothere.toml
expect_output "nothere.toml" "names the missing file"

printf '[model]\nd_modle = 64\n' >typo.toml
expect_exit 2 "unknown key" -- "$USTRAIN" train typo.toml
expect_output "typo.toml:2" "names file and line"
expect_output "model.d_model" "suggests the nearest key"

printf '[model\n' >broken.toml
expect_exit 2 "TOML syntax error" -- "$USTRAIN" train broken.toml
expect_output "broken.toml:1" "syntax error names file and line"

expect_exit 2 "wrong type through --set" -- "$USTRAIN" train tiny.toml --set model.n_layers=two --dry-run
expect_output "model.n_layers" "names the key"
expect_exit 2 "malformed --set" -- "$USTRAIN" train tiny.toml --set model.n_layers --dry-run
expect_exit 2 "out-of-range value" -- "$USTRAIN" train tiny.toml --set model.n_layers=0 --dry-run
expect_exit 2 "heads not divisible by kv heads" -- "$USTRAIN" train tiny.toml --set model.n_kv_heads=3 --dry-run
expect_output "n_kv_heads" "names the kv heads"
expect_exit 2 "tensor parallelism over heads it cannot split" -- "$USTRAIN" train tiny.toml --set parallel.tp=3 --dry-run
expect_output "model.n_heads = 4 is not divisible by parallel.tp = 3" "names the heads and tp"
expect_exit 2 "context parallelism over sequences it cannot split" -- "$USTRAIN" train tiny.toml --set parallel.cp=3 --set train.seq_len=32 --dry-run
expect_output "train.seq_len = 32 is not divisible by 2 \* parallel.cp = 6" "names seq_len and 2 cp"
expect_exit 2 "expert parallelism of a dense model" -- "$USTRAIN" train tiny.toml --set parallel.dp=2 --set parallel.ep=2 --dry-run
expect_output "parallel.ep = 2 with a dense model \(model.n_experts = 0\)" "names ep and the dense model"
expect_exit 2 "experts that do not split over ep" -- "$USTRAIN" train tiny.toml --set model.n_experts=6 \
  --set parallel.dp=4 --set parallel.ep=4 --set train.micro_batch=2 --dry-run
expect_output "model.n_experts = 6 does not divide over parallel.ep = 4 ranks" "names the experts and ep"
expect_exit 2 "expert parallelism under tp without sp" -- "$USTRAIN" train tiny.toml --set model.n_experts=4 \
  --set parallel.dp=2 --set parallel.tp=2 --set parallel.ep=2 --set parallel.sp=false --dry-run
expect_output "parallel.ep = 2 with parallel.tp = 2 runs with sequence parallelism only" "names ep, tp and sp"
# A megabyte of input (a command word, a recipe value, a tokenizer's token) is echoed as a short
# line: its first 60 bytes and its length.
short_message() {
  local bytes
  bytes=$(wc -c <"$WORK/out.txt")
  ((bytes < 1500)) && pass "$1: a message of $bytes bytes" || fail "$1: a message of $bytes bytes"
}
long=$(head -c 1048576 /dev/zero | tr '\0' 'x')
expect_exit 2 "a command word of 100 kB" -- "$USTRAIN" "${long:0:100000}"
expect_output "'x{60}\.\.\. \(100000 bytes\)' is not a command of ustrain" "shortened with its length"
short_message "a command word"
expect_exit 2 "an option value of 100 kB" -- "$USTRAIN" plan tiny.toml --gpus 2 --gpu "${long:0:100000}"
short_message "an option value (CLI11's message)"
{ tiny_recipe; printf 'trace_steps = "%s"\n' "$long"; } >long_trace.toml
expect_exit 2 "log.trace_steps of 1 MB" -- "$USTRAIN" train long_trace.toml --dry-run
short_message "log.trace_steps"
recipe=$(tiny_recipe)
printf '%s\n' "${recipe/path = \"data\"/blend = \"$long\"}" >long_blend.toml
expect_exit 2 "data.blend of 1 MB" -- "$USTRAIN" train long_blend.toml --dry-run
expect_output "entry \"x{60}\.\.\. \(1048576 bytes\)\" has no ':WEIGHT'" "names the entry, shortened"
short_message "data.blend"
printf '{"model": {}, "added_tokens": [{"id": "one", "content": "%s"}]}\n' "$long" >long_token.json
mkdir -p text && echo "some text" >text/a.txt
expect_exit 2 "a tokenizer.json token of 1 MB" -- "$USTRAIN" data convert -i text -o long_token -t long_token.json
short_message "a tokenizer token"

expect_exit 2 "missing dataset" -- "$USTRAIN" train tiny.toml
expect_output "data" "names the dataset"
[[ ! -d runs ]] && pass "failed runs write nothing" || fail "a failed run created a run directory"
expect_exit 2 "convert without inputs" -- "$USTRAIN" data convert --input nothing_here --output d
[[ ! -e d ]] && pass "failed convert leaves no dataset" || fail "failed convert left $WORK/d"
finish

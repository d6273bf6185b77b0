# ustrain plan: the table, the options to paste and the launch lines; --json best first with the
# layouts that do not fit last; every layout it proposes is one `train --dry-run` accepts; bad
# input is one message and exit 2.
source "$(dirname "$0")/lib/common.bash"

tiny_recipe >tiny.toml
expect_exit 0 "plan on GPUs" -- "$USTRAIN" plan tiny.toml --gpus 4 --top 3
expect_output "GPU times below are predictions" "says GPU times are predictions"
expect_output "^ +# +dp +tp +pp +cp +ep +zero" "prints the table's header"
expect_output "^  mpirun -n [0-9]+ ustrain train tiny.toml .*--set device.type=cuda" "prints the launch line"

expect_exit 0 "plan --json" -- "$USTRAIN" plan tiny.toml --gpus 4 --memory-gib 1.0006 --json
python3 - "$WORK/out.txt" <<'PY' && pass "JSON: every field, fitting first, best first" || fail "JSON layouts"
import json, sys
layouts = json.load(open(sys.argv[1]))["layouts"]
keys = {"dp", "tp", "pp", "cp", "ep", "zero", "sp", "recompute", "micro_batch", "grad_accum", "pp_schedule",
        "virtual_stages", "memory_bytes", "fits", "step_s", "tokens_per_s", "mfu", "limits"}
assert layouts and all(keys <= set(l) for l in layouts)
assert all(l["dp"] * l["tp"] * l["pp"] * l["cp"] == 4 for l in layouts)
fits = [l["fits"] for l in layouts]
assert fits == sorted(fits, reverse=True) and True in fits and False in fits
timed = [l["tokens_per_s"] for l in layouts if l["fits"]]
assert timed == sorted(timed, reverse=True)
assert all(l["step_s"] is None for l in layouts if not l["fits"])
PY

# The best layout's options, pasted into a dry run, are accepted by the trainer.
make_corpus
"$USTRAIN" data convert -i corpus -o data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert the corpus"
"$USTRAIN" plan tiny.toml --gpus 2 --gpu cpu >"$WORK/plan.txt" 2>&1 || fail "plan --gpu cpu"
sets=$(sed -n '/as options to paste/{n;p}' "$WORK/plan.txt")
[[ -n $sets ]] && pass "prints the options to paste" || fail "no options to paste: $(cat "$WORK/plan.txt")"
# shellcheck disable=SC2086
expect_exit 0 "the best layout's options pass --dry-run" -- "$USTRAIN" train tiny.toml --dry-run $sets

expect_exit 2 "an unknown device" -- "$USTRAIN" plan tiny.toml --gpus 2 --gpu tpu
expect_exit 2 "no --gpus" -- "$USTRAIN" plan tiny.toml
expect_exit 2 "a batch of partial sequences" -- "$USTRAIN" plan tiny.toml --gpus 2 --global-batch-tokens 33
expect_output "not a multiple of train.seq_len = 32" "names the sequence length"
expect_exit 2 "a vocabulary left to the dataset" -- "$USTRAIN" plan tiny.toml --gpus 2 --set model.vocab_size=0
expect_output "model.vocab_size is left to the dataset" "says to set the vocabulary"
echo '{}' >bad.json
expect_exit 2 "a file that is no calibration" -- "$USTRAIN" plan tiny.toml --gpus 2 --calibration bad.json
expect_output "not a calibration file" "says the file is not a calibration"
# Numbers out of any physical range are refused with one message, before a step time could
# come out infinite or NaN.
expect_exit 2 "a peak of 1e308 TFLOP/s" -- "$USTRAIN" plan tiny.toml --gpus 2 --peak-tflops 1e308
expect_output "^error: --peak-tflops 1e\+308 is not plausible: give TFLOP/s per device between 0.001 and 100000" \
  "names the option and its range"
expect_exit 2 "a link of 1e-300 GB/s" -- "$USTRAIN" plan tiny.toml --gpus 2 --intra-node-gbps 1e-300
expect_output "--intra-node-gbps 1e-300 is not plausible" "names the link option"
expect_exit 2 "memory of 1e300 GiB" -- "$USTRAIN" plan tiny.toml --gpus 2 --memory-gib 1e300
expect_output "--memory-gib 1e\+300 is not plausible" "names the memory option"
calibration() {
  printf '{"gemm": [{"flops": 1e9, "flops_per_s": %s}], "attention": [{"flops": 1e9, "flops_per_s": 1e13}],
           "memory_bytes_per_s": %s, "op_overhead_s": 5e-6}\n' "$1" "$2"
}
calibration 1e13 1e12 >good.json
expect_exit 0 "a plausible calibration" -- "$USTRAIN" plan tiny.toml --gpus 2 --calibration good.json
calibration 1e13 1e-300 >slow.json
expect_exit 2 "a calibration bandwidth of 1e-300" -- "$USTRAIN" plan tiny.toml --gpus 2 --calibration slow.json
expect_output "^error: --calibration slow.json: memory_bytes_per_s 1e-300 is not plausible: give bytes/s between" \
  "names the file, the value and the range"
grep -Eiq "inf|nan|best layout" "$WORK/out.txt" && fail "printed a result: $(cat "$WORK/out.txt")" || pass "prints no result"
calibration 1e308 1e12 >fast.json
expect_exit 2 "a calibration rate of 1e308" -- "$USTRAIN" plan tiny.toml --gpus 2 --calibration fast.json
expect_output "\"gemm\" flops_per_s 1e\+308 is not plausible" "names the curve"

# A batch of 2^62 tokens once took forever (every number below it tried as a divisor): it is
# more than the planner takes, said at once. Nor is the suggested batch of an odd one negative.
expect_exit 2 "--global-batch-tokens 2^62" -- timeout 60 "$USTRAIN" plan tiny.toml --gpus 8 \
  --global-batch-tokens 4611686018427387904
expect_output "--global-batch-tokens 4611686018427387904: the planner takes at most 2\^40 = 1099511627776 tokens" \
  "says the planner's bound"
expect_exit 2 "--global-batch-tokens 2^63 - 1" -- timeout 60 "$USTRAIN" plan tiny.toml --gpus 8 \
  --global-batch-tokens 9223372036854775807
grep -q -- "-9223372036854775808" "$WORK/out.txt" && fail "suggests a negative batch: $(cat "$WORK/out.txt")" \
  || pass "suggests no negative batch"
expect_exit 2 "a recipe batch of 2^62 sequences" -- timeout 60 "$USTRAIN" plan tiny.toml --gpus 8 \
  --set train.global_batch=4611686018427387904
expect_output "train.global_batch = 4611686018427387904 makes .* micro-batches per step on each rank" \
  "names the recipe's batch"
expect_exit 0 "2^40 tokens, the largest batch planned, in time" -- timeout 120 "$USTRAIN" plan tiny.toml --gpus 8 \
  --global-batch-tokens 1099511627776
expect_exit 2 "2^40 tokens on one device" -- timeout 120 "$USTRAIN" plan tiny.toml --gpus 1 \
  --global-batch-tokens 1099511627776
expect_output "leaves no layout with micro-batches of at most 2\^24 = 16777216 tokens and at most 16384 of them per step" \
  "says which bounds no layout meets"
# Bounded on any input: more devices than any cluster, and a search of more than a million
# layouts (4096 devices, 64 layers, 2^30 tokens), are refused with one message saying what
# narrows them; that search once held every accepted layout's recipe (gigabytes) and ran for hours.
expect_exit 2 "--gpus 2^21" -- timeout 60 "$USTRAIN" plan tiny.toml --gpus 2097152
expect_output "^error: --gpus 2097152: the planner plans at most 2\^20 = 1048576 devices" "names the device bound"
expect_exit 2 "a search of over a million layouts" -- timeout 300 "$USTRAIN" plan tiny.toml --gpus 4096 \
  --set model.n_layers=64 --global-batch-tokens 1073741824
expect_output "^error: 4096 devices with a global batch of 33554432 sequences make more than 1048576 layouts to try; fix some of the parallel keys" \
  "says which keys narrow the search"
expect_exit 2 "no layout passes the checks" -- "$USTRAIN" plan tiny.toml --gpus 3 --set train.global_batch=8
expect_output "no layout of 3 devices passes the recipe checks" "says no layout passes the checks"
# The parallel keys set by hand fix their dimension; the others are searched. Once --set
# parallel.tp=2 was ignored and every tp was proposed.
expect_exit 0 "--set parallel.tp=2" -- "$USTRAIN" plan tiny.toml --gpus 4 --set parallel.tp=2 --json
python3 - "$WORK/out.txt" <<'PY' && pass "--set parallel.tp=2 keeps only tp = 2" || fail "tp not fixed: $(head -c 300 "$WORK/out.txt")"
import json, sys
layouts = json.load(open(sys.argv[1]))["layouts"]
assert layouts and all(l["tp"] == 2 for l in layouts)
assert len({(l["pp"], l["dp"]) for l in layouts}) > 1  # pp and dp are still searched
PY
{ tiny_recipe; printf '[parallel]\npp = 2\nzero = 1\n'; } >fixed.toml
expect_exit 0 "a recipe's own [parallel] keys" -- "$USTRAIN" plan fixed.toml --gpus 4 --json
python3 - "$WORK/out.txt" <<'PY' && pass "the recipe's pp and zero fix the search" || fail "recipe keys not kept: $(head -c 300 "$WORK/out.txt")"
import json, sys
layouts = json.load(open(sys.argv[1]))["layouts"]
assert layouts and all(l["pp"] == 2 and (l["zero"] == 1 or l["dp"] * l["cp"] == 1) for l in layouts)
assert len({l["tp"] for l in layouts}) > 1  # tp, left unset, is searched
PY
# The recipe file's micro-batch and recompute policy are where a search starts (every recipe
# writes them); given with --set they are kept like the parallel keys.
expect_exit 0 "a recipe's train.micro_batch" -- "$USTRAIN" plan fixed.toml --gpus 4 --json
python3 - "$WORK/out.txt" <<'PY' && pass "the recipe file's micro-batch and recompute are searched" || fail "not searched: $(head -c 300 "$WORK/out.txt")"
import json, sys
layouts = json.load(open(sys.argv[1]))["layouts"]
assert len({l["micro_batch"] for l in layouts}) > 1 and len({l["recompute"] for l in layouts}) > 1
PY
expect_exit 0 "--set train.micro_batch=2 --set train.recompute=full" -- "$USTRAIN" plan tiny.toml --gpus 4 --json \
  --set train.micro_batch=2 --set train.recompute=full
python3 - "$WORK/out.txt" <<'PY' && pass "--set train.micro_batch and train.recompute fix theirs" || fail "train keys not fixed: $(head -c 300 "$WORK/out.txt")"
import json, sys
layouts = json.load(open(sys.argv[1]))["layouts"]
assert layouts and all(l["micro_batch"] == 2 and l["recompute"] == "full" for l in layouts)
assert len({(l["pp"], l["tp"]) for l in layouts}) > 1  # the parallel keys are still searched
PY
expect_exit 2 "a fixed dp no layout has" -- "$USTRAIN" plan tiny.toml --gpus 2 --set train.micro_batch=1 --set parallel.dp=4
expect_output "^error: no layout of 2 devices has parallel.dp = 4 and train.micro_batch = 1, set by hand in the recipe or with --set" \
  "names the keys set by hand and their values"
finish

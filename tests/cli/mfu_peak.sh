# MFU on a CPU divides by a peak measured once per CPU model and thread count and kept in the
# user's cache directory ($XDG_CACHE_HOME/ustrain, else ~/.cache/ustrain): a second run and a
# resume use the kept peak and say when it was measured, --measure-peak measures it again,
# a peak below what a run achieves is called too low, and a run that cannot keep it trains all
# the same.
source "$(dirname "$0")/lib/common.bash"

make_corpus
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
tiny_recipe >tiny.toml
short=(--set train.steps=2 --set train.eval_interval=0 --set checkpoint.interval=1)
kept="$XDG_CACHE_HOME/ustrain/peak_flops.json"
# peak: the GFLOP/s of the last run's "MFU is relative to" line.
peak() { sed -n 's/.*MFU is relative to .*: \([0-9.]*\) GFLOP\/s$/\1/p' out.txt; }

expect_exit 0 "a first run" -- "$USTRAIN" train tiny.toml "${short[@]}"
expect_output "MFU is relative to this CPU's sgemm rate \(1024\^3\) measured now and kept in $kept: [0-9.]+ GFLOP/s" \
  "the first run measures the peak and keeps it"
[[ -s $kept ]] && pass "the peak file exists" || fail "no $kept"
first=$(peak)

expect_exit 0 "a resume" -- "$USTRAIN" train tiny.toml --resume auto --set train.steps=4 --set train.eval_interval=0
expect_output "MFU is relative to this CPU's sgemm rate \(1024\^3\) measured [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z and kept in $kept \(train --measure-peak measures it again\)" \
  "the resume uses the kept peak and says when it was measured"
[[ $(peak) == "$first" ]] && pass "the resume divides by the same peak ($first GFLOP/s)" \
  || fail "the resume's peak $(peak) differs from the first run's $first"

expect_exit 0 "--measure-peak" -- "$USTRAIN" train tiny.toml "${short[@]}" --overwrite --measure-peak
expect_output "measured now and kept in $kept" "--measure-peak measures again"

# Another thread count is another entry (OMP_NUM_THREADS=1 made the runs above one thread's).
expect_exit 0 "two threads" -- "$USTRAIN" train tiny.toml "${short[@]}" --overwrite --set device.threads=2
expect_output "measured now and kept in $kept" "two threads: measured, not taken from one thread's entry"
[[ $(grep -c '"measured_at"' "$kept") -eq 2 ]] && pass "one entry per thread count" \
  || fail "expected 2 entries in $kept: $(cat "$kept")"

# A kept peak too low (measured while the machine was busy): said once, with the way out.
sed -i 's/"flops_per_second": [0-9.e+]*/"flops_per_second": 1000.0/' "$kept"
expect_exit 0 "a kept peak too low" -- "$USTRAIN" train tiny.toml "${short[@]}" --overwrite
expect_output "MFU [0-9]+%: this step ran faster than the peak MFU divides by .*--measure-peak" \
  "a step above the kept peak says the peak is too low"
[[ $(grep -c "ran faster than the peak" out.txt) -eq 1 ]] && pass "said once" \
  || fail "said $(grep -c "ran faster than the peak" out.txt) times"

# Under a sliding window MFU counts attention the window skips, so it may pass 100% with a sound
# peak: the peak is doubted only when the step's work without attention outran it. A 1-layer,
# d_model 32 model at 4096 tokens, whose attention is 83% of its FLOPs, window 16: the kept peak
# set to a third of the rate it achieved puts MFU near 300% and its work without attention near 50%.
mask=(--set train.steps=2 --set train.eval_interval=0 --set train.seq_len=4096 --set model.max_seq_len=4096
      --set train.micro_batch=1 --set train.global_batch=1 --set model.n_layers=1 --set model.sliding_window=16)
expect_exit 0 "a windowed run" -- "$USTRAIN" train tiny.toml "${mask[@]}" --overwrite --measure-peak
rate=$(sed -n 's/.*done: .* | \([0-9.]*\) GFLOP\/s achieved.*/\1/p' out.txt)
sed -i "s/\"flops_per_second\": [0-9.e+]*/\"flops_per_second\": $(awk -v r="$rate" 'BEGIN { print r * 1e9 / 3 }')/" "$kept"
expect_exit 0 "a windowed run above 100% MFU" -- "$USTRAIN" train tiny.toml "${mask[@]}" --overwrite
expect_output "MFU [0-9]{3}\.[0-9]% \(" "its MFU passes 100% ($rate GFLOP/s achieved before)"
! grep -q "ran faster than the peak" out.txt && pass "and the peak is not called too low" \
  || fail "a windowed step above 100% MFU called the peak too low"

# A cache that cannot be written: the run trains with the peak measured now.
touch not-a-directory
XDG_CACHE_HOME="$WORK/not-a-directory" expect_exit 0 "an unwritable cache" -- \
  "$USTRAIN" train tiny.toml "${short[@]}" --overwrite
expect_output "measured now \(not kept: cannot create $WORK/not-a-directory/ustrain" "says the peak was not kept and why"

# Without XDG_CACHE_HOME, ~/.cache/ustrain.
mkdir home
expect_exit 0 "XDG_CACHE_HOME unset" -- env -u XDG_CACHE_HOME HOME="$WORK/home" \
  "$USTRAIN" train tiny.toml "${short[@]}" --overwrite
[[ -s home/.cache/ustrain/peak_flops.json ]] && pass "kept in HOME/.cache/ustrain" || fail "no HOME/.cache/ustrain/peak_flops.json"
finish

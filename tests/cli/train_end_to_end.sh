# ustrain data convert -> train -> generate on a tiny model; loss falls; runs are bit-identical.
source "$(dirname "$0")/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
expect_exit 0 "data convert" -- "$USTRAIN" data convert --input corpus --output data --val-fraction 0.1
expect_output "wrote data" "convert reports what it wrote"
expect_exit 2 "convert refuses to overwrite a dataset" -- "$USTRAIN" data convert --input corpus --output data

expect_exit 0 "train tiny recipe" -- "$USTRAIN" train tiny.toml
expect_output "validation loss" "train logs validation loss"
expect_output "memory plan" "train prints the memory plan"
expect_output "peak resident" "train reports peak resident memory"
[[ -f runs/tiny/checkpoints/latest/manifest.json && -f runs/tiny/recipe.toml && -f runs/tiny/metrics.jsonl ]] \
  && pass "run directory holds a checkpoint, recipe and metrics" || fail "run directory incomplete"
# Every step records the peak memory so far (on the CPU the peak resident set): positive, never
# falling, and at most the peak the closing summary reports.
summary_peak=$(sed -n 's/.*peak resident \([0-9.]*\) \([MG]\)iB.*/\1 \2/p' out.txt)
peaks=$("$PYTHON" - runs/tiny/metrics.jsonl "$summary_peak" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if '"kind":"train"' in line]
peaks = [r.get("peak_memory_bytes") for r in rows]
value, unit = sys.argv[2].split()
summary = float(value) * {"M": 2**20, "G": 2**30}[unit]
ok = (len(peaks) == 30 and all(isinstance(p, int) and p > 0 for p in peaks)
      and peaks == sorted(peaks) and peaks[-1] <= summary * 1.001)
print("ok" if ok else f"peaks {peaks[:3]}...{peaks[-1:]}, summary {summary:.0f} B")
PY
)
[[ $peaks == ok ]] && pass "peak_memory_bytes in every train row, rising to the summary's peak" \
  || fail "peak_memory_bytes: $peaks"

mapfile -t l < <(losses runs/tiny/metrics.jsonl)
if (( ${#l[@]} == 30 )) && awk -v a="${l[0]}" -v b="${l[29]}" 'BEGIN { exit !(b < a - 1.0) }'; then
  pass "loss falls (${l[0]} -> ${l[29]})"
else
  fail "loss did not fall by more than 1 nat over 30 steps: ${l[0]:-?} -> ${l[29]:-?} (${#l[@]} steps logged)"
fi

expect_exit 2 "train refuses to overwrite a finished run" -- "$USTRAIN" train tiny.toml
expect_output "--overwrite" "the refusal says how to proceed"

# Determinism: the same recipe and seed give bit-identical losses.
expect_exit 0 "second identical run" -- "$USTRAIN" train tiny.toml --set run.name=tiny2
if [[ $(losses runs/tiny/metrics.jsonl | wc -l) -eq 30 ]] &&
   cmp -s <(losses runs/tiny/metrics.jsonl) <(losses runs/tiny2/metrics.jsonl); then
  pass "two runs give bit-identical losses"
else
  fail "losses differ between identical runs"
fi

expect_exit 0 "generate" -- "$USTRAIN" generate --run runs/tiny --prompt "the quick" --tokens 40 --temperature 0
expect_output "^the quick" "generate echoes the prompt and continues it"
expect_exit 2 "generate without a run directory" -- "$USTRAIN" generate --run nowhere
expect_output "run directory nowhere does not exist" "generate names the problem"
finish

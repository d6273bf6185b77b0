# Every recipe in recipes/ passes `train --dry-run` on a small corpus (its data path and
# tokenizer replaced); a recipe for H100s plans and fits as written; and a recipe whose header
# names the `ustrain plan` command its layout came from still has the planner's choice: its
# layout, as its own plan predicts it, within 1% of the fastest of that plan made without the
# recipe's [parallel] section (whose keys would confine the search to the recipe's own layout;
# near-ties swap with small changes to the cost model).
source "$(dirname "$0")/lib/common.bash"

# A byte-level corpus whose validation split holds a sequence of 8192 tokens.
make_corpus
"$USTRAIN" data convert -i corpus -o data --val-fraction 0.5 >/dev/null 2>&1 || fail "convert the corpus"

planned=0
for recipe in "$SOURCE_DIR"/recipes/*.toml; do
  name=$(basename "$recipe" .toml)
  expect_exit 0 "$name: dry run" -- "$USTRAIN" train "$recipe" --dry-run \
    --set data.path='"data"' --set data.tokenizer='"auto"'
  expect_output "^parameters: [0-9]+" "$name: prints its parameter count"
  sed -n '/^# resolved recipe/,/^parameters:/p' out.txt | sed '$d' >"$name.resolved.toml"
  # A recipe for a GPU cluster plans on it as written: its own layout (its [parallel] keys fix
  # the search) fits the devices its dimensions multiply to.
  if grep -q -- '--gpu h100' "$recipe"; then
    devices=$("$PYTHON" -c 'import sys, tomllib
p = tomllib.load(open(sys.argv[1], "rb"))["parallel"]
print(p["dp"] * p["tp"] * p["pp"] * p["cp"])' "$name.resolved.toml")
    if "$USTRAIN" plan "$recipe" --gpus "$devices" --gpu h100 --json >"$name.own.json" 2>"$name.own.err" &&
      "$PYTHON" -c 'import json, sys; assert json.load(open(sys.argv[1]))["layouts"][0]["fits"]' "$name.own.json"; then
      pass "$name: its own layout plans and fits $devices H100s"
    else
      fail "$name: its own layout on $devices H100s"; cat "$name.own.err"
    fi
  fi
  # The plan command in the header, e.g. "#   ustrain plan recipes/x.toml --gpus 8 --gpu h100".
  plan=$(sed -n 's/^#   ustrain plan recipes\/[^ ]*\.toml \(--gpus [0-9]* --gpu [a-z0-9]*\)$/\1/p' "$recipe")
  [[ -n $plan ]] || continue
  planned=$((planned + 1))
  # The recipe's [parallel] keys would constrain the search to its own layout: plan without them.
  sed '/^\[parallel\]/,/^\[/{/^\[parallel\]/d;/^\[/!d}' "$recipe" >"$name.free.toml"
  grep -q '^\[parallel\]' "$name.free.toml" && fail "$name: [parallel] left in the free copy"
  # The fastest layout as the table lists it (--top 1 plans only what may be the fastest).
  # shellcheck disable=SC2086
  if ! "$USTRAIN" plan "$name.free.toml" $plan --top 1 >"$name.plan.txt" 2>"$name.plan.err"; then
    fail "$name: plan $plan"; cat "$name.plan.err"; continue
  fi
  # The recipe's own layout among those of its own plan (its [parallel] keys fixed above).
  if "$PYTHON" - "$name.resolved.toml" "$name.own.json" "$name.plan.txt" >check.txt 2>&1 <<'PY'
import json, re, sys, tomllib
r = tomllib.load(open(sys.argv[1], "rb"))
p, t = r["parallel"], r["train"]
layouts = json.load(open(sys.argv[2]))["layouts"]
# The table's first row: "  1   64 ... 407488 51.3%  memory 93%": tokens/s precedes the MFU.
text = open(sys.argv[3]).read().splitlines()
row = text[next(i for i, line in enumerate(text) if re.match(r"^ +# +dp +tp", line)) + 1].split()
mfu = next(i for i, word in enumerate(row) if word.endswith("%"))
best = {"tokens_per_s": float(row[mfu - 1]), "row": " ".join(row)}
def same(l):
    keys = [l[k] == p[k] for k in ("dp", "tp", "pp", "cp", "ep", "zero")]
    keys.append(l["dp_shard"] == (p.get("dp_shard", 0) or p["dp"]))  # 0: all of dp
    keys += [l["micro_batch"] == t["micro_batch"], l["recompute"] == t["recompute"]]
    if p["tp"] > 1: keys.append(l["sp"] == p["sp"])
    if p["pp"] > 1: keys += [l["pp_schedule"] == p["pp_schedule"], l["virtual_stages"] == p["virtual_stages"]]
    return all(keys)
mine = [l for l in layouts if l["fits"] and same(l)]
print("best:", best["row"])
assert mine, "the recipe's layout is not among the layouts that fit"
print("recipe's:", mine[0]["tokens_per_s"], "tokens/s, best:", best["tokens_per_s"])
assert mine[0]["tokens_per_s"] >= 0.99 * best["tokens_per_s"], "a faster layout exists: re-plan"
PY
  then pass "$name: its layout is the planner's choice ($plan)"
  else fail "$name: layout against \`ustrain plan $plan\`"; cat check.txt
  fi
done
((planned >= 3)) && pass "$planned recipes name the plan of their layout" || fail "only $planned recipes name a plan"
finish

# The planner's answers stay what they were when it recorded and planned every layout by
# itself, before it shared recordings, pipeline programs and rank plans between layouts: the
# --json figures of every layout (memory, step time and its parts, limits, order) and the text
# of --top 3, for a dense model on 4 GPUs (pp 1, 2 and 4) and a mixture of experts (ep 1, 2 and
# 4). The expected files are in tests/plan/golden/; a change that means to change the
# planner's answers regenerates them (UPDATE_GOLDEN=1 bash tests/cli/plan_unchanged.sh
# build/app/ustrain . writes what the binary answers) and says why.
source "$(dirname "$0")/lib/common.bash"
golden="$SOURCE_DIR/tests/plan/golden"

tiny_recipe | sed 's/^n_layers = 2/n_layers = 4/' >tiny4.toml
tiny_recipe | sed 's/^n_layers = 2/n_layers = 4/; s/^ffn_hidden = 64/ffn_hidden = 64\nn_experts = 4\nexperts_per_token = 2\nexpert_ffn_hidden = 32/' >tinymoe.toml
cat >compact.py <<'PY'
import json, sys
d = json.load(sys.stdin)
cols = ["dp", "tp", "pp", "cp", "ep", "zero", "sp", "recompute", "micro_batch", "grad_accum", "pp_schedule",
        "virtual_stages", "fits", "memory_bytes", "rank_memory_bytes", "step_s", "bubble_s", "dp_s", "tp_s", "ep_s", "mfu", "limits"]
print("\t".join(cols))
for l in d["layouts"]:
    print("\t".join(repr(l.get(c)) for c in cols))
PY

same_as() {  # same_as GOLDEN DESCRIPTION: the file got.txt equals the golden one
  if [[ ${UPDATE_GOLDEN:-0} == 1 ]]; then cp got.txt "$golden/$1" && pass "$2: written to $1"; return; fi
  if diff "$golden/$1" got.txt >diff.txt; then pass "$2"; else fail "$2 differs from $1:"; head -20 diff.txt; fi
}
"$USTRAIN" plan tiny4.toml --gpus 4 --set parallel.zero=1 --json 2>/dev/null | $PYTHON compact.py >got.txt
same_as tiny-4gpu-zero1.tsv "dense, 4 GPUs: every layout's figures"
"$USTRAIN" plan tinymoe.toml --gpus 4 --set parallel.zero=0 --set parallel.pp=1 --json 2>/dev/null | $PYTHON compact.py >got.txt
same_as tiny-moe-4gpu.tsv "MoE, 4 GPUs: every layout's figures"
"$USTRAIN" plan tiny4.toml --gpus 4 --set parallel.zero=1 --top 3 2>/dev/null >got.txt
same_as tiny-4gpu-zero1-top3.txt "dense, 4 GPUs: --top 3"
finish

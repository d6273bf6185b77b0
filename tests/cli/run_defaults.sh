# Defaults the tool works out: a recipe with only [data] path trains (vocabulary and tokenizer
# from the dataset's manifest), parallel.dp from the processes launched, a warm-up longer than
# the run is shortened with a warning, and --dry-run checks the data without training.
source "$(dirname "$0")/lib/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
mpi() { local n=$1; shift; timeout 300 mpiexec -n "$n" --oversubscribe --allow-run-as-root "$@"; }
value() { sed -n "s/^$2 = \([^ ]*\).*/\1/p" "$1"; }  # value FILE KEY: a key's value in a resolved recipe

make_corpus
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "convert"
printf '[data]\npath = "data"\n' >minimal.toml
small=(--set model.d_model=32 --set model.n_layers=1 --set model.n_heads=2 --set model.n_kv_heads=2
       --set model.ffn_hidden=32 --set train.seq_len=32 --set model.max_seq_len=32 --set train.eval_interval=0)

# Only [data] path, with the default model: two steps of it.
expect_exit 0 "a recipe with only [data] path trains" -- "$USTRAIN" train minimal.toml --set train.steps=2
expect_output "model.vocab_size = 257: the dataset's vocabulary" "the log says where the vocabulary came from"
expect_output 'data.tokenizer = "byte": the dataset' "the log says where the tokenizer came from"
[[ $(value runs/run/recipe.toml vocab_size) == 257 && $(value runs/run/recipe.toml tokenizer) == '"byte"' &&
   $(value runs/run/recipe.toml dp) == 1 ]] && pass "the run's recipe holds the resolved values" \
  || fail "resolved recipe: $(grep -E '^(vocab_size|tokenizer|dp) ' runs/run/recipe.toml | tr '\n' ' ')"
expect_exit 0 "and resumes with the same recipe, nothing changed" -- "$USTRAIN" train minimal.toml \
  --set train.steps=3 --resume auto
grep -q "recipe change since the checkpoint: model.vocab_size\|recipe change since the checkpoint: data.tokenizer" \
  out.txt && fail "the resolved keys were reported as changes" || pass "no change of the resolved keys is reported"

# What the recipe sets must agree with the dataset.
expect_exit 2 "a vocabulary smaller than the dataset's" -- "$USTRAIN" train minimal.toml --set model.vocab_size=200 \
  --set run.name=small-vocab
expect_output "vocabulary of 257 tokens but model.vocab_size = 200" "names both sizes"
expect_exit 2 "another tokenizer kind" -- "$USTRAIN" train minimal.toml --set data.tokenizer=sentencepiece \
  --set run.name=other-tok
expect_output 'set data.tokenizer = "byte"' "says which tokenizer the data has"
[[ ! -d runs/small-vocab && ! -d runs/other-tok ]] && pass "refused runs write nothing" || fail "a refused run wrote"

# A warm-up longer than the run (a smoke test of a long recipe) is shortened, with a warning.
expect_exit 0 "warmup_steps > train.steps" -- "$USTRAIN" train minimal.toml "${small[@]}" --set train.steps=2 \
  --set schedule.warmup_steps=50 --set run.name=smoke
expect_output "warning schedule.warmup_steps = 50 is more than train.steps = 2: warming up over all 2 steps" \
  "warns and says what it does instead"
lr2=$(sed -n 's/.*"kind":"train","step":2,.*"lr":\([-0-9.e+]*\).*/\1/p' runs/smoke/metrics.jsonl)
[[ $lr2 == 0.0003 ]] && pass "the last step reaches optim.lr" || fail "lr at step 2 is $lr2"

# --dry-run checks the data: it must exist and match the recipe; nothing is trained or written.
expect_exit 0 "dry run of the minimal recipe" -- "$USTRAIN" train minimal.toml --dry-run --set run.name=dry
expect_output "^vocab_size = 257" "prints the vocabulary from the dataset"
expect_output '^# data: 1 dataset tokenized with byte \(vocab 257, eos 256\): [0-9]+ training and [0-9]+ validation tokens' \
  "prints what the dataset holds"
expect_exit 2 "dry run of a missing dataset" -- "$USTRAIN" train minimal.toml --dry-run --set data.path=nodata
expect_output "nodata" "names the missing dataset"
expect_exit 2 "dry run of mismatching data" -- "$USTRAIN" train minimal.toml --dry-run --set model.vocab_size=100 \
  --set data.tokenizer=external
expect_output 'tokenized with byte' "names the dataset's tokenizer"
expect_exit 2 "dry run of sequences longer than the data" -- "$USTRAIN" train minimal.toml --dry-run \
  --set train.seq_len=100000 --set model.max_seq_len=100000
expect_output "fewer than one sequence of 100000" "says the data is too short"
[[ ! -d runs/dry ]] && pass "dry runs write nothing" || fail "a dry run created runs/dry"

# parallel.dp unset: the processes launched divided by the other dimensions.
expect_exit 0 "two processes, dp unset" -- mpi 2 "$USTRAIN" train minimal.toml "${small[@]}" --set train.steps=2 \
  --set train.micro_batch=4 --set run.name=mpi-dp
[[ $(value runs/mpi-dp/recipe.toml dp) == 2 ]] && pass "dp is 2" || fail "dp is $(value runs/mpi-dp/recipe.toml dp)"
expect_output "parallel.dp = 2: 2 processes launched, divided by tp \* pp \* cp = 1" "the log says so"
expect_exit 0 "two processes at tp = 2, dp unset" -- mpi 2 "$USTRAIN" train minimal.toml "${small[@]}" \
  --set train.steps=2 --set parallel.tp=2 --set run.name=mpi-tp
[[ $(value runs/mpi-tp/recipe.toml dp) == 1 ]] && pass "dp is 1" || fail "dp is $(value runs/mpi-tp/recipe.toml dp)"
expect_exit 2 "three processes at tp = 2, dp unset" -- mpi 3 "$USTRAIN" train minimal.toml "${small[@]}" \
  --set parallel.tp=2 --set run.name=mpi-bad
expect_output "parallel.dp is unset, so it is the processes launched divided by tp \* pp \* cp = 2 \* 1 \* 1 = 2, but mpirun started 3 processes" \
  "says what to launch"
expect_exit 2 "two processes at tp = 2 and pp = 2, dp unset" -- mpi 2 "$USTRAIN" train minimal.toml "${small[@]}" \
  --set parallel.tp=2 --set parallel.pp=2 --set model.n_layers=2 --set run.name=mpi-bad
expect_output "divided by tp \* pp \* cp = 2 \* 2 \* 1, but mpirun started 2 processes, fewer than that product; lower parallel.tp" \
  "says the other dimensions need more processes than were launched"
expect_exit 2 "a set dp that disagrees with the launch" -- mpi 2 "$USTRAIN" train minimal.toml "${small[@]}" \
  --set parallel.dp=1 --set run.name=mpi-set
expect_output "needs 1 processes but 2 were launched" "stays an error"
[[ ! -d runs/mpi-bad && ! -d runs/mpi-set ]] && pass "refused launches write nothing" || fail "a refused launch wrote"
finish

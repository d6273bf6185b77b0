# The recipes of published models: each one's [model] is what `ckpt inspect` derives from the
# model's published config.json (tests/data/hf-configs/, architecture fields only), key by key,
# and its parameter count is the published one. Inspect reads a model directory, so each
# config.json gets a safetensors file of no tensors beside it.
source "$(dirname "$0")/lib/common.bash"

# A byte-level corpus whose validation split holds a sequence of 8192 tokens.
make_corpus
"$USTRAIN" data convert -i corpus -o data --val-fraction 0.5 >/dev/null 2>&1 || fail "convert the corpus"

# The model keys inspect prints, without the training choices (initialisation and balancing).
model_keys() {
  sed -n '/^\[model\]/,/^$/p' | sed -n 's/^\([a-z_0-9]*\) = \([^ ]*\).*/\1 = \2/p' |
    grep -Ev '^(init_std|router_z_loss|router_seq_aux_loss|router_bias_update_rate) '
}

# recipe, config directory, published parameter count
while read -r recipe config params; do
  mkdir -p "hf/$config"
  cp "$SOURCE_DIR/tests/data/hf-configs/$config/config.json" "hf/$config/"
  printf '\x08\0\0\0\0\0\0\0{}      ' >"hf/$config/model.safetensors"
  if ! "$USTRAIN" ckpt inspect "hf/$config" >inspect.txt 2>&1; then
    fail "inspect $config"; cat inspect.txt; continue
  fi
  model_keys <inspect.txt >from_config.txt
  [[ $(wc -l <from_config.txt) -ge 20 ]] || { fail "$config: inspect printed no [model] section"; cat inspect.txt; }
  expect_exit 0 "$recipe: dry run" -- "$USTRAIN" train "$SOURCE_DIR/recipes/$recipe.toml" --dry-run \
    --set data.path='"data"' --set data.tokenizer='"auto"'
  model_keys <out.txt >from_recipe.txt
  if diff from_config.txt from_recipe.txt >diff.txt; then
    pass "$recipe: [model] is what $config/config.json gives"
  else
    fail "$recipe: [model] differs from $config/config.json (< config, > recipe)"; cat diff.txt
  fi
  expect_output "^parameters: $params " "$recipe: $params parameters, as published"
done <<'LIST'
llama3.2-1b llama-3.2-1b 1235814400
llama3.2-3b llama-3.2-3b 3212749824
llama3.1-8b llama-3.1-8b 8030261248
llama3.1-70b llama-3.1-70b 70553706496
mixtral-8x7b mixtral-8x7b 46702792704
LIST
finish

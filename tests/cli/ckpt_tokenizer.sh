# Checkpoints keep their tokenizer: generate works after the dataset is moved, a damaged
# tokenizer is reported, older checkpoints fall back to their dataset; Hugging Face exports
# carry the token ids and, for sentencepiece, tokenizer files in the published formats; import
# needs no dataset and export -> import -> export stays byte-identical.
source "$(dirname "$0")/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
short=(--set train.steps=6 --set schedule.warmup_steps=2 --set train.eval_interval=3)
"$USTRAIN" data convert -i corpus -o data --val-fraction 0.1 >/dev/null 2>&1 || fail "byte convert"
"$USTRAIN" data tokenizer train -i corpus -o tok.model --vocab-size 300 >/dev/null 2>&1 || fail "tokenizer train"
"$USTRAIN" data convert -i corpus -o sp -t tok.model --val-fraction 0.1 >/dev/null 2>&1 || fail "sentencepiece convert"
sp=(--set data.path=sp --set data.tokenizer=sentencepiece --set model.vocab_size=300)

# ---- the byte tokenizer: nothing to copy, its identity is kept ----
expect_exit 0 "train on byte data" -- "$USTRAIN" train tiny.toml "${short[@]}"
expect_exit 0 "inspect the checkpoint" -- "$USTRAIN" ckpt inspect runs/tiny
expect_output "tokenizer: byte \(vocab 257, eos 256\)" "the manifest names the tokenizer"
mv data data-moved
expect_exit 0 "generate after the dataset moved" -- "$USTRAIN" generate --run runs/tiny --prompt "the" --tokens 5
mv data-moved data

# ---- sentencepiece: the model travels in the checkpoint ----
expect_exit 0 "train on sentencepiece data" -- "$USTRAIN" train tiny.toml "${short[@]}" "${sp[@]}" --set run.name=sp
ckpt=runs/sp/checkpoints/latest
cmp -s "$ckpt/tokenizer.model" sp/tokenizer.model && pass "the checkpoint holds the dataset's tokenizer.model" \
  || fail "no tokenizer.model in the checkpoint: $(ls "$ckpt")"
expect_exit 0 "generate with the dataset present" -- "$USTRAIN" generate --run runs/sp --prompt "the quick" --tokens 6 \
  --temperature 0
with_dataset=$(cat "$WORK/out.txt")
mv sp sp-moved
expect_exit 0 "generate after the dataset moved" -- "$USTRAIN" generate --run runs/sp --prompt "the quick" --tokens 6 \
  --temperature 0
[[ $(cat "$WORK/out.txt") == "$with_dataset" ]] && pass "the same text without the dataset" \
  || fail "text differs: '$(cat "$WORK/out.txt")' vs '$with_dataset'"
expect_exit 0 "eval on the dataset's new place" -- "$USTRAIN" eval tiny.toml "${sp[@]}" --set data.path=sp-moved \
  --checkpoint runs/sp
expect_exit 2 "eval on data of another tokenizer" -- "$USTRAIN" eval tiny.toml --checkpoint runs/sp \
  --set model.vocab_size=300
expect_output "dataset data was tokenized with byte.*trained with sentencepiece" "names both tokenizers"

cp -r "$(realpath $ckpt)" damaged
printf '\x5a' | dd of=damaged/tokenizer.model bs=1 seek=100 conv=notrunc status=none
expect_exit 2 "generate with a damaged tokenizer" -- "$USTRAIN" generate --checkpoint damaged --prompt "the"
expect_output "damaged/tokenizer.model fails its checksum" "names the damaged file"
rm damaged/tokenizer.model
expect_exit 2 "generate with the tokenizer missing" -- "$USTRAIN" generate --checkpoint damaged --prompt "the"
expect_output "lacks its tokenizer model .*damaged/tokenizer.model" "names the missing file"

# A checkpoint written before checkpoints kept their tokenizer: no "tokenizer" in its manifest
# (nor the manifest's own checksum, which came later still, with format version 2).
cp -r "$(realpath $ckpt)" older
rm older/tokenizer.model
$PYTHON - older/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
del m["tokenizer"]
del m["manifest_crc32"]
m["format_version"] = 1
json.dump(m, open(sys.argv[1], "w"), indent=1)
PY
expect_exit 2 "an older checkpoint whose dataset moved" -- "$USTRAIN" generate --checkpoint older --prompt "the"
expect_output "written before checkpoints kept their tokenizer.*put the dataset back at sp" "says to restore the dataset"
mv sp-moved sp
expect_exit 0 "an older checkpoint finds its dataset's tokenizer" -- "$USTRAIN" generate --checkpoint older \
  --prompt "the quick" --tokens 6 --temperature 0
expect_output "older/manifest.json has no manifest_crc32 .*cannot be detected" "warns that it has no checksum"
[[ $(grep -v "has no manifest_crc32" "$WORK/out.txt") == "$with_dataset" ]] && pass "the older checkpoint samples the same text" \
  || fail "older checkpoint text differs"

# ---- Hugging Face export: token ids and tokenizer files ----
expect_exit 0 "export the sentencepiece model" -- "$USTRAIN" ckpt export runs/sp hfsp
expect_output "tokenizer: sentencepiece .*wrote tokenizer.model, tokenizer_config.json, special_tokens_map.json" \
  "export names the tokenizer files"
$PYTHON "$SOURCE_DIR/tests/cli/lib/check_hf_tokenizer.py" hfsp tok.model >check.txt 2>&1 \
  && pass "the tokenizer files follow the published formats" || { fail "tokenizer files"; cat check.txt; }
cat >model-only.toml <<'TOML'
[model]
vocab_size = 300
d_model = 32
n_layers = 2
n_heads = 4
n_kv_heads = 2
ffn_hidden = 64
max_seq_len = 32
TOML
rm -rf sp-gone && mv sp sp-gone
expect_exit 0 "import with a recipe that names no dataset" -- "$USTRAIN" ckpt import hfsp imported --recipe model-only.toml
expect_output "tokenizer: sentencepiece .* from hfsp/tokenizer.model" "import keeps the tokenizer beside the weights"
expect_exit 0 "generate from the import" -- "$USTRAIN" generate --checkpoint imported --prompt "the quick" --tokens 6 \
  --temperature 0
[[ $(cat "$WORK/out.txt") == "$with_dataset" ]] && pass "the import samples the same text" \
  || fail "imported text differs: '$(cat "$WORK/out.txt")'"
expect_exit 0 "export the import" -- "$USTRAIN" ckpt export imported hfsp2
same=1
for f in model.safetensors config.json generation_config.json tokenizer.model tokenizer_config.json special_tokens_map.json; do
  cmp -s "hfsp/$f" "hfsp2/$f" || { same=0; echo "differs: $f"; }
done
((same)) && pass "export -> import -> export is byte-identical, tokenizer files included" || fail "the round trip changed files"

expect_exit 0 "export the byte model" -- "$USTRAIN" ckpt export runs/tiny hfbyte
[[ ! -e hfbyte/tokenizer.model && ! -e hfbyte/tokenizer_config.json ]] && pass "no tokenizer files for the byte tokenizer" \
  || fail "byte export wrote tokenizer files"
grep -q '"eos_token_id": 256' hfbyte/config.json && grep -q '"pad_token_id": 256' hfbyte/generation_config.json \
  && pass "byte ids in config.json and generation_config.json" || fail "byte ids missing"
sed 's/vocab_size = 300/vocab_size = 257/' model-only.toml >byte-model.toml
expect_exit 0 "import the byte model without a dataset" -- "$USTRAIN" ckpt import hfbyte importedbyte --recipe byte-model.toml
expect_output "tokenizer: byte .*eos_token_id 256" "recognises the byte tokenizer by its EOS"
expect_exit 0 "export it again" -- "$USTRAIN" ckpt export importedbyte hfbyte2
cmp -s hfbyte/config.json hfbyte2/config.json && cmp -s hfbyte/model.safetensors hfbyte2/model.safetensors \
  && cmp -s hfbyte/generation_config.json hfbyte2/generation_config.json \
  && pass "byte export -> import -> export is byte-identical" || fail "the byte round trip changed files"

rm hfbyte/config.json
expect_exit 0 "import weights with neither tokenizer nor config" -- "$USTRAIN" ckpt import hfbyte unknown --recipe byte-model.toml
expect_output "tokenizer: unknown \(external ids\)" "says the tokenizer is not known"
expect_exit 2 "generate refuses a model without a tokenizer" -- "$USTRAIN" generate --checkpoint unknown --prompt "the"
expect_output "not one ustrain reads.*--tokenizer" "says how to give it one"
expect_exit 0 "name the tokenizer on import" -- "$USTRAIN" ckpt import hfbyte named --recipe byte-model.toml --tokenizer byte
expect_exit 0 "then generate works" -- "$USTRAIN" generate --checkpoint named --prompt "the" --tokens 3
expect_exit 2 "a tokenizer larger than the model" -- "$USTRAIN" ckpt import hfbyte big --recipe byte-model.toml \
  --tokenizer tok.model
expect_output "has 300 ids but the model's vocabulary only 257" "says why"
[[ ! -e big ]] && pass "a refused import leaves nothing" || fail "a refused import left big/"
finish

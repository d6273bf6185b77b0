# Hugging Face tokenizer.json and tiktoken rank files end to end: data convert stores the
# tokenizer in the dataset, training keeps it in the checkpoint, generate uses it, ckpt export
# writes tokenizer.json and tokenizer_config.json, ckpt import picks them up, and export ->
# import -> export is byte-identical. Refusals name what is wrong; sentencepiece's own
# trainer flags are answered with ours.
source "$(dirname "$0")/lib/common.bash"

make_corpus
# A byte-level BPE tokenizer.json: the 256 bytes, "th" 256, "the" 257, "Ġt" 258, "Ġth" 259,
# "Ġthe" 260 (Ġ is the space) by their merges, and the special <|endoftext|> 261.
mkdir -p tok
$PYTHON - tok <<'PY'
import json, sys
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return dict(zip(bs, map(chr, cs)))
chars = bytes_to_unicode()
vocab = {chars[b]: b for b in range(256)}
vocab.update({"th": 256, "the": 257, "\u0120t": 258, "\u0120th": 259, "\u0120the": 260})
merges = [["t", "h"], ["th", "e"], ["\u0120", "t"], ["\u0120t", "h"], ["\u0120th", "e"]]
j = {"version": "1.0", "truncation": None, "padding": None,
     "added_tokens": [{"id": 261, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                       "rstrip": False, "normalized": False, "special": True}],
     "normalizer": None,
     "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
     "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
     "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
     "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
               "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": merges}}
json.dump(j, open(sys.argv[1] + "/tokenizer.json", "w"))
json.dump({"eos_token": "<|endoftext|>", "tokenizer_class": "GPT2Tokenizer"}, open(sys.argv[1] + "/tokenizer_config.json", "w"))
j["normalizer"] = {"type": "NFKC"}
json.dump(j, open(sys.argv[1] + "/nfkc.json", "w"))
PY

expect_exit 0 "convert with a tokenizer.json" -- "$USTRAIN" data convert -i corpus -o hf -t tok/tokenizer.json --val-fraction 0.1
expect_output "tokenizer huggingface \(vocab 262, eos 261, model tokenizer.json crc32:" "the summary names it"
cmp -s tok/tokenizer.json hf/tokenizer.json && pass "the dataset holds the tokenizer.json as it came" \
  || fail "hf/tokenizer.json differs"
expect_exit 0 "inspect decodes the dataset" -- "$USTRAIN" data inspect hf --samples 3 --sample-tokens 60
expect_output "(quick|brown|jumps|over|lazy|while|morning|birds) " "decoded text appears"
expect_exit 2 "a tokenizer.json with a feature ustrain lacks" -- "$USTRAIN" data convert -i corpus -o nope -t tok/nfkc.json
expect_output "tok/nfkc.json: normalizer 'NFKC' .*not supported" "names the feature"
[[ ! -e nope ]] && pass "nothing written" || fail "a refused conversion wrote nope/"

tiny_recipe >tiny.toml
short=(--set train.steps=6 --set schedule.warmup_steps=2 --set train.eval_interval=3)
hf=(--set data.path=hf --set data.tokenizer=huggingface --set model.vocab_size=262)
expect_exit 0 "train on tokenizer.json data" -- "$USTRAIN" train tiny.toml "${short[@]}" "${hf[@]}" --set run.name=hf
ckpt=runs/hf/checkpoints/latest
cmp -s "$ckpt/tokenizer.json" tok/tokenizer.json && pass "the checkpoint keeps the tokenizer.json" \
  || fail "no tokenizer.json in the checkpoint: $(ls "$ckpt")"
mv hf hf-moved
expect_exit 0 "generate without the dataset" -- "$USTRAIN" generate --run runs/hf --prompt "the quick" --tokens 6 --temperature 0
sampled=$(cat "$WORK/out.txt")
[[ $sampled == "the quick"* ]] && pass "the text continues the prompt" || fail "generate printed '$sampled'"

expect_exit 0 "export" -- "$USTRAIN" ckpt export runs/hf hfout
expect_output "wrote tokenizer.json, tokenizer_config.json" "export names the tokenizer files"
cmp -s hfout/tokenizer.json tok/tokenizer.json && pass "the exported tokenizer.json is the original" || fail "tokenizer.json differs"
$PYTHON - hfout <<'PY' && pass "tokenizer_config.json and generation_config.json name <|endoftext|> 261" || fail "config files"
import json, sys
config = json.load(open(sys.argv[1] + "/tokenizer_config.json"))
generation = json.load(open(sys.argv[1] + "/generation_config.json"))
assert config["tokenizer_class"] == "PreTrainedTokenizerFast", config
assert config["eos_token"] == "<|endoftext|>" and config["added_tokens_decoder"]["261"]["special"], config
assert generation["eos_token_id"] == 261, generation
PY
sed 's/vocab_size = 257/vocab_size = 262/' tiny.toml | sed '/^\[data\]/,/^path/d' >model-only.toml
expect_exit 0 "import picks up the tokenizer.json" -- "$USTRAIN" ckpt import hfout imported --recipe model-only.toml
expect_output "tokenizer: huggingface .* from hfout/tokenizer.json" "says where the tokenizer came from"
expect_exit 0 "generate from the import" -- "$USTRAIN" generate --checkpoint imported --prompt "the quick" --tokens 6 --temperature 0
[[ $(cat "$WORK/out.txt") == "$sampled" ]] && pass "the import samples the same text" || fail "import text differs"
expect_exit 0 "export the import" -- "$USTRAIN" ckpt export imported hfout2
same=1
for f in model.safetensors config.json generation_config.json tokenizer.json tokenizer_config.json; do
  cmp -s "hfout/$f" "hfout2/$f" || { same=0; echo "differs: $f"; }
done
((same)) && pass "export -> import -> export is byte-identical, tokenizer files included" || fail "round trip changed files"

# ---- tiktoken: the 256 bytes ranked, "th" 256, "the" 257; <|endoftext|> 258 ----
$PYTHON - <<'PY'
import base64
with open("tiny.tiktoken", "w") as f:
    for rank, token in enumerate([bytes([b]) for b in range(256)] + [b"th", b"the"]):
        f.write(base64.b64encode(token).decode() + " " + str(rank) + "\n")
PY
expect_exit 2 "a tiktoken file needs its pattern" -- "$USTRAIN" data convert -i corpus -o tk -t tiny.tiktoken
expect_output "--tiktoken-pattern" "says which option"
expect_exit 0 "convert with a tiktoken file" -- "$USTRAIN" data convert -i corpus -o tk -t tiny.tiktoken \
  --tiktoken-pattern "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|\\s+" --tiktoken-special "<|endoftext|>=258"
expect_output "tokenizer huggingface \(vocab 259, eos 258" "stored as a tokenizer.json with its EOS"
[[ -s tk/tokenizer.json ]] && pass "the dataset holds the converted tokenizer.json" || fail "no tk/tokenizer.json"

# ---- sentencepiece's flag names ----
expect_exit 2 "spm_train's --vocab_size" -- "$USTRAIN" data tokenizer train -i corpus -o x.model --vocab_size 300
expect_output "--vocab_size is sentencepiece's spm_train flag.*use --vocab-size" "translates it"
expect_exit 2 "spm_train's --model_prefix" -- "$USTRAIN" data tokenizer train -i corpus --model_prefix=x
expect_output "use --output PREFIX.model" "translates it"
expect_exit 2 "spm_train's comma-separated --input" -- "$USTRAIN" data tokenizer train --input=corpus/a.txt,corpus/a.txt -o x.model
expect_output "separate them by spaces" "explains the list"
finish

# ustrain data convert where a new user trips: a Qwen tokenizer's documents end with
# <|endoftext|>, not the chat-turn <|im_end|> its tokenizer_config.json names (--eos-token and
# --eos-id choose another); `gzip -k`'s copy beside its file is read once; text beside JSONL
# is refused the same way in a directory as on the command line.
source "$(dirname "$0")/lib/common.bash"

# A Qwen-like byte-level tokenizer.json: the 256 bytes, <|endoftext|> 256, <|im_start|> 257,
# <|im_end|> 258; its tokenizer_config.json names <|im_end|> as EOS, as Qwen's chat models' do.
mkdir -p qwen
$PYTHON - qwen <<'PY'
import json, sys
bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
cs = bs[:]
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + len(cs) - 188)
vocab = {chr(c): b for b, c in zip(bs, cs)}
special = lambda i, c: {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                        "normalized": False, "special": True}
j = {"added_tokens": [special(256, "<|endoftext|>"), special(257, "<|im_start|>"), special(258, "<|im_end|>")],
     "normalizer": None, "decoder": {"type": "ByteLevel"},
     "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
     "model": {"type": "BPE", "vocab": vocab, "merges": [], "unk_token": None}}
json.dump(j, open(sys.argv[1] + "/tokenizer.json", "w"))
json.dump({"eos_token": "<|im_end|>"}, open(sys.argv[1] + "/tokenizer_config.json", "w"))
PY
printf 'one\n\ntwo\n' >a.txt
expect_exit 0 "convert with a Qwen-like tokenizer" -- "$USTRAIN" data convert -i a.txt -o q -t qwen/tokenizer.json
expect_output "tokenizer huggingface \(vocab 259, eos 256," "documents end with <|endoftext|>"
expect_output "documents end with <\|endoftext\|> \(id 256\), not <\|im_end\|>.*ends a chat turn" "and it says why"
expect_exit 0 "--eos-token names the chat token" -- \
  "$USTRAIN" data convert -i a.txt -o q2 -t qwen/tokenizer.json --eos-token '<|im_end|>'
expect_output "eos 258," "the dataset ends documents with it"
expect_exit 0 "--eos-id is accepted for text" -- "$USTRAIN" data convert -i a.txt -o q3 -t qwen/tokenizer.json --eos-id 257
expect_output "eos 257," "the dataset ends documents with that id"
expect_exit 2 "a token the tokenizer lacks" -- "$USTRAIN" data convert -i a.txt -o q4 -t qwen/tokenizer.json --eos-token '<|eot_id|>'
expect_output "--eos-token <\|eot_id\|> is not a token of qwen/tokenizer.json" "names the token and the file"
[[ ! -e q4 ]] && pass "nothing written" || fail "a refused conversion wrote q4/"

# `gzip -k` leaves the file beside its compressed copy: one is read.
mkdir -p kept
printf '{"text": "a b"}\n{"text": "c"}\n' >kept/a.jsonl
gzip -k kept/a.jsonl
expect_exit 0 "a directory with a.jsonl and a.jsonl.gz" -- "$USTRAIN" data convert -i kept -o kept-data --val-fraction 0
expect_output "wrote kept-data: 2 documents" "each document once"
expect_output "kept/a.jsonl.gz \(the same content as kept/a.jsonl, decompressed\)" "names both files"

# Text beside JSONL: one refusal, in a directory as on the command line, with the way out.
mkdir -p mixed
cp kept/a.jsonl mixed/ && printf 'plain text\n' >mixed/b.txt
fix="--include '\*\.jsonl\*' reads only the JSONL files"
expect_exit 2 "a directory of text and JSONL" -- "$USTRAIN" data convert -i mixed -o mixed-data
expect_output "mixed holds 1 .jsonl file \(e.g. mixed/a.jsonl\) and text files \(e.g. mixed/b.txt\).*$fix" "says how to fix it"
expect_exit 2 "the same files named" -- "$USTRAIN" data convert -i mixed/a.jsonl -i mixed/b.txt -o mixed-data
expect_output "$fix" "the same way out"
expect_exit 0 "the way out" -- "$USTRAIN" data convert -i mixed -o mixed-data --include '*.jsonl*' --val-fraction 0
expect_output "wrote mixed-data: 2 documents" "reads the JSONL"
finish

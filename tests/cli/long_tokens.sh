# A megabyte-long token or regex (30 kB where PCRE2 must compile it) in a tokenizer file is
# echoed in messages (errors and the note that names the EOS) as its first 60 bytes and its
# length, never whole.
source "$(dirname "$0")/lib/common.bash"

# short_message DESCRIPTION: the last command's output is a few lines, not the megabyte.
short_message() {
  local bytes
  bytes=$(wc -c <"$WORK/out.txt")
  ((bytes < 1500)) && pass "$1: a message of $bytes bytes" || fail "$1: a message of $bytes bytes"
}

# tokenizer.json files around a token (or regex) of 1 MiB: a byte-level BPE of ids 0-255.
"$PYTHON" - <<'PY'
import json, os
long = "x" * (1 << 20)
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
alphabet, extra = {}, 0
for b in range(256):
    if b in bs:
        alphabet[b] = chr(b)
    else:
        alphabet[b] = chr(256 + extra)
        extra += 1

def tokenizer(name, change, config=None):
    j = {"normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
         "decoder": {"type": "ByteLevel"}, "added_tokens": [],
         "model": {"type": "BPE", "vocab": {alphabet[b]: b for b in range(256)}, "merges": []}}
    change(j)
    os.makedirs(name)
    json.dump(j, open(f"{name}/tokenizer.json", "w"))
    if config:
        json.dump(config, open(f"{name}/tokenizer_config.json", "w"))

special = {"id": 256, "content": long, "special": True, "single_word": False, "lstrip": False, "rstrip": False,
           "normalized": False}
tokenizer("merge", lambda j: j["model"].update(merges=[long + " a"]))
tokenizer("regex", lambda j: j.update(pre_tokenizer={"type": "Split", "pattern": {"Regex": "(" + long},
                                                     "behavior": "Isolated", "invert": False}))
# PCRE2 compiles patterns of up to 64 K code units: 30 kB of them.
backtracking = "(a|a)*b|" + long[:30000]
tokenizer("backtracks", lambda j: j.update(pre_tokenizer={"type": "Split", "pattern": {"Regex": backtracking},
                                                          "behavior": "Isolated", "invert": False}))
tokenizer("special", lambda j: j.update(added_tokens=[special]))
tokenizer("eos", lambda j: j.update(added_tokens=[special]), {"eos_token": long})
PY
mkdir -p text && echo "some text" >text/a.txt
mkdir -p backtracking && printf '%s!b\n' "$(head -c 40 /dev/zero | tr '\0' a)" >backtracking/a.txt

expect_exit 2 "a merge of a 1 MB token missing from the vocabulary" -- "$USTRAIN" data convert -i text -o out \
  -t merge/tokenizer.json
expect_output "merge 0 \('x{60}\.\.\. \(1048576 bytes\)' \+ 'a'\) names a token missing" "names the token, shortened"
short_message "a merge"
expect_exit 2 "a Split regex of 1 MB that does not compile" -- "$USTRAIN" data convert -i text -o out \
  -t regex/tokenizer.json
expect_output "the regex \(x{59}\.\.\. \(1048577 bytes\) does not compile" "names the regex, shortened"
short_message "a regex that does not compile"
expect_exit 2 "a Split regex of 30 kB that backtracks past its limit" -- "$USTRAIN" data convert -i backtracking \
  -o out -t backtracks/tokenizer.json --eos none
expect_output "match limit \(the regex \(a\|a\)\*b\|x{52}\.\.\. \(30008 bytes\)\)" "names the regex, shortened"
short_message "a regex past its limit"
expect_exit 2 "--eos-token not found beside a special token of 1 MB" -- "$USTRAIN" data convert -i text -o out \
  -t special/tokenizer.json --eos-token '<eos>'
expect_output "its special tokens are x{60}\.\.\. \(1048576 bytes\): name one of them" "lists the token, shortened"
short_message "the special tokens of a refusal"
expect_exit 0 "an EOS token of 1 MB" -- "$USTRAIN" data convert -i text -o out -t eos/tokenizer.json
expect_output "documents end with x{60}\.\.\. \(1048576 bytes\) \(id 256\)" "the note names the EOS, shortened"
short_message "the note naming the EOS"

finish

# ustrain data convert with compressed inputs (.gz, .zst) and with files reached twice
# (symbolic links, copies): the same datasets as the plain files, clear errors for damaged ones.
source "$(dirname "$0")/lib/common.bash"

make_corpus
for ((i = 0; i < 300; i++)); do printf '{"text": "line %d of the %s"}\n' "$i" "$(head -c $((i % 50 + 1)) corpus/a.txt | tr -d '\n')"; done >docs.jsonl
for f in corpus/a.txt docs.jsonl; do gzip -k "$f" && zstd -q -k "$f" || fail "cannot compress $f with gzip and zstd"; done

# The fields that must not change: per split, each shard's tokens and documents.
counts() { "$PYTHON" -c '
import json, sys
m = json.load(open(sys.argv[1] + "/manifest.json"))
print(" ".join("%s:%d/%d" % (s, x["tokens"], x["documents"]) for s in ("train", "val") for x in m["splits"][s]))' "$1"; }
same_counts() {  # same_counts PLAIN OTHER WHAT
  if [[ -n $(counts "$1") && $(counts "$1") == "$(counts "$2")" ]]; then pass "$3 gives the same shards ($(counts "$2"))"
  else fail "$3: $(counts "$2") instead of $(counts "$1")"; fi
}
no_leftovers() {
  if [[ ! -e $1 ]] && ! compgen -G "$1.incomplete-*" >/dev/null; then pass "$2 leaves nothing behind"
  else fail "$2 left $1 or a temporary directory"; fi
}

expect_exit 0 "convert text" -- "$USTRAIN" data convert -i corpus/a.txt -o plain-txt --val-fraction 0.1
expect_exit 0 "convert jsonl" -- "$USTRAIN" data convert -i docs.jsonl -o plain-jsonl --val-fraction 0.1
for input in corpus/a.txt.gz corpus/a.txt.zst docs.jsonl.gz docs.jsonl.zst; do
  inner=${input%.*}
  expect_exit 0 "convert $input" -- "$USTRAIN" data convert -i "$input" -o "out-${input//\//-}" --val-fraction 0.1
  expect_output "^input format (text|jsonl): $inner ends in \.[a-z]+, (gzip|zstd)-compressed" \
    "$input: the format comes from the name without the compression suffix"
  [[ $inner == *.txt ]] && plain=plain-txt || plain=plain-jsonl
  same_counts "$plain" "out-${input//\//-}" "$input"
done

# A name promising compression must hold it; compressed bytes under another name are read as such.
cp corpus/a.txt fake.txt.gz
expect_exit 2 "a .gz that is not gzip" -- "$USTRAIN" data convert -i fake.txt.gz -o fake
expect_output "fake.txt.gz is named as gzip data but does not start with the gzip magic" "names the file and what is wrong"
no_leftovers fake "a .gz that is not gzip"
cp corpus/a.txt.zst packed.txt
expect_exit 0 "zstd bytes named .txt" -- "$USTRAIN" data convert -i packed.txt -o packed --val-fraction 0.1
expect_output "zstd-compressed \(by its first bytes\)" "says the file is read decompressed"
same_counts plain-txt packed "zstd bytes named .txt"

# Damaged and truncated streams: exit 2, the file named, nothing that looks like a dataset.
head -c $(($(stat -c %s corpus/a.txt.gz) - 20)) corpus/a.txt.gz >cut.txt.gz
head -c $(($(stat -c %s corpus/a.txt.zst) / 2)) corpus/a.txt.zst >cut.txt.zst
for input in cut.txt.gz cut.txt.zst; do
  expect_exit 2 "truncated $input" -- "$USTRAIN" data convert -i "$input" -o "out-$input"
  expect_output "$input ends in the middle of its (gzip|zstd) stream: the file is truncated" "names the file and says truncated"
  no_leftovers "out-$input" "truncated $input"
done
"$PYTHON" -c '
import sys
for name in ("corpus/a.txt.gz", "corpus/a.txt.zst"):
    data = bytearray(open(name, "rb").read())
    for i in range(len(data) // 2, len(data) // 2 + 32): data[i] ^= 0x5A
    open("bad" + name[len("corpus/a"):], "wb").write(data)'
for input in bad.txt.gz bad.txt.zst; do
  expect_exit 2 "damaged $input" -- "$USTRAIN" data convert -i "$input" -o "out-$input"
  expect_output "$input holds corrupt (gzip|zstd) data" "names the file and says corrupt"
  no_leftovers "out-$input" "damaged $input"
done

# What the tools write and `zstd -t` / `gzip -t` accept: pzstd's frames (a skippable frame
# first), a --long=31 window (from a pipe, so the header keeps it), gzip padded with zeros.
pzstd -q -p 2 -c corpus/a.txt >pzstd.txt.zst || fail "cannot compress with pzstd"
zstd -q --long=31 -c <corpus/a.txt >long.txt.zst || fail "cannot compress with zstd --long=31"
{ gzip -c corpus/a.txt; head -c 10240 /dev/zero; } >padded.txt.gz
gzip -t padded.txt.gz 2>/dev/null || fail "gzip -t refuses its padded output"
for input in pzstd.txt.zst long.txt.zst padded.txt.gz; do
  expect_exit 0 "convert $input" -- "$USTRAIN" data convert -i "$input" -o "out-$input" --val-fraction 0.1
  same_counts plain-txt "out-$input" "$input"
done
tar czf corpus.tar.gz corpus/a.txt
expect_exit 2 "a compressed archive" -- "$USTRAIN" data convert -i corpus.tar.gz -o archive
expect_output "corpus.tar.gz is gzip-compressed, and what it holds is not text .*unpack it" "says to unpack it"
if grep -q -- "--format" "$WORK/out.txt"; then fail "suggests --format, which cannot read an archive"; else pass "does not suggest --format"; fi
expect_exit 2 "token files are not read compressed" -- "$USTRAIN" data convert -f npy --tokenizer byte -i docs.jsonl.gz -o npygz
expect_output "reads token files only uncompressed" "says why"

# Files reached twice are read once: a symbolic link beside its target, a copy in a subdirectory.
mkdir -p fortunes/off
cp corpus/a.txt fortunes/a
cp corpus/a.txt fortunes/off/a
ln -s a fortunes/a.u8
expect_exit 0 "convert a directory with a link and a copy" -- "$USTRAIN" data convert -i fortunes -o fortunes-data --val-fraction 0.1
expect_output "note: skipped 2 input files reached twice.*fortunes/a.u8 \(a symbolic link to fortunes/a\), fortunes/off/a \(the same content as fortunes/a\)" \
  "names the files skipped and why"
same_counts plain-txt fortunes-data "a directory holding each document three times"
finish

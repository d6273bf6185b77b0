# ustrain data convert / tokenizer train / inspect / bench from the command line: formats,
# tokenizers, and every documented error (exit 2, one message, nothing left behind).
source "$(dirname "$0")/lib/common.bash"

make_corpus
no_leftovers() {  # no output and no temporary directory next to it
  if [[ ! -e $1 ]] && ! compgen -G "$1.incomplete-*" >/dev/null; then pass "$2 leaves nothing behind"
  else fail "$2 left $1 or a temporary directory"; fi
}

expect_exit 0 "convert text" -- "$USTRAIN" data convert -i corpus -o bytes --val-fraction 0.1 --workers 2
expect_output "wrote bytes: 400 documents" "convert counts the documents"
[[ $(grep -c "wrote" "$WORK/out.txt") -eq 1 ]] && pass "the summary is printed once" || fail "summary printed $(grep -c wrote "$WORK/out.txt") times"
expect_output "tokenizer byte" "convert names the tokenizer"
expect_exit 0 "inspect" -- "$USTRAIN" data inspect bytes --verify --samples 2
expect_output "tokenizer byte \(vocab 257, eos 256\)" "inspect shows the tokenizer"
expect_output "train-00000.h5" "inspect lists the shards"
expect_output "checksums verified" "inspect verifies checksums"
expect_output "entropy [0-9.]+ bits/token" "inspect summarises token frequencies"
expect_output "sample windows" "inspect decodes sample windows"
expect_output "(quick|brown|fox|lazy)" "sample windows are text"

printf '{"text": "the first document"}\n{"body": "x", "text": "the second"}\n' >docs.jsonl
expect_exit 0 "convert jsonl" -- "$USTRAIN" data convert -f jsonl -i docs.jsonl -o json --val-fraction 0
expect_output "2 documents" "jsonl documents counted"
printf '{"text": "ok"}\n{"text": broken}\n' >bad.jsonl
expect_exit 2 "bad jsonl" -- "$USTRAIN" data convert -f jsonl -i bad.jsonl -o badjson
expect_output "bad.jsonl:2" "names the file and line"
no_leftovers badjson "a conversion failing halfway"

# Without --format the format is detected and said on stderr: JSONL is read as JSONL.
expect_exit 0 "convert jsonl without --format" -- "$USTRAIN" data convert -i docs.jsonl -o json-detected --val-fraction 0
expect_output "^input format jsonl: docs.jsonl ends in .jsonl" "says which format it detected and why"
expect_output "wrote json-detected: 2 documents, 30 train" "reads the text field, not the JSON"
expect_exit 2 "inputs of different formats" -- "$USTRAIN" data convert -i docs.jsonl corpus/a.txt -o mixed
expect_output "docs.jsonl is jsonl .*corpus/a.txt is text.*--format" "names both inputs and suggests --format"
no_leftovers mixed "inputs of different formats"
head -c 4096 /dev/zero >weights.bin
expect_exit 2 "an input of no known format" -- "$USTRAIN" data convert -i weights.bin -o weights
expect_output "cannot tell the format of weights.bin: .*llm.c.*Megatron.*pass --format" "names the file and suggests --format"
expect_exit 0 "convert --help" -- "$USTRAIN" data convert --help
expect_output "default: detected from the input" "--help says the format is detected"
expect_output "--include" "--help offers --include"

# A directory converted as text takes its text files only; --include picks files by name.
mkdir -p pkg/sub
cp corpus/a.txt pkg/
printf '\177ELF\002\001\001\000' >pkg/sub/lib.so
printf 'caf\351 au lait\n' >pkg/latin1.txt
expect_exit 0 "convert a directory holding binaries" -- "$USTRAIN" data convert -i pkg -o pkgdata --val-fraction 0
expect_output "skipped 2 files that are not text.*1 with a NUL byte \(pkg/sub/lib.so\), 1 not valid UTF-8 \(pkg/latin1.txt\)" \
  "counts the files skipped, per reason, with their names"
expect_output "wrote pkgdata: 400 documents" "converts the text files"
expect_exit 0 "convert with --include" -- "$USTRAIN" data convert -i pkg -o pkgtxt --include '*.txt' --exclude 'latin*'
expect_output "wrote pkgtxt: 400 documents" "--include and --exclude pick the files"

# A conversion killed outright leaves OUT.incomplete-PID behind: the next one into the same
# output removes it, but never one whose process still runs.
sleep 0 & gone=$!
wait $gone
mkdir -p "fresh.incomplete-$gone" && head -c 100000 /dev/zero >"fresh.incomplete-$gone/train-00000.h5"
sleep 300 & alive=$!
mkdir -p "fresh.incomplete-$alive"
expect_exit 0 "convert after a killed conversion" -- "$USTRAIN" data convert -i corpus -o fresh
expect_output "removed .*fresh.incomplete-$gone \(0.1 MB\), left by process $gone" "says what it removed"
expect_output "kept .*fresh.incomplete-$alive: its process $alive still runs" "says what it kept"
[[ ! -e fresh.incomplete-$gone ]] && pass "the stale directory is gone" || fail "fresh.incomplete-$gone is still there"
[[ -d fresh.incomplete-$alive ]] && pass "a live process's directory is kept" || fail "fresh.incomplete-$alive was removed"
kill "$alive"

expect_exit 2 "tokenizer output in a missing directory" -- "$USTRAIN" data tokenizer train -i corpus -o nodir/tok.model --vocab-size 300
expect_output "nodir.* does not exist: create it first" "says the directory is missing"
grep -q "training a" "$WORK/out.txt" && fail "trained before finding the output unwritable" || pass "refused before training"
expect_exit 0 "tokenizer train" -- "$USTRAIN" data tokenizer train -i corpus -o tok.model --vocab-size 300
expect_output "wrote tok.model: bpe model of 300 pieces" "tokenizer train reports the model"
expect_exit 2 "tokenizer train refuses to overwrite" -- "$USTRAIN" data tokenizer train -i corpus -o tok.model
expect_exit 2 "vocabulary too large for the corpus" -- "$USTRAIN" data tokenizer train -i corpus -o big.model --vocab-size 60000
expect_output "Vocabulary size too high" "says the vocabulary is too large"
[[ ! -e big.model ]] && pass "failed training writes no model" || fail "failed training left big.model"
expect_exit 0 "convert with sentencepiece" -- "$USTRAIN" data convert -i corpus -o sp -t tok.model --val-fraction 0.1
expect_output "tokenizer sentencepiece \(vocab 300, eos 1, model tokenizer.model" "records the model"
[[ -f sp/tokenizer.model ]] && pass "the model travels with the dataset" || fail "sp/tokenizer.model missing"
expect_exit 0 "inspect sentencepiece dataset" -- "$USTRAIN" data inspect sp
expect_output "(quick|brown|fox|lazy)" "sentencepiece windows decode to text"
expect_exit 0 "re-shard with compression" -- "$USTRAIN" data convert -f shards -i sp -o sp2 --shard-tokens 1000 --compression 6
"$USTRAIN" data inspect sp2 >"$WORK/out.txt" 2>&1
expect_output "compression deflate:6" "inspect shows the compression"
expect_exit 2 "--val-fraction with shards" -- "$USTRAIN" data convert -f shards -i sp -o sp3 --val-fraction 0.2
expect_output "keeps its split" "explains that splits are kept"

expect_exit 2 "token format without a tokenizer" -- "$USTRAIN" data convert -f llmc -i corpus -o ids
expect_output "--tokenizer gpt2 --vocab-size 50257" "says how to name the tokenizer"
expect_exit 2 "not an llm.c file" -- "$USTRAIN" data convert -f llmc -i corpus/a.txt -o ids -t gpt2 --vocab-size 50257
expect_output "corpus/a.txt" "names the file"
no_leftovers ids "a rejected input"
expect_exit 2 "unknown format" -- "$USTRAIN" data convert -f parquet -i corpus -o x
: >empty.txt
expect_exit 2 "empty input" -- "$USTRAIN" data convert -i empty.txt -o empty
expect_output "no documents" "says there are no documents"
no_leftovers empty "an empty input"
expect_exit 2 "inspect a non-dataset" -- "$USTRAIN" data inspect corpus
expect_output "manifest.json not found" "names the missing manifest"

expect_exit 0 "data bench (small)" -- "$USTRAIN" data bench --dir bench --text-mb 2 --sp-text-mb 1 --sp-vocab 400 --seconds 0.2 --seq-len 128
expect_output "convert, byte tokenizer, 1 worker: [0-9.]+ MB/s" "bench reports byte conversion"
expect_output "convert, sentencepiece, 2 workers: [0-9.]+ MB/s" "bench reports sentencepiece conversion"
expect_output "loader, seq_len 128, batch 8, prefetch 4: [0-9.]+ M tokens/s" "bench reports loader throughput"
expect_output "next\(\) waited [0-9.]+ us per batch" "bench reports the time a step waits"
[[ ! -e bench ]] && pass "bench removes its scratch directory" || fail "bench left its scratch directory"
finish

# ustrain data convert on decompression bombs (256 MiB of text with no document separator in a
# few KB of zstd or gzip; a JSONL line as long): each is refused once the document passes the
# maximum document size, naming the file, with memory far below the bomb's size.
source "$(dirname "$0")/lib/common.bash"

bomb_text() { head -c 256M /dev/zero | tr '\0' a; }
bomb_text | zstd -q -1 >bomb.txt.zst || fail "cannot make a zstd bomb"
bomb_text | gzip -1 >bomb.txt.gz || fail "cannot make a gzip bomb"
{ printf '{"text": "'; bomb_text; printf '"}\n'; } | zstd -q -1 >bomb.jsonl.zst || fail "cannot make a JSONL bomb"

# run_measured COMMAND...: runs it with output in $WORK/out.txt and prints its exit status and
# peak resident memory in MiB.
run_measured() {
  "$PYTHON" -c '
import resource, subprocess, sys
with open("out.txt", "w") as out:
    code = subprocess.call(sys.argv[1:], stdout=out, stderr=subprocess.STDOUT)
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)' "$@"
}

for input in bomb.txt.zst bomb.txt.gz bomb.jsonl.zst; do
  read -r code peak_mib < <(run_measured "$USTRAIN" data convert -i "$input" -o "out-$input")
  if [[ $code == 2 ]]; then pass "$input is refused (exit 2)"; else fail "$input: exit $code, expected 2"; cat out.txt; fi
  [[ $input == *.jsonl.* ]] && where="$input:1: the line" || where="$input: document 1 of the file \(from line 1\)"
  expect_output "$where is longer than the maximum document size, 64 MiB.*--max-document-mib" \
    "$input: names the file and the document, and the option that raises the maximum"
  # The maximum (64 MiB) held twice over, and the program itself; the bomb holds 256 MiB.
  if ((peak_mib < 400)); then pass "$input: peak memory $peak_mib MiB"; else fail "$input: peak memory $peak_mib MiB"; fi
  [[ ! -e out-$input ]] && ! compgen -G "out-$input.incomplete-*" >/dev/null && pass "$input: nothing left behind" ||
    fail "$input: left a dataset or temporary directory"
done

# --max-document-mib sets the maximum: 2 MiB documents pass 3 MiB and are refused at 1 MiB.
{ head -c 2M /dev/zero | tr '\0' b; printf '\n\n'; head -c 2M /dev/zero | tr '\0' c; } >two.txt
expect_exit 0 "--max-document-mib 3 takes 2 MiB documents" -- "$USTRAIN" data convert -i two.txt -o two-3 \
  --max-document-mib 3 --val-fraction 0
expect_exit 2 "--max-document-mib 1 refuses them" -- "$USTRAIN" data convert -i two.txt -o two-1 --max-document-mib 1
expect_output "two.txt: document 1 of the file \(from line 1\) is longer than the maximum document size, 1 MiB" \
  "names the file, the document and the maximum given"
expect_exit 2 "tokenizer training takes the same maximum" -- "$USTRAIN" data tokenizer train -i two.txt -o two.model \
  --max-document-mib 1
expect_output "two.txt: document 1 of the file \(from line 1\) is longer than the maximum document size, 1 MiB" \
  "tokenizer training names the document too"
finish

# Oversize and out-of-range inputs: an endless recipe, a megabyte of unknown key, absurd
# thread counts, more evaluation batches than the split holds (up to 2**63 - 1), a bench of
# 2**63 - 1 steps, a negative temperature, and an
# error that must not be glued to the prompt.
source "$(dirname "$0")/lib/faults.bash"

setup_tiny_run
"$USTRAIN" train tiny.toml --set train.steps=4 >train.log 2>&1 || fail "training"
ckpt=runs/tiny/checkpoints/step-00000004

fault "ustrain train /dev/zero" 2 "/dev/zero is a device file, not a regular file" -- timeout 20 "$USTRAIN" train /dev/zero

{ tiny_recipe; printf '%s = 1\n' "$(head -c 1048576 /dev/zero | tr '\0' k)"; } >hugekey.toml
start=$SECONDS
fault "a 1 MB unknown key" 2 "unknown key log.kkkk.*\(1048580 bytes\)|unknown key log.kkkk.*bytes\)" -- \
  timeout 60 "$USTRAIN" train hugekey.toml
(( SECONDS - start <= 5 )) && (( $(wc -c <"$WORK/out.txt") < 2000 ))
check "  ... answered within 5 s in under 2000 bytes" - $?

fault "device.threads = 100000" 2 "device.threads = 100000, but this process may run on" -- \
  "$USTRAIN" train tiny.toml --set run.name=threads --set device.threads=100000
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc would count OMP_NUM_THREADS
fault "device.threads = cores + 1: a warning" 0 "device.threads = $((cores + 1)), but .*take turns" -- \
  "$USTRAIN" train tiny.toml --set run.name=threads --set train.steps=2 --set device.threads=$((cores + 1))

fault "eval --batches 2000 on a small split" 0 "evaluating [0-9]+ sequences instead, each once" -- \
  "$USTRAIN" eval tiny.toml --checkpoint "$ckpt" --batches 2000

# The largest int64: batches x global_batch overflows 64 bits; capped like any other excess.
fault "eval --batches 2**63 - 1" 0 "evaluating [0-9]+ sequences instead, each once" -- \
  "$USTRAIN" eval tiny.toml --checkpoint "$ckpt" --batches 9223372036854775807
grep -Eq "validation loss [0-9]" "$WORK/out.txt" && ! grep -q -- "-[0-9]* tokens" "$WORK/out.txt"
check "  ... a positive loss over a positive token count" - $?
fault "bench --steps 2**63 - 1" 2 "--steps 9223372036854775807 is out of range" -- \
  "$USTRAIN" bench tiny.toml --steps 9223372036854775807

fault "generate --temperature -1" 2 "^--temperature: -1 is negative: it must be 0 or more" -- \
  "$USTRAIN" generate --checkpoint "$ckpt" --temperature -1
(( $(wc -c <"$WORK/out.txt") < 300 ))
check "  ... in one short line" - $?
fault "generate --temperature 1e-320 (below the smallest normal double)" 0 "" -- \
  "$USTRAIN" generate --checkpoint "$ckpt" --temperature 1e-320 --tokens 2
fault "generate --temperature 1e999" 2 "^--temperature: 1e999 is too large" -- \
  "$USTRAIN" generate --checkpoint "$ckpt" --temperature 1e999
mkdir -p broken && echo '{' >broken/manifest.json
fault "generate --prompt, bad checkpoint: error on its own line" 2 "^error: broken/manifest.json" -- \
  "$USTRAIN" generate --checkpoint broken --prompt Hello
finish

# Bad checkpoints: truncated, missing a rank file, from another model shape, from a newer
# format version, half-written. Each is one clear error (exit 2) naming the file; never a
# crash, never a silently loaded model.
source "$(dirname "$0")/lib/common.bash"

make_corpus
tiny_recipe >tiny.toml
"$USTRAIN" data convert --input corpus --output data --val-fraction 0.1 >/dev/null 2>&1 || fail "data convert"
"$USTRAIN" train tiny.toml --set train.steps=10 >train.log 2>&1 || fail "training"
good=runs/tiny/checkpoints/step-00000010

# refused WHAT CHECKPOINT PATTERN: eval, generate, resume and inspect all refuse it.
refused() {
  local what=$1 ckpt=$2 pattern=$3
  expect_exit 2 "$what: eval" -- "$USTRAIN" eval tiny.toml --checkpoint "$ckpt"
  expect_output "$pattern" "$what: eval names the problem"
  expect_exit 2 "$what: generate" -- "$USTRAIN" generate --checkpoint "$ckpt" --tokens 2
  expect_exit 2 "$what: resume" -- "$USTRAIN" train tiny.toml --set run.name=other --resume "$ckpt"
  expect_output "$pattern" "$what: resume names the problem"
  expect_exit 2 "$what: inspect" -- "$USTRAIN" ckpt inspect "$ckpt"
  if grep -Eq "internal error|Segmentation|terminate called|Aborted" "$WORK/out.txt"; then fail "$what: crashed"; fi
}

cp -r "$good" truncated
truncate -s 1000 truncated/rank-00000.safetensors
refused "truncated rank file" truncated "truncated/rank-00000.safetensors is truncated"

cp -r "$good" truncated_manifest
truncate -s 200 truncated_manifest/manifest.json
refused "truncated manifest" truncated_manifest "truncated_manifest/manifest.json is not valid JSON"

cp -r "$good" missing
rm missing/rank-00000.safetensors
refused "missing rank file" missing "missing lacks the rank file missing/rank-00000.safetensors"

cp -r "$good" newer
sed -i 's/"format_version": 2/"format_version": 3/' newer/manifest.json
refused "newer format version" newer "newer/manifest.json: checkpoint format version 3 .*use a newer ustrain"

cp -r "$good" half_written
rm half_written/manifest.json
refused "no manifest" half_written "half_written is not a complete checkpoint"

cp -r "$good" damaged
printf '\x55\x55\x55\x55' | dd of=damaged/rank-00000.safetensors bs=1 seek=20000 conv=notrunc 2>/dev/null
expect_exit 2 "damaged data: eval" -- "$USTRAIN" eval tiny.toml --checkpoint damaged
expect_output "damaged/rank-00000.safetensors: tensor .* fails its checksum" "damaged data: names file and tensor"

expect_exit 2 "another model shape: eval" -- "$USTRAIN" eval tiny.toml --checkpoint "$good" --set model.d_model=64
expect_output "$good holds model.embed_tokens.weight with shape \(257, 32\), the recipe's model needs \(257, 64\)" \
  "another model shape: names checkpoint, tensor and shapes"
expect_exit 2 "another depth: eval" -- "$USTRAIN" eval tiny.toml --checkpoint "$good" --set model.n_layers=1
expect_output "model.layers.1" "another depth: names the surplus tensor"
expect_exit 2 "nonexistent checkpoint" -- "$USTRAIN" eval tiny.toml --checkpoint nowhere
expect_output "checkpoint nowhere does not exist" "names the missing path"
expect_exit 2 "a run without checkpoints" -- "$USTRAIN" eval tiny.toml --checkpoint runs
finish

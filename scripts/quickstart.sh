#!/usr/bin/env bash
# The CPU quickstart, from a fresh machine: install and build, convert a real English corpus
# (the Debian `fortunes` package) into byte-level HDF5 shards, train recipes/quickstart.toml
# for a few minutes, and print samples. Extra arguments go to `ustrain train`
# (e.g. --set train.steps=100).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh --target ustrain
ustrain=build/app/ustrain

data=runs/data/fortunes
if [[ ! -f $data/manifest.json ]]; then
  "$ustrain" data convert --input /usr/share/games/fortunes --output "$data" \
    --split 'line:%' --exclude '*.dat' --exclude '*.u8' --val-fraction 0.05
fi

"$ustrain" train recipes/quickstart.toml --overwrite "$@"

echo
echo "=== samples from runs/quickstart ==="
"$ustrain" generate --run runs/quickstart --samples 3 --tokens 300 --temperature 0.8 --top-k 40
"$ustrain" generate --run runs/quickstart --prompt "The meaning of life is" --tokens 200 --temperature 0.7

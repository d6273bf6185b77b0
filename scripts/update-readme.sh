#!/usr/bin/env bash
# Regenerates the recipe reference in README.md from the schema (run after changing
# core/recipe/recipe_schema.cpp; a unit test fails while the two differ).
set -euo pipefail
cd "$(dirname "$0")/.."
ustrain=${1:-build/app/ustrain}
ref=$(mktemp)
trap 'rm -f "$ref"' EXIT
"$ustrain" recipe reference >"$ref"
python3 - "$ref" <<'PY'
import sys
ref = open(sys.argv[1]).read()
text = open("README.md").read()
begin, end = "<!-- recipe-reference:begin -->\n", "<!-- recipe-reference:end -->"
b, e = text.index(begin) + len(begin), text.index(end)
open("README.md", "w").write(text[:b] + ref + text[e:])
PY
echo "README.md recipe reference updated"

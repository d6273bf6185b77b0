#!/usr/bin/env bash
# Regenerates the recipe reference in docs/recipes.md from the schema (run after changing
# core/recipe/recipe_schema.cpp; a unit test fails while the two differ).
set -euo pipefail
cd "$(dirname "$0")/.."
ustrain=${1:-build/app/ustrain}
doc=docs/recipes.md
ref=$(mktemp)
trap 'rm -f "$ref"' EXIT
"$ustrain" recipe reference >"$ref"
python3 - "$ref" "$doc" <<'PY'
import sys
ref, doc = open(sys.argv[1]).read(), sys.argv[2]
text = open(doc).read()
begin, end = "<!-- recipe-reference:begin -->\n", "<!-- recipe-reference:end -->"
b, e = text.index(begin) + len(begin), text.index(end)
open(doc, "w").write(text[:b] + ref + text[e:])
PY
echo "$doc recipe reference updated"

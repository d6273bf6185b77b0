#!/usr/bin/env python3
"""Checks that every relative link of the repository's Markdown files resolves.

For each Markdown file (those git tracks or would add, else every *.md outside build and
run directories), every inline link or image `[text](target)`, every reference definition
`[id]: target` and every HTML `href`/`src` outside code blocks and code spans is checked:
a relative target must name an existing file or directory, and a `#fragment` must name a
heading (or an explicit `<a name>`/`id` anchor) of the Markdown file it points into, by
GitHub's rule: the heading's text lowercased, punctuation other than '-' and '_' dropped,
each space turned into '-', repeats numbered -1, -2, ... Links with a scheme (https:,
mailto:, ...) are not followed.

Usage: scripts/check-links.py [ROOT]     (default: the repository holding this script)
       scripts/check-links.py --self-test

Prints one line per broken link, FILE:LINE: TARGET: why, and exits with status 1 when there
is any; otherwise prints how many links it checked and exits with status 0. Python 3
standard library only.
"""
import os
import re
import subprocess
import sys
import tempfile
import unicodedata
import urllib.parse

SKIP_DIRS = {".git", "runs", "node_modules", "third_party"}
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
LIST_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]\\]|\\.|\[(?:[^\[\]\\]|\\.)*\])*)\]\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[((?:[^\[\]\\]|\\.)+)\]:[ \t]*(<[^>\n]*>|\S+)")
HTML_ATTR = re.compile(r"<(?:a|img|source)\b[^>]*?\b(?:href|src)\s*=\s*(\"[^\"]*\"|'[^']*')", re.I)
HTML_ANCHOR = re.compile(r"<a\b[^>]*?\b(?:name|id)\s*=\s*(\"[^\"]*\"|'[^']*')", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)


def markdown_files(root):
    """The Markdown files to check, relative to root, sorted."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-co", "--exclude-standard", "--", "*.md", "*.MD"],
                             capture_output=True, text=True, check=True).stdout
        files = [f for f in out.splitlines() if f and os.path.isfile(os.path.join(root, f))]
        if files:
            return sorted(set(files))
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build") and not x.startswith(".")]
        files += [os.path.relpath(os.path.join(d, n), root) for n in names if n.lower().endswith(".md")]
    return sorted(files)


def blank_code(lines):
    """The lines with fenced and indented code blocks emptied (numbering kept), and code spans
    blanked out paragraph by paragraph (a span may cross a line break, not a blank line)."""
    out, fence, prev_blank, in_indented, in_list = [], None, True, False, False
    for line in lines:
        if fence:
            m = FENCE.match(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)):].strip():
                fence = None
            out.append("")
            continue
        m = FENCE.match(line)
        if m:
            fence = m.group(1)
            out.append("")
            prev_blank = False
            continue
        blank = not line.strip()
        indent = len(line) - len(line.lstrip(" ")) if not line.startswith("\t") else 4
        if not blank and indent >= 4 and (prev_blank or in_indented) and not in_list:
            in_indented = True
            out.append("")
            continue
        if not blank:
            in_indented = False
            if LIST_ITEM.match(line):
                in_list = True
            elif prev_blank and indent == 0:
                in_list = False
        out.append(line)
        prev_blank = blank
    # Code spans, within each paragraph.
    text = "\n".join(out)
    paragraphs = re.split(r"(\n[ \t]*\n)", text)
    blanked = "".join(CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), p) for p in paragraphs)
    return blanked.split("\n")


def heading_text(raw):
    """What GitHub renders of a heading's inline Markdown, as text."""
    t = re.sub(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\([^)]*\)", r"\1", raw)  # links and images: their text
    t = re.sub(r"<[^>]+>", "", t)  # HTML tags
    t = t.replace("`", "")
    t = re.sub(r"(\*\*|__|\*|_(?=\S)|(?<=\S)_|~~)", lambda m: "" if m.group(0) != "_" else "_", t)
    return t.strip()


def slug(text):
    """GitHub's anchor for a heading's text (github-slugger)."""
    t = text.lower()
    t = "".join(c for c in t if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return t.replace(" ", "-")


def anchors(lines):
    """The fragment names a Markdown file defines."""
    names, seen = set(), {}
    code = blank_code(lines)
    raw_fence = [False] * len(lines)
    for i, (line, kept) in enumerate(zip(lines, code)):
        raw_fence[i] = (kept == "" and line.strip() != "")
    for i, line in enumerate(lines):
        if raw_fence[i]:
            continue
        title = None
        m = ATX.match(line)
        if m and m.group(1):
            title = m.group(2) or ""
        elif (i + 1 < len(lines) and line.strip() and not raw_fence[i + 1] and SETEXT.match(lines[i + 1])
              and not LIST_ITEM.match(line) and not ATX.match(line)
              and (SETEXT.match(lines[i + 1]).group(1)[0] == "=" or not re.match(r"^ {0,3}-+[ \t]*$", line))):
            # A setext heading: a paragraph line over === or ---. A line of dashes under a table
            # row or a list item is not one; tables are told apart by their pipes.
            if "|" not in line or "|" not in lines[i + 1]:
                title = line.strip()
        if title is not None:
            base = slug(heading_text(title))
            n = seen.get(base, 0)
            seen[base] = n + 1
            names.add(base if n == 0 else f"{base}-{n}")
        for a in HTML_ANCHOR.finditer(line):
            names.add(a.group(1)[1:-1])
    return names


def links(lines):
    """(line number, target) of every link outside code."""
    code = blank_code(lines)
    text = "\n".join(code)
    starts = [0]
    for line in code:
        starts.append(starts[-1] + len(line) + 1)

    def line_of(pos):
        lo, hi = 0, len(starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    found = []
    for m in INLINE_LINK.finditer(text):
        found.append((line_of(m.start()), m.group(2)))
    for m in HTML_ATTR.finditer(text):
        found.append((line_of(m.start(1)), m.group(1)[1:-1]))
    for i, line in enumerate(code):
        m = REF_DEF.match(line)
        if m:
            found.append((i + 1, m.group(2)))
    return sorted(found)


def check(root):
    """Every broken link under root, as (file, line, target, why)."""
    root = os.path.abspath(root)
    cache = {}

    def read(path):
        if path not in cache:
            with open(path, encoding="utf-8", errors="replace") as f:
                cache[path] = f.read().split("\n")
        return cache[path]

    broken, count, files = [], 0, markdown_files(root)
    for rel in files:
        path = os.path.join(root, rel)
        for line, target in links(read(path)):
            target = target.strip()
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1]
            count += 1
            if SCHEME.match(target) or target.startswith("//"):
                continue
            part, _, frag = target.partition("#")
            part = urllib.parse.unquote(part.split("?", 1)[0])
            frag = urllib.parse.unquote(frag)
            if part.startswith("/"):
                dest = os.path.normpath(os.path.join(root, part.lstrip("/")))
            elif part:
                dest = os.path.normpath(os.path.join(os.path.dirname(path), part))
            else:
                dest = path
            if not target:
                broken.append((rel, line, target, "empty link"))
                continue
            if os.path.relpath(dest, root).startswith(".."):
                broken.append((rel, line, target, "points outside the repository"))
                continue
            if not os.path.exists(dest):
                broken.append((rel, line, target, f"no such file or directory: {os.path.relpath(dest, root)}"))
                continue
            if not frag:
                continue
            if os.path.isdir(dest):
                broken.append((rel, line, target, "a fragment on a directory"))
            elif dest.lower().endswith(".md"):
                if frag not in anchors(read(dest)):
                    broken.append((rel, line, target,
                                   f"no heading or anchor '{frag}' in {os.path.relpath(dest, root)}"))
            elif not re.fullmatch(r"L\d+(-L\d+)?", frag):
                broken.append((rel, line, target, f"fragment '{frag}' on a file that is not Markdown"))
    return broken, count, len(files)


def self_test():
    """The checker on a small tree with known good and broken links."""
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs"))
        files = {
            "README.md": "# Top\n\n## Two words\n\n## Two words\n\n## `code` and *Stars*: yes!\n\n"
                         "[ok](docs/a.md) [ok](#two-words) [ok](#two-words-1) [ok](#code-and-stars-yes)\n"
                         "[ok](docs/a.md#a-page) [ok](https://example.com/x) [ok](docs/)\n"
                         "[bad](docs/missing.md)\n"
                         "[bad](#two-words-2)\n"
                         "`[not a link](nowhere.md)`\n\n"
                         "    [in code](nowhere.md)\n\n"
                         "```\n[in a fence](nowhere.md)\n```\n"
                         "[bad across\nlines](docs/a.md#no-such)\n",
            "docs/a.md": "A page\n======\n\n[ok](../README.md#top) [bad](../README.md#Top)\n\n[ref]: ../nowhere\n",
        }
        for name, text in files.items():
            with open(os.path.join(root, name), "w") as f:
                f.write(text)
        broken, count, nfiles = check(root)
        got = sorted((f, line, t) for f, line, t, _ in broken)
        want = [("README.md", 11, "docs/missing.md"), ("README.md", 12, "#two-words-2"),
                ("README.md", 20, "docs/a.md#no-such"), ("docs/a.md", 4, "../README.md#Top"),
                ("docs/a.md", 6, "../nowhere")]
        if got != want or nfiles != 2:
            print(f"self-test failed:\n  got  {got}\n  want {want}", file=sys.stderr)
            return 1
        print(f"self-test passed: {count} links, {len(broken)} broken as expected")
        return 0


def main(argv):
    if argv[1:2] == ["--self-test"]:
        return self_test()
    if len(argv) > 2 or argv[1:2] and argv[1].startswith("-"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    broken, count, nfiles = check(root)
    for f, line, target, why in broken:
        print(f"{f}:{line}: ({target}): {why}")
    if broken:
        print(f"{len(broken)} broken link(s) of {count} in {nfiles} Markdown file(s)", file=sys.stderr)
        return 1
    print(f"{count} links in {nfiles} Markdown files: all resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

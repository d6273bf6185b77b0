#!/usr/bin/env python3
"""Checks the source tree's shape: layered folders keep their declared layers, and no folder is
too full to read.

- Layers: a README.md with a "**Layers.**" paragraph followed by an indented list (core/, data/)
  names its sub-folders lowest first. A file in one of them may include headers of its own
  folder and of folders listed before it, never of one listed after it, so no two folders
  include each other. A sub-folder missing from the list is an error too (say where it belongs).
- Size: no folder holds more than 40 source files (.h, .cpp, .cu, .cuh) of its own.

Usage: scripts/check-structure.py [ROOT]     (default: the repository holding this script)

Prints one line per problem and exits with status 1 when there is any; otherwise prints what it
checked and exits 0. Python 3 standard library only.
"""
import os
import re
import subprocess
import sys

SOURCE = ('.h', '.cpp', '.cu', '.cuh')
MOST_FILES = 40


def source_files(root):
    try:
        out = subprocess.run(['git', '-C', root, 'ls-files', '--cached', '--others', '--exclude-standard'],
                             capture_output=True, text=True, check=True).stdout.split('\n')
        return [f for f in out if f.endswith(SOURCE) and os.path.isfile(os.path.join(root, f))]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for top, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(('.', 'build', 'runs'))]
            found += [os.path.relpath(os.path.join(top, f), root) for f in files if f.endswith(SOURCE)]
        return found


LAYERED = ('core', 'data')


def declared_layers(root, top):
    text = open(os.path.join(root, top, 'README.md'), encoding='utf-8').read()
    match = re.search(r'\*\*Layers\.\*\*.*?\n\n((?:    [^\n]*\n)+)', text, re.S)
    if not match:
        return None
    return [name.strip() for name in ' '.join(match.group(1).split()).split(',') if name.strip()]


def layer_problems(root, files, top):
    layers = declared_layers(root, top)
    if layers is None:
        return [f'{top}/README.md: no "**Layers.**" paragraph followed by an indented list of {top}/\'s folders']
    rank = {name: i for i, name in enumerate(layers)}
    problems = []
    inside = sorted(f for f in files if f.startswith(top + '/') and f.count('/') >= 2)
    for folder in sorted({f.split('/')[1] for f in inside} - set(rank)):
        problems.append(f'{top}/{folder}: not in the layers of {top}/README.md; add it where it belongs')
    include = re.compile(r'\s*#\s*include\s+"' + re.escape(top) + r'/([^/"]+)/')
    for path in inside:
        own = path.split('/')[1]
        if own not in rank:
            continue
        for number, line in enumerate(open(os.path.join(root, path), encoding='utf-8', errors='replace'), 1):
            m = include.match(line)
            if m and m.group(1) in rank and rank[m.group(1)] > rank[own]:
                problems.append(f'{path}:{number}: {top}/{own} includes {top}/{m.group(1)}, a later layer '
                                f'({top}/README.md lists the layers lowest first)')
    return problems


def size_problems(files):
    per_folder = {}
    for f in files:
        per_folder.setdefault(os.path.dirname(f), []).append(f)
    return [f'{folder}/: {len(names)} source files, more than {MOST_FILES}; split it into folders by concept'
            for folder, names in sorted(per_folder.items()) if len(names) > MOST_FILES]


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = source_files(root)
    problems = [p for top in LAYERED for p in layer_problems(root, files, top)] + size_problems(files)
    for p in problems:
        print(p)
    if problems:
        return 1
    folders = len({os.path.dirname(f) for f in files})
    print(f'checked {len(files)} source files in {folders} folders: core/ and data/ keep their layers, no folder holds '
          f'more than {MOST_FILES} source files')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))

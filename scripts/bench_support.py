"""What the CPU benchmark scripts share: running ustrain on MPI ranks of this machine, reading
a `--dry-run` memory plan and the quickstart corpus."""
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
UNITS = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}


def run(command, ranks, log):
    """Runs `command` on `ranks` MPI processes of one thread each (alone without mpiexec)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    if ranks > 1:
        command = ["mpiexec", "-n", str(ranks), "--oversubscribe"] + command
    with open(log, "w") as out:
        if subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env).returncode != 0:
            sys.exit(f"failed: {' '.join(command)} (see {log})")


def plan_bytes(dry_run_text, category):
    """Bytes of one category of the memory plan `--dry-run` printed."""
    m = re.search(rf"^\s*{category}\s+([0-9.]+) (B|KiB|MiB|GiB)\s*$", dry_run_text, re.M)
    return float(m.group(1)) * UNITS[m.group(2)]


def convert_fortunes(ustrain, output):
    """The quickstart corpus (Debian's fortunes) as a dataset in `output`."""
    corpus = "/usr/share/games/fortunes"
    if not os.path.isdir(corpus):
        sys.exit(f"{corpus} is missing: install the Debian package `fortunes` (scripts/setup.sh does)")
    subprocess.run([ustrain, "data", "convert", "--input", corpus, "--output", output, "--split", "line:%",
                    "--exclude", "*.dat", "--exclude", "*.u8", "--val-fraction", "0.05"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

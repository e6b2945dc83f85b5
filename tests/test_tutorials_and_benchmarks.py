"""Smoke test: every tutorial and benchmark runs to the end with --quick --reps 1 and prints its
table. Each runs in a subprocess (the interpreter running the tests), in the repository root,
with this session's PYPTO_CACHE_DIR (set by conftest.py) so nothing lands in the user's cache."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# script -> a regular expression for its table's header line
SCRIPTS = {
    "tutorials/01_vector_add.py": r"^\s*size\s+PyPTO\s+numpy\s+ratio\s*$",
    "tutorials/02_fused_softmax.py": r"^\s*shape\s+PyPTO\s+numpy\s+torch\s+ratio\s*$",
    "tutorials/03_matmul.py": r"^\s*size\s+PyPTO\s+numpy\s+ratio\s+PyPTO GFLOP/s\s*$",
    "tutorials/04_layer_norm.py": r"^\s*shape\s+PyPTO\s+numpy\s+torch\s+ratio\s*$",
    "benchmarks/vector_add.py":
        r"^kernel\s+size\s+PyPTO\s+numpy\s+torch\s+PyPTO/best\s+PyPTO GB/s$",
    "benchmarks/matmul.py":
        r"^kernel\s+size\s+tile\s+PyPTO\s+numpy\s+torch\s+PyPTO/best\s+PyPTO GFLOP/s"
        r"\s+numpy GFLOP/s\s+torch GFLOP/s$",
}

# Runs a benchmark as if torch were not installed (as on a clean CI machine).
WITHOUT_TORCH = (
    "import runpy, sys\n"
    "sys.modules['torch'] = None\n"
    "path = sys.argv[1]\n"
    "sys.path.insert(0, str(__import__('pathlib').Path(path).parent))\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(path, run_name='__main__')\n"
)


def _run(argv):
    proc = subprocess.run([sys.executable, *argv, "--quick", "--reps", "1"], cwd=ROOT,
                          env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (
        f"{argv} exited with {proc.returncode}\n--- stdout\n{proc.stdout}\n"
        f"--- stderr\n{proc.stderr}")
    return proc.stdout


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_script_runs_and_prints_its_table(script):
    out = _run([script])
    assert re.search(SCRIPTS[script], out, re.M), f"no table header in the output of {script}:\n{out}"


@pytest.mark.parametrize("script", ["benchmarks/vector_add.py", "benchmarks/matmul.py",
                                    "tutorials/02_fused_softmax.py",
                                    "tutorials/04_layer_norm.py"])
def test_script_runs_without_torch(script):
    out = _run(["-c", WITHOUT_TORCH, script])
    assert "torch: not installed" in out
    assert re.search(SCRIPTS[script], out, re.M), f"no table header in the output of {script}:\n{out}"

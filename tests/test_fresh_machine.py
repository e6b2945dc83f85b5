""".ci/run's stripped run (the README's commands on a machine without ptoas, PTO_ORACLE or
torch) hides torch with .ci/no-torch/sitecustomize.py: check that it does."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_ci_sitecustomize_hides_torch():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, ".ci", "no-torch"))
    done = subprocess.run([sys.executable, "-c", "import torch"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "import of torch halted" in done.stderr   # ImportError

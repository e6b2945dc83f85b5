"""On PYTHONPATH, makes ``import torch`` fail as on a machine without it (.ci/run's stripped
run of the quick subset: every torch test must skip with its reason, none may fail)."""
import sys

sys.modules["torch"] = None         # `import torch` raises ImportError

"""Test-wide setup: every test session gets its own kernel cache directory, so tests never
read kernels compiled by another checkout and never write into the user's cache; and every
compile checks its .pto round trip."""
import os
import tempfile

import pytest

_session_cache = tempfile.mkdtemp(prefix="pypto-test-cache-")
os.environ["PYPTO_CACHE_DIR"] = _session_cache
# every kernel the tests compile (tutorials included) must print .pto that reads back
# identically; the hazard checker runs on every compile anyway
os.environ["PYPTO_VERIFY_PTO"] = "1"


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A cache directory of the test's own (for tests that count compiles or corrupt files)."""
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"

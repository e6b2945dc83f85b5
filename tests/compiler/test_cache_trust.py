"""The disk cache holds code PyPTO runs, so it trusts only what the user alone can write:
folders are created 0700, and a cache folder, entry or file owned by someone else or writable
by group or others is refused with a warning (the kernel compiled in memory or again); so is
a pto-isa precompiled header (built again)."""
import os
import re
import stat

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto import cache as cache_mod
from tests.engines.tools import TOOLS, needs_tools

posix_only = pytest.mark.skipif(not hasattr(os, "getuid"), reason="no user ids here")
as_root = pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                             reason="giving a file to another user (os.chown) needs root")
FOREIGN_UID = 54321


@pypto.jit
def triple(x, out, BLOCK: pl.constexpr):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(BLOCK,)) * 3.0)


def _run():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    triple._kernels.clear()                  # no in-memory copy: go to the disk cache
    triple._fast.clear()
    triple[(1,)](x, out, BLOCK=64)
    np.testing.assert_array_equal(out, x * 3)


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def _entries(root):
    """The manifests of kernel entries (the host pool's own entry lives under host/)."""
    return [os.path.join(d, cache_mod.MANIFEST) for d, _, fs in os.walk(root)
            if cache_mod.MANIFEST in fs and "kernel.o" in fs]


@posix_only
def test_new_cache_is_private(fresh_cache):
    _run()
    assert _mode(fresh_cache) == 0o700
    [manifest] = _entries(fresh_cache)
    entry = os.path.dirname(manifest)
    for path in (os.path.dirname(entry), entry, fresh_cache / "locks"):
        assert _mode(path) == 0o700, path
    assert all(_mode(os.path.join(entry, f)) == 0o600 for f in os.listdir(entry))


@posix_only
def test_a_cache_others_can_write_is_refused(fresh_cache):
    os.makedirs(fresh_cache)
    os.chmod(fresh_cache, 0o777)
    cache_mod._WARNED.clear()
    with pytest.warns(RuntimeWarning, match=r"is writable by group and others \(mode 777\)"):
        _run()                                  # still runs: compiled in memory
    assert not _entries(fresh_cache)


def _foreign(path):
    os.chown(path, FOREIGN_UID, -1)


def _group_writable(path):
    os.chmod(path, _mode(path) | 0o070)


def _others_writable(path):
    os.chmod(path, 0o666)


def _entry_folder(root):
    [manifest] = _entries(root)
    return os.path.dirname(manifest)


def _entry_file(root):
    return os.path.join(_entry_folder(root), "kernel.o")


@posix_only
@pytest.mark.parametrize("where,spoil,why", [
    pytest.param(_entry_folder, _foreign, f"is owned by user id {FOREIGN_UID}", marks=as_root,
                 id="foreign-entry-folder"),
    pytest.param(_entry_folder, _group_writable, r"is writable by its group \(mode 770\)",
                 id="group-writable-entry-folder"),
    pytest.param(_entry_file, _foreign, f"kernel.o is owned by user id {FOREIGN_UID}",
                 marks=as_root, id="foreign-entry-file"),
    pytest.param(_entry_file, _others_writable, "kernel.o is writable by group and others",
                 id="others-writable-entry-file"),
])
def test_an_entry_someone_else_can_have_written_is_not_loaded(fresh_cache, where, spoil, why):
    """Refused with the reason, at the caller's line (not cache.py's), and compiled again:
    the new entry, written by us, replaces it."""
    _run()
    spoil(where(fresh_cache))
    cache_mod._WARNED.clear()
    before = pypto.cache_stats["compiles"]
    with pytest.warns(RuntimeWarning, match=why) as caught:
        _run()
    assert pypto.cache_stats["compiles"] == before + 1      # compiled again, not loaded
    assert {w.filename for w in caught if re.search(why, str(w.message))} == {__file__}
    assert cache_mod.trust_problem(where(fresh_cache)) is None


@posix_only
@as_root
def test_a_cache_owned_by_another_user_is_refused(fresh_cache):
    os.makedirs(fresh_cache, mode=0o700)
    _foreign(fresh_cache)
    cache_mod._WARNED.clear()
    with pytest.warns(RuntimeWarning, match=f"is owned by user id {FOREIGN_UID}"):
        _run()
    assert not _entries(fresh_cache)


@posix_only
def test_untrusted_tuning_results_are_ignored(fresh_cache):
    from pypto.tuning import results
    results.save("d" * 64, {"config": 0})
    assert results.load("d" * 64)["config"] == 0
    os.chmod(os.path.join(results.directory(), "d" * 64 + ".json"), 0o666)
    cache_mod._WARNED.clear()
    with pytest.warns(RuntimeWarning, match="writable by group and others"):
        assert results.load("d" * 64) is None


@posix_only
@needs_tools
@pytest.mark.heavy                  # a PCH build each (about 10 s on 2 cores)
@pytest.mark.parametrize("spoil,why", [
    pytest.param(_group_writable, r"\.pch is writable by its group", id="group-writable"),
    pytest.param(_foreign, rf"\.pch is owned by user id {FOREIGN_UID}", marks=as_root,
                 id="foreign"),
])
def test_an_untrusted_precompiled_header_is_rebuilt(fresh_cache, spoil, why):
    """clang loads a PCH as it would code: one planted where the engine looks is refused and
    built again in its place, ours alone."""
    from pypto.backends.ptoisa import engine
    path = engine.pch_path(TOOLS)
    with open(path, "wb") as f:
        f.write(b"planted")
    os.chmod(path, 0o600)
    spoil(path)
    cache_mod._WARNED.clear()
    with pytest.warns(RuntimeWarning, match=why):
        assert engine.precompiled_header(TOOLS) == path
    with open(path, "rb") as f:
        assert f.read() != b"planted"
    assert cache_mod.trust_problem(path) is None and _mode(path) == 0o600

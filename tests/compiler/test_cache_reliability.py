"""The disk cache never fails a launch (issue 34): a cache that cannot be written compiles in
memory, and an entry another process prunes while this one lists or reads it is a miss."""
import errno
import os
import shutil
import subprocess
import uuid
import warnings

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto import cache as cache_mod
from pypto.cache import STATS
from pypto.cache import admin

C = 1.0


def scaled(x, out, C: pl.constexpr):
    pl.store(out, offsets=(0,), value=pl.load(x, offsets=(0,), shape=(64,)) * C)


def run(kernel, c=3.0):
    """A launch of a fresh ``scaled`` (no in-memory copy: it goes to the disk cache)."""
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    kernel[(1,)](x, out, C=c)
    np.testing.assert_array_equal(out, x * np.float32(c))


def delta(before):
    return {k: STATS[k] - before[k] for k in STATS}


def entry_dirs(root):
    return [e.path for e in admin.entries() if e.path.startswith(str(root)) and e.kind == "kernel"]


# -- a cache that cannot be written ---------------------------------------------------------
class UnwritableLock:
    """The lock of a cache on a read-only file system: creating its file fails (EROFS)."""

    def __init__(self, path, *args, **kwargs):
        self.path = path

    def acquire(self, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", self.path)

    __enter__ = acquire

    def release(self, *args, **kwargs):
        pass

    def __exit__(self, *exc):
        pass


def test_unwritable_lock_compiles_in_memory_and_warns_once(fresh_cache, monkeypatch):
    """The cache directory and its locks folder exist (an earlier run made them) but the lock
    file cannot be created: each new kernel compiles in memory, with one warning."""
    run(pypto.jit(scaled), 2.0)                      # a writable cache: locks/ exists
    assert os.path.isdir(fresh_cache / "locks")
    monkeypatch.setattr(cache_mod, "FileLock", UnwritableLock)
    monkeypatch.setattr(cache_mod, "_WARNED", set())
    before = dict(STATS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(pypto.jit(scaled), 3.0)
        run(pypto.jit(scaled), 4.0)
        run(pypto.jit(scaled), 2.0)                  # cached before: still read
    assert delta(before)["compiles"] == 2 and delta(before)["disk_hits"] == 1
    ours = [w for w in caught if "cannot write its disk cache" in str(w.message)]
    assert len(ours) == 1 and "Read-only file system" in str(ours[0].message), ours
    assert ours[0].filename == __file__              # at the user's line
    assert len(entry_dirs(fresh_cache)) == 1


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root writes through chmod a-w")
def test_chmod_read_only_cache_compiles_in_memory(fresh_cache):
    run(pypto.jit(scaled), 2.0)
    for dirpath, dirnames, filenames in os.walk(fresh_cache):
        for name in dirnames + filenames:
            os.chmod(os.path.join(dirpath, name), 0o500 if name in dirnames else 0o400)
    os.chmod(fresh_cache, 0o500)
    try:
        before = dict(STATS)
        with pytest.warns(RuntimeWarning, match="cannot write its disk cache"):
            run(pypto.jit(scaled), 5.0)
        assert delta(before)["compiles"] == 1
    finally:
        for dirpath, dirnames, _ in os.walk(fresh_cache):
            for name in dirnames:
                os.chmod(os.path.join(dirpath, name), 0o700)
        os.chmod(fresh_cache, 0o700)


def test_read_only_mount_compiles_in_memory(tmp_path, monkeypatch):
    """A real read-only file system (a tmpfs remounted ro), where this process may mount."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0700", "tmpfs", str(mnt)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        monkeypatch.setenv("PYPTO_CACHE_DIR", str(mnt / "cache"))
        run(pypto.jit(scaled), 2.0)
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        before = dict(STATS)
        with pytest.warns(RuntimeWarning, match="Read-only file system"):
            run(pypto.jit(scaled), 6.0)
        run(pypto.jit(scaled), 2.0)
        assert delta(before)["compiles"] == 1 and delta(before)["disk_hits"] == 1
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


# -- entries that vanish under concurrent pruning ---------------------------------------------
def pruned_by_another_process(path):
    """What ``admin.remove`` in another process does to an entry: rename aside, delete."""
    trash = f"{path}.trash-{uuid.uuid4().hex[:8]}"
    os.rename(path, trash)
    shutil.rmtree(trash)


def test_prune_survives_entries_removed_while_listing(fresh_cache, monkeypatch):
    """Another process prunes each entry between this one's directory walk and its stat of
    the entry's files: this launch's own pruning (PYPTO_CACHE_MAX_BYTES) must not fail it."""
    run(pypto.jit(scaled), 2.0)
    run(pypto.jit(scaled), 3.0)
    assert len(entry_dirs(fresh_cache)) == 2
    real_walk = os.walk

    def racing_walk(top, *args, **kwargs):
        for dirpath, dirnames, filenames in real_walk(top, *args, **kwargs):
            if cache_mod.MANIFEST in filenames and ".trash-" not in dirpath:
                pruned_by_another_process(dirpath)
            yield dirpath, dirnames, filenames

    monkeypatch.setattr(os, "walk", racing_walk)
    monkeypatch.setenv("PYPTO_CACHE_MAX_BYTES", "1")
    before = dict(STATS)
    run(pypto.jit(scaled), 4.0)                     # compiles, stores, prunes: no error
    assert delta(before)["compiles"] == 1
    assert admin.prune(1) == (0, 0)
    monkeypatch.setattr(os, "walk", real_walk)
    assert entry_dirs(fresh_cache) == []


def test_entry_removed_while_read_is_a_miss(fresh_cache, monkeypatch):
    """The manifest is read, then another process prunes the entry before its files are: a
    miss (recompiled), not a corrupt entry and not an error."""
    run(pypto.jit(scaled), 2.0)
    real_read = cache_mod.DiskCache._read_entry

    def racing_read(path, raw, required):
        pruned_by_another_process(path)
        return real_read(path, raw, required)

    monkeypatch.setattr(cache_mod.DiskCache, "_read_entry", staticmethod(racing_read))
    before = dict(STATS)
    run(pypto.jit(scaled), 2.0)
    d = delta(before)
    assert d["compiles"] == 1 and d["corrupt"] == 0 and d["disk_misses"] >= 1, d


def test_unwritable_cache_builds_the_ptoisa_header_privately(fresh_cache, monkeypatch):
    """The pto-isa engine's precompiled header in a cache whose lock files cannot be created:
    built in the process's own directory (no toolchain needed: the build is faked)."""
    import filelock
    from types import SimpleNamespace
    from pypto.backends.ptoisa import engine
    tools = SimpleNamespace(cxx="c++", headers="/nonexistent", identity=lambda: "fake")
    os.makedirs(fresh_cache / "ptoisa-pch", mode=0o700)
    os.chmod(fresh_cache, 0o700)
    built = []

    def fake_run(cmd, what):
        out = cmd[cmd.index("-o") + 1]
        with open(out, "wb") as f:
            f.write(b"pch")
        built.append(out)

    real_lock = filelock.FileLock

    def lock(path, *args, **kwargs):
        if path.startswith(str(fresh_cache)):
            return UnwritableLock(path)
        return real_lock(path, *args, **kwargs)

    monkeypatch.setattr(engine, "_run", fake_run)
    monkeypatch.setattr(filelock, "FileLock", lock)
    monkeypatch.setattr(cache_mod, "_WARNED", set())
    with pytest.warns(RuntimeWarning, match="cannot write its disk cache"):
        path = engine.precompiled_header(tools)
    assert not path.startswith(str(fresh_cache)) and open(path, "rb").read() == b"pch"
    assert engine.precompiled_header(tools) == path and len(built) == 1


def test_each_checkout_has_its_own_ptoisa_header(fresh_cache, monkeypatch, tmp_path):
    """clang's PCH names the prelude it was built from: a PCH shared by two checkouts of the
    same prelude failed to load ('malformed or corrupted AST file') once the other checkout
    was deleted, so the prelude's path is part of the PCH's key."""
    import shutil
    from types import SimpleNamespace
    from pypto.backends.ptoisa import engine
    tools = SimpleNamespace(cxx="c++", headers="/nonexistent", identity=lambda: "fake")
    other = tmp_path / "other-checkout" / "prelude.hpp"
    other.parent.mkdir()
    shutil.copy(engine.PRELUDE, other)
    here = engine.pch_path(tools)
    monkeypatch.setattr(engine, "PRELUDE", str(other))
    assert engine.pch_path(tools) != here

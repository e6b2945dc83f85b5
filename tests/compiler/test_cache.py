"""The kernel cache: specialisation in memory, the on-disk cache across processes, concurrent
compiles, corrupt entries, the key's environment and a cache directory that cannot be created.

Counters are read from ``pypto.cache_stats`` as differences around the code under test. Every
test that counts compiles builds a fresh ``JITFunction`` around a plain module-level function
(the in-memory table belongs to the JITFunction object) and uses its own cache directory
(``fresh_cache``), so no test sees kernels compiled by another.

Arrays are allocated 64-byte aligned: tensors are specialised on 32-byte alignment, and numpy's
heap only guarantees 16, so plain ``np.arange`` could land on either side from one process to
the next (it depends, e.g., on whether stdout is a pipe) and change the cache key.
"""
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.cache import STATS
from tests.quick import quick_cases

N = 4096
BLOCK = 1024
STAGES = {"tile_ir.txt", "pto.txt", "llir.txt", "kernel.o", "metadata.json", "manifest.json"}


def add(x, y, out, n, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    b = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a + b)


# -- helpers --------------------------------------------------------------------------------
def aligned(values, align=64):
    """A copy of ``values`` whose data starts on an ``align``-byte boundary."""
    values = np.ascontiguousarray(values)
    buf = np.empty(values.nbytes + align, dtype=np.uint8)
    off = (-buf.ctypes.data) % align
    arr = buf[off:off + values.nbytes].view(values.dtype).reshape(values.shape)
    arr[...] = values
    return arr


def inputs(size=N, dtype=np.float32):
    x = aligned(np.arange(size, dtype=dtype) % 97)
    y = aligned(np.full(size, 2.5, dtype=dtype))
    return x, y


def launch(kernel, x, y, n=None, block=BLOCK):
    """Run the add kernel and check its result."""
    out = aligned(np.zeros_like(x))
    kernel[(pl.cdiv(x.size, block),)](x, y, out, x.size if n is None else n, BLOCK=block)
    np.testing.assert_array_equal(out, x + y)


class Stats:
    """Differences of ``pypto.cache_stats`` since construction (or the last ``reset``)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.base = dict(STATS)

    def delta(self):
        return {k: STATS[k] - self.base[k] for k in STATS}

    def __getitem__(self, key):
        return STATS[key] - self.base[key]


def entries(cache_dir):
    """Published entry directories (named by a 64-hex-digit key) under ``cache_dir``."""
    return sorted(p for p in glob.glob(os.path.join(str(cache_dir), "*", "*"))
                  if re.fullmatch(r"[0-9a-f]{64}", os.path.basename(p)) and os.path.isdir(p))


def assert_entry_valid(path):
    """Every stage present, and the manifest lists exactly the files with their digests."""
    names = set(os.listdir(path))
    assert STAGES <= names, f"missing stages: {sorted(STAGES - names)}"
    with open(os.path.join(path, "manifest.json")) as f:
        manifest = json.load(f)
    assert set(manifest["files"]) == names - {"manifest.json"}
    for name, digest in manifest["files"].items():
        with open(os.path.join(path, name), "rb") as f:
            data = f.read()
        assert data, f"{name} is empty"
        assert hashlib.sha256(data).hexdigest() == digest, f"{name} does not match its digest"


def leftovers(cache_dir):
    """Temporary or trash directories left anywhere in the cache."""
    found = []
    for dirpath, dirnames, filenames in os.walk(str(cache_dir)):
        found += [n for n in dirnames + filenames if n.startswith(".tmp-") or ".trash-" in n]
    return found


SCRIPT = '''
import json, os, sys, time
import numpy as np
import pypto
import pypto.language as pl


@pypto.jit
def add_kernel(x, y, out, n, BLOCK: pl.constexpr):
    pid = pl.program_id(0)
    a = pl.load(x, offsets=(pid * BLOCK,), shape=(BLOCK,))
    b = pl.load(y, offsets=(pid * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(pid * BLOCK,), value=a + b)


def aligned(values, align=64):
    buf = np.empty(values.nbytes + align, dtype=np.uint8)
    off = (-buf.ctypes.data) % align
    arr = buf[off:off + values.nbytes].view(values.dtype)
    arr[...] = values
    return arr


barrier = os.environ.get("TEST_BARRIER")     # "dir:count": start together with the others
if barrier:
    bdir, count = barrier.rsplit(":", 1)
    open(os.path.join(bdir, "ready-%d" % os.getpid()), "w").close()
    deadline = time.time() + 30
    while len(os.listdir(bdir)) < int(count) and time.time() < deadline:
        time.sleep(0.002)

n = 4096
x = aligned(np.arange(n, dtype=np.float32) % 97)
y = aligned(np.full(n, 2.5, dtype=np.float32))
out = aligned(np.zeros(n, dtype=np.float32))
add_kernel[(pl.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
print(json.dumps({"stats": dict(pypto.cache_stats), "ok": bool(np.array_equal(out, x + y))}))
'''


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "kern.py"
    path.write_text(textwrap.dedent(SCRIPT))
    return str(path)


def child_env(cache_dir, **extra):
    env = dict(os.environ)
    env.pop("PYPTO_LOG", None)
    env.pop("PYPTO_DISABLE_CACHE", None)
    env["PYPTO_CACHE_DIR"] = str(cache_dir)
    env.update(extra)
    return env


def run_script(script, cache_dir, **extra):
    proc = subprocess.run([sys.executable, script], env=child_env(cache_dir, **extra),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ok"], result
    return result["stats"]


# -- specialisation and the in-memory table -------------------------------------------------
def test_same_call_twice_compiles_once(fresh_cache):
    k = pypto.jit(add)
    x, y = inputs()
    s = Stats()
    launch(k, x, y)
    assert s["compiles"] == 1 and s["memory_hits"] == 0
    s.reset()
    launch(k, x, y)
    assert s.delta() == {"compiles": 0, "disk_hits": 0, "memory_hits": 1, "disk_misses": 0,
                         "corrupt": 0}


@pytest.mark.parametrize("change", quick_cases(["shape", "dtype", "constexpr"], "dtype"))
def test_new_specialisation_compiles_again(fresh_cache, change):
    k = pypto.jit(add)
    x, y = inputs()
    launch(k, x, y)
    s = Stats()
    if change == "shape":
        launch(k, *inputs(size=2 * N))
    elif change == "dtype":
        launch(k, *inputs(dtype=np.float16))
    else:
        launch(k, x, y, block=512)
    assert s["compiles"] == 1 and s["memory_hits"] == 0
    assert len(entries(fresh_cache)) == 2
    s.reset()
    launch(k, x, y)                       # the first specialisation is still in memory
    assert s["compiles"] == 0 and s["memory_hits"] == 1


@pytest.mark.heavy
def test_int_specialises_on_one_and_divisibility_by_16(fresh_cache):
    k = pypto.jit(add)
    x, y = inputs()
    launch(k, x, y, n=5)
    s = Stats()
    launch(k, x, y, n=7)                  # same class: neither 1 nor a multiple of 16
    assert s["compiles"] == 0 and s["memory_hits"] == 1
    s.reset()
    launch(k, x, y, n=16)                 # divisible by 16: new specialisation
    assert s["compiles"] == 1
    s.reset()
    launch(k, x, y, n=48)                 # same class as 16
    assert s["compiles"] == 0 and s["memory_hits"] == 1
    s.reset()
    launch(k, x, y, n=1)                  # == 1: new specialisation
    assert s["compiles"] == 1
    assert len(entries(fresh_cache)) == 3


def test_do_not_specialize_keeps_one_kernel(fresh_cache):
    k = pypto.jit(add, do_not_specialize=["n"])
    x, y = inputs()
    launch(k, x, y, n=5)
    s = Stats()
    for n in (7, 16, 1, 4096):
        launch(k, x, y, n=n)
    assert s["compiles"] == 0 and s["memory_hits"] == 4
    assert len(entries(fresh_cache)) == 1


def test_do_not_specialize_rejects_unknown_names():
    with pytest.raises(ValueError, match="nope"):
        pypto.jit(add, do_not_specialize=["nope"])


# -- the disk cache -------------------------------------------------------------------------
def test_entry_holds_every_stage(fresh_cache):
    k = pypto.jit(add)
    x, y = inputs()
    launch(k, x, y)
    [entry] = entries(fresh_cache)
    assert_entry_valid(entry)
    compiled = k.compile(x, y, aligned(np.zeros_like(x)), N, BLOCK=BLOCK)
    for stage in ("tile_ir", "pto", "llir"):
        with open(os.path.join(entry, stage + ".txt")) as f:
            assert f.read() == compiled.asm[stage]
    with open(os.path.join(entry, "kernel.o"), "rb") as f:
        assert f.read() == compiled.asm["obj"]
    with open(os.path.join(entry, "metadata.json")) as f:
        assert json.load(f) == compiled.metadata
    assert leftovers(fresh_cache) == []


def test_new_jit_function_reads_the_disk_cache(fresh_cache):
    x, y = inputs()
    launch(pypto.jit(add), x, y)
    s = Stats()
    launch(pypto.jit(add), x, y)
    assert s["compiles"] == 0 and s["disk_hits"] == 1


def test_new_process_hits_the_disk_cache(fresh_cache, script):
    first = run_script(script, fresh_cache)
    assert first["compiles"] == 1 and first["disk_hits"] == 0
    second = run_script(script, fresh_cache)
    assert second["compiles"] == 0 and second["disk_hits"] == 1
    assert second["corrupt"] == 0
    [entry] = entries(fresh_cache)
    assert_entry_valid(entry)


@pytest.mark.heavy
def test_concurrent_processes_compile_once(fresh_cache, script, tmp_path):
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = child_env(fresh_cache, TEST_BARRIER=f"{barrier}:4")
    procs = [subprocess.Popen([sys.executable, script], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["ok"] for r in results), results
    assert sum(r["stats"]["compiles"] for r in results) == 1, results
    assert sum(r["stats"]["disk_hits"] for r in results) == 3, results
    assert sum(r["stats"]["corrupt"] for r in results) == 0, results
    [entry] = entries(fresh_cache)
    assert_entry_valid(entry)
    assert leftovers(fresh_cache) == []


# -- corrupt entries ------------------------------------------------------------------------
def _damage(entry, how):
    if how == "truncated_object":
        path = os.path.join(entry, "kernel.o")
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
    elif how == "garbage_manifest":
        with open(os.path.join(entry, "manifest.json"), "wb") as f:
            f.write(b"\xff\xfe{{ not json")
    elif how == "manifest_not_an_object":
        with open(os.path.join(entry, "manifest.json"), "w") as f:
            f.write("[1, 2, 3]")
    elif how == "wrong_digest":
        with open(os.path.join(entry, "manifest.json")) as f:
            manifest = json.load(f)
        manifest["files"]["metadata.json"] = "0" * 64
        with open(os.path.join(entry, "manifest.json"), "w") as f:
            json.dump(manifest, f)
    elif how == "flipped_byte":
        path = os.path.join(entry, "llir.txt")
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x01]))
    elif how == "deleted_object":
        os.remove(os.path.join(entry, "kernel.o"))
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("how", quick_cases(
    ["truncated_object", "garbage_manifest", "manifest_not_an_object", "wrong_digest",
     "flipped_byte", "deleted_object"], "truncated_object"))
def test_damaged_entry_is_recompiled(fresh_cache, how):
    x, y = inputs()
    launch(pypto.jit(add), x, y)
    [entry] = entries(fresh_cache)
    _damage(entry, how)
    s = Stats()
    launch(pypto.jit(add), x, y)          # a new JITFunction: nothing in memory
    assert s["compiles"] == 1 and s["disk_hits"] == 0
    if how != "deleted_object":           # see test_deleted_file_counts_as_corrupt
        assert s["corrupt"] == 1
    assert entries(fresh_cache) == [entry]
    assert_entry_valid(entry)
    assert leftovers(fresh_cache) == []
    s.reset()
    launch(pypto.jit(add), x, y)          # and the repaired entry is a hit
    assert s["compiles"] == 0 and s["disk_hits"] == 1 and s["corrupt"] == 0


@pytest.mark.heavy
def test_truncated_object_recovered_by_next_process(fresh_cache, script):
    assert run_script(script, fresh_cache)["compiles"] == 1
    [entry] = entries(fresh_cache)
    _damage(entry, "truncated_object")
    second = run_script(script, fresh_cache)   # run_script checks the results
    assert second["corrupt"] == 1 and second["compiles"] == 1 and second["disk_hits"] == 0
    assert entries(fresh_cache) == [entry]
    assert_entry_valid(entry)
    third = run_script(script, fresh_cache)
    assert third["compiles"] == 0 and third["disk_hits"] == 1 and third["corrupt"] == 0


# -- environment ----------------------------------------------------------------------------
def test_code_changing_environment_changes_the_key(fresh_cache, monkeypatch):
    x, y = inputs()
    monkeypatch.setenv("PTO_OPT_LEVEL", "O1")
    launch(pypto.jit(add), x, y)
    o1 = entries(fresh_cache)
    monkeypatch.setenv("PTO_OPT_LEVEL", "O3")
    s = Stats()
    launch(pypto.jit(add), x, y)
    assert s["compiles"] == 1 and s["disk_hits"] == 0
    both = entries(fresh_cache)
    assert len(o1) == 1 and len(both) == 2
    [o3] = set(both) - set(o1)
    levels = {}
    for e in both:
        with open(os.path.join(e, "metadata.json")) as f:
            levels[e] = json.load(f)["opt_level"]
    assert levels == {o1[0]: "O1", o3: "O3"}


@pytest.mark.heavy
def test_opt_level_change_in_process_recompiles(fresh_cache, monkeypatch):
    """The in-memory table is keyed by the environment too: one JITFunction, two settings."""
    k = pypto.jit(add)
    x, y = inputs()
    monkeypatch.setenv("PTO_OPT_LEVEL", "O1")
    launch(k, x, y)
    monkeypatch.setenv("PTO_OPT_LEVEL", "O3")
    s = Stats()
    launch(k, x, y)
    assert s["compiles"] == 1 and s["memory_hits"] == 0
    monkeypatch.setenv("PTO_OPT_LEVEL", "O1")
    s.reset()
    launch(k, x, y)
    assert s["compiles"] == 0 and s["memory_hits"] == 1


@pytest.mark.heavy
def test_non_code_changing_environment_keeps_the_key(fresh_cache, monkeypatch):
    x, y = inputs()
    monkeypatch.delenv("PYPTO_LOG", raising=False)
    launch(pypto.jit(add), x, y)
    before = entries(fresh_cache)
    monkeypatch.setenv("PYPTO_LOG", "cache,compile")
    monkeypatch.setenv("PYPTO_NUM_THREADS", "1")
    s = Stats()
    launch(pypto.jit(add), x, y)
    assert s["compiles"] == 0 and s["disk_hits"] == 1
    assert entries(fresh_cache) == before


def test_disable_cache_writes_nothing(fresh_cache, monkeypatch):
    monkeypatch.setenv("PYPTO_DISABLE_CACHE", "1")
    x, y = inputs()
    s = Stats()
    launch(pypto.jit(add), x, y)
    launch(pypto.jit(add), x, y)
    assert s["compiles"] == 2 and s["disk_hits"] == 0
    assert not os.path.exists(fresh_cache)


# -- logging --------------------------------------------------------------------------------
@pytest.mark.heavy
def test_recompile_log_names_the_argument(fresh_cache, monkeypatch, capfd):
    monkeypatch.setenv("PYPTO_LOG", "recompile")
    k = pypto.jit(add)
    x, y = inputs()
    launch(k, x, y, n=5)
    launch(k, x, y, n=7)
    assert "[pypto recompile]" not in capfd.readouterr().err   # first compile, then a hit
    launch(k, x, y, n=16)
    lines = [l for l in capfd.readouterr().err.splitlines() if "[pypto recompile]" in l]
    assert len(lines) == 1, lines
    assert re.search(r"\badd\b.*because of n$", lines[0]), lines[0]
    launch(k, *inputs(dtype=np.float16), n=16)
    lines = [l for l in capfd.readouterr().err.splitlines() if "[pypto recompile]" in l]
    assert len(lines) == 1 and lines[0].endswith("because of x, y, out"), lines


def test_recompile_log_is_off_by_default(fresh_cache, monkeypatch, capfd):
    monkeypatch.delenv("PYPTO_LOG", raising=False)
    k = pypto.jit(add)
    x, y = inputs()
    launch(k, x, y, n=5)
    launch(k, x, y, n=16)
    assert "[pypto" not in capfd.readouterr().err


# -- library bugs (each test below fails on the current library; see its docstring) ----------
def test_cache_dir_that_cannot_be_created_still_runs(tmp_path, monkeypatch):
    """PYPTO_CACHE_DIR below a regular file: every mkdir fails. The kernel must still run
    (cache.py promises "a read-only or full disk must not fail a launch"), and a directory
    that does not exist is a miss, not a corrupt entry."""
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(blocker / "cache"))
    x, y = inputs()
    s = Stats()
    launch(pypto.jit(add), x, y)
    assert s["compiles"] == 1 and s["corrupt"] == 0
    assert blocker.read_text() == "not a directory"


@pytest.mark.parametrize("manifest", quick_cases(['{"files": []}', '{"files": null}',
                                                 '{"files": {}}'], '{"files": null}'),
                         ids=["files_list", "files_null", "files_empty"])
def test_structurally_wrong_manifest_is_recompiled(fresh_cache, manifest):
    """A manifest that is valid JSON of the wrong shape, or one that does not list the
    kernel's files, must be a corrupt entry, not a crash (AttributeError from
    ``manifest["files"].items()`` or KeyError 'metadata.json' in ``_kernel_from_files``)."""
    x, y = inputs()
    launch(pypto.jit(add), x, y)
    [entry] = entries(fresh_cache)
    with open(os.path.join(entry, "manifest.json"), "w") as f:
        f.write(manifest)
    s = Stats()
    launch(pypto.jit(add), x, y)
    assert s["compiles"] == 1 and s["corrupt"] == 1 and s["disk_hits"] == 0
    assert_entry_valid(entry)


@pytest.mark.heavy
def test_deleted_file_counts_as_corrupt(fresh_cache):
    """A file listed in the manifest but missing from the entry is an inconsistent entry, yet
    ``DiskCache.get`` turns its FileNotFoundError into a plain miss: ``corrupt`` stays 0 and
    the entry is not discarded until ``put`` overwrites it (the kernel is recompiled either
    way, see test_damaged_entry_is_recompiled[deleted_object])."""
    x, y = inputs()
    launch(pypto.jit(add), x, y)
    [entry] = entries(fresh_cache)
    _damage(entry, "deleted_object")
    s = Stats()
    launch(pypto.jit(add), x, y)
    assert s["compiles"] == 1
    assert s["corrupt"] == 1

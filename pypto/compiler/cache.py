"""Content-addressed on-disk cache of compiled kernels.

An entry is a directory named by the key's hash holding every stage's artifact and a manifest
with their SHA-256 digests, written last. Entries are published atomically: written to a
private temporary directory, then renamed into place. A file lock only keeps two processes from
compiling the same key at once. Anything unreadable or inconsistent is a miss: the entry is
removed and the kernel recompiled, never a crash.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import uuid

from filelock import FileLock

from .. import envs

MANIFEST = "manifest.json"

STATS = {"compiles": 0, "disk_hits": 0, "memory_hits": 0, "disk_misses": 0, "corrupt": 0}


def default_dir() -> str:
    configured = envs.PYPTO_CACHE_DIR.get()
    if configured:
        return configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pypto")


def _log(msg: str) -> None:
    if envs.log_enabled("cache"):
        print(f"[pypto cache] {msg}", file=sys.stderr)


class DiskCache:
    def __init__(self, root: str | None = None):
        self.root = root or default_dir()

    def _entry(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key)

    def lock(self, key: str) -> FileLock | None:
        """The compile lock for ``key``, or None when the cache directory is unusable."""
        try:
            os.makedirs(os.path.join(self.root, "locks"), exist_ok=True)
        except OSError as e:
            _log(f"cache directory {self.root} is unusable: {e}")
            return None
        return FileLock(os.path.join(self.root, "locks", key + ".lock"))

    def get(self, key: str, required=(), record: bool = True) -> dict[str, bytes] | None:
        """The entry's files, or None. ``required`` names files a usable entry must hold;
        ``record=False`` keeps the lookup out of ``STATS`` (which counts kernels)."""
        stats = STATS if record else {}
        path = self._entry(key)
        try:
            with open(os.path.join(path, MANIFEST), "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            _count(stats, "disk_misses")
            return None
        except OSError as e:
            _log(f"cannot read {key}: {e}")
            _count(stats, "disk_misses")
            return None
        try:
            files = self._read_entry(path, raw, required)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            _count(stats, "corrupt")
            _log(f"discarding corrupt entry {key}: {e}")
            self.discard(key)
            return None
        _count(stats, "disk_hits")
        _log(f"hit {key}")
        return files

    @staticmethod
    def _read_entry(path: str, raw: bytes, required) -> dict[str, bytes]:
        listed = json.loads(raw)["files"]
        if not isinstance(listed, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in listed.items()):
            raise ValueError("manifest 'files' is not a mapping of names to digests")
        missing = set(required) - set(listed)
        if missing:
            raise ValueError(f"manifest lacks {sorted(missing)}")
        files = {}
        for name, digest in listed.items():
            if os.path.basename(name) != name:
                raise ValueError(f"manifest names a path outside the entry: {name!r}")
            with open(os.path.join(path, name), "rb") as f:
                data = f.read()
            if hashlib.sha256(data).hexdigest() != digest:
                raise ValueError(f"{name} does not match its digest")
            files[name] = data
        return files

    def put(self, key: str, files: dict[str, bytes]) -> None:
        final = self._entry(key)
        try:
            os.makedirs(os.path.dirname(final), exist_ok=True)
            tmp = tempfile.mkdtemp(prefix=f".tmp-{key[:8]}-", dir=os.path.dirname(final))
            manifest = {"files": {}}
            for name, data in files.items():
                with open(os.path.join(tmp, name), "wb") as f:
                    f.write(data)
                manifest["files"][name] = hashlib.sha256(data).hexdigest()
            with open(os.path.join(tmp, MANIFEST), "w") as f:
                json.dump(manifest, f)
            if os.path.isdir(final):          # a corrupt or concurrent entry: replace it
                self.discard(key)
            try:
                os.rename(tmp, final)
                _log(f"stored {key}")
            except OSError:                    # another process published first
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError as e:                   # a read-only or full disk must not fail a launch
            _log(f"could not store {key}: {e}")

    def discard(self, key: str) -> None:
        path = self._entry(key)
        trash = f"{path}.trash-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(path, trash)
        except OSError:
            return
        shutil.rmtree(trash, ignore_errors=True)


def fetch_or_build(key: str, required, build, record: bool = True) -> dict[str, bytes]:
    """The entry ``key``'s files from the disk cache, else ``build()``'s, stored under a file
    lock so that concurrent processes build a key once. Without a usable cache directory, or
    with ``PYPTO_DISABLE_CACHE``, it just builds. ``record`` as in ``DiskCache.get``."""
    if envs.PYPTO_DISABLE_CACHE.get() not in ("", "0"):
        return build()
    disk = DiskCache()
    lock = disk.lock(key)
    if lock is None:
        return build()
    files = disk.get(key, required, record)
    if files is None:
        with lock:
            files = disk.get(key, required, record)
            if files is None:
                files = build()
                disk.put(key, files)
    return files


def _count(stats: dict, what: str) -> None:
    stats[what] = stats.get(what, 0) + 1


def digest(parts) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()

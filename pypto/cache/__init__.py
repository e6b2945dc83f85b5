"""Content-addressed on-disk cache of compiled kernels.

An entry is a directory named by the key's hash holding every stage's artifact and a manifest
with their SHA-256 digests, written last. Entries are published atomically: written to a
private temporary directory, then renamed into place. A file lock only keeps two processes from
compiling the same key at once. Anything unreadable or inconsistent is a miss: the entry is
removed and the kernel recompiled, never a crash. An entry another process removes while this
one reads it (pruning) is a plain miss; a cache that cannot be written (a read-only mount,
``chmod a-w``) is still read, and new kernels are compiled in memory, with one warning.

What the cache trusts: entries hold object code that PyPTO loads and runs, so only what the
user alone can have written. Its directories are created 0700; a cache directory, entry or
file owned by another user, or writable by group or others, is refused with a warning that
says which and why (the kernel is then compiled in memory, or the entry recompiled), never
read. ``PYPTO_CACHE_DIR`` may point anywhere, a shared ``/tmp`` included: this check is what
keeps another user from planting a kernel there.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import uuid
import warnings

from filelock import FileLock

from .. import envs
from ..errors import user_stacklevel

MANIFEST = "manifest.json"

STATS = {"compiles": 0, "disk_hits": 0, "memory_hits": 0, "disk_misses": 0, "corrupt": 0}


def default_dir() -> str:
    configured = envs.PYPTO_CACHE_DIR.get()
    if configured:
        return configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pypto")


class UntrustedCache(OSError):
    """A cache directory or entry that someone other than the user can have written."""


_WARNED: set = set()


def trust_problem(path: str) -> str | None:
    """Why ``path`` must not be trusted (another owner, writable by group or others), or
    None. (Not checked where the platform has no user ids.)"""
    if not hasattr(os, "getuid"):
        return None
    st = os.stat(path)
    if st.st_uid != os.getuid():
        return f"{path} is owned by user id {st.st_uid}, not by you ({os.getuid()})"
    if st.st_mode & 0o022:
        who = "group and others" if st.st_mode & 0o022 == 0o022 else \
            "its group" if st.st_mode & 0o020 else "others"
        return f"{path} is writable by {who} (mode {st.st_mode & 0o777:o})"
    return None


def check_trusted(*paths: str) -> None:
    """Raise ``UntrustedCache`` for the first of ``paths`` (outermost first) that must not be
    trusted: the one rule for every file PyPTO reads back from its cache and uses."""
    for path in paths:
        problem = trust_problem(path)
        if problem:
            raise UntrustedCache(problem)


def secure_makedirs(path: str) -> None:
    """``path`` as a directory only the user can write: created 0700 if missing; an existing
    one is refused (``UntrustedCache``) if another user owns it or others can write it."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    check_trusted(path)


def warn_untrusted(error: Exception) -> None:
    """Say once per place why the cache is not used there, at the user's line (the call that
    compiled), not at ours."""
    text = str(error)
    if text not in _WARNED:
        _WARNED.add(text)
        warnings.warn(f"PyPTO does not use its disk cache there: {text}. Cached kernels are "
                      "code PyPTO runs, so only a cache that you alone can write is trusted; "
                      "chmod go-w it, or point PYPTO_CACHE_DIR at a directory of your own",
                      RuntimeWarning, stacklevel=user_stacklevel())
    _log(text)


def warn_unwritable(root: str, error: OSError) -> None:
    """Say once per cache directory that new kernels are compiled in memory there: it cannot
    be written (a read-only mount, ``chmod a-w``); its existing entries are still read."""
    if ("unwritable", root) not in _WARNED:
        _WARNED.add(("unwritable", root))
        warnings.warn(f"PyPTO cannot write its disk cache {root} ({error}); new kernels are "
                      "compiled in memory and not kept. Point PYPTO_CACHE_DIR at a writable "
                      "directory to keep them", RuntimeWarning, stacklevel=user_stacklevel())
    _log(f"cache directory {root} is not writable: {error}")


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
            secure_makedirs(self.root)
            secure_makedirs(os.path.join(self.root, "locks"))
        except UntrustedCache as e:
            warn_untrusted(e)
            return None
        except OSError as e:            # a file in the way, no permission: say it once
            _log(f"cache directory {self.root} is unusable: {e}")
            warn_unwritable(self.root, e)
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
            check_trusted(self.root, os.path.dirname(path), path)
            files = self._read_entry(path, raw, required)
        except UntrustedCache as e:
            warn_untrusted(e)
            _count(stats, "disk_misses")
            return None
        except FileNotFoundError as e:
            if not os.path.exists(os.path.join(path, MANIFEST)):   # removed while read: by
                _count(stats, "disk_misses")                       # another process's prune
                _log(f"{key} was removed while it was read: {e}")
                return None
            _count(stats, "corrupt")                 # a file of a present entry is missing
            _log(f"discarding corrupt entry {key}: {e}")
            self.discard(key)
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            _count(stats, "corrupt")
            _log(f"discarding corrupt entry {key}: {e}")
            self.discard(key)
            return None
        _count(stats, "disk_hits")
        _log(f"hit {key}")
        try:
            os.utime(os.path.join(path, MANIFEST))       # last use, for pruning (LRU)
        except OSError:
            pass
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
            file = os.path.join(path, name)
            check_trusted(file)
            with open(file, "rb") as f:
                data = f.read()
            if hashlib.sha256(data).hexdigest() != digest:
                raise ValueError(f"{name} does not match its digest")
            files[name] = data
        return files

    def put(self, key: str, files: dict[str, bytes]) -> None:
        final = self._entry(key)
        try:
            secure_makedirs(self.root)
            secure_makedirs(os.path.dirname(final))
            tmp = tempfile.mkdtemp(prefix=f".tmp-{key[:8]}-", dir=os.path.dirname(final))
            manifest = {"files": {}}
            for name, data in files.items():
                _write_private(os.path.join(tmp, name), data)
                manifest["files"][name] = hashlib.sha256(data).hexdigest()
            _write_private(os.path.join(tmp, MANIFEST), json.dumps(manifest).encode())
            if os.path.isdir(final):          # a corrupt or concurrent entry: replace it
                self.discard(key)
            try:
                os.rename(tmp, final)
                _log(f"stored {key}")
            except OSError:                    # another process published first
                shutil.rmtree(tmp, ignore_errors=True)
        except UntrustedCache as e:
            warn_untrusted(e)
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


def _write_private(path: str, data: bytes) -> None:
    """A new file only the user can read or write (whatever the umask says)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def fetch_or_build(key: str, required, build, record: bool = True,
                   root: str | None = None) -> dict[str, bytes]:
    """The entry ``key``'s files from the disk cache (or the cache folder ``root``), else
    ``build()``'s, stored under a file lock so that concurrent processes build a key once.
    Without a usable cache directory, or with ``PYPTO_DISABLE_CACHE``, it just builds.
    ``record`` as in ``DiskCache.get``."""
    if envs.PYPTO_DISABLE_CACHE.get() not in ("", "0"):
        return build()
    disk = DiskCache(root)
    lock = disk.lock(key)
    if lock is None:
        return build()
    files = disk.get(key, required, record)
    if files is not None:
        return files
    try:
        lock.acquire()
    except OSError as e:           # a read-only cache (mount, chmod): cannot create the lock
        warn_unwritable(disk.root, e)
        return build()
    try:
        files = disk.get(key, required, record)
        if files is None:
            files = build()
            disk.put(key, files)
            _enforce_size_limit()
    finally:
        lock.release()
    return files


def _enforce_size_limit() -> None:
    """``PYPTO_CACHE_MAX_BYTES``: prune least recently used entries after a new one."""
    from . import admin as cache_admin
    try:
        limit = cache_admin.max_bytes()
    except ValueError as e:
        warnings.warn(f"PYPTO_CACHE_MAX_BYTES: {e}", RuntimeWarning,
                      stacklevel=user_stacklevel())
        return
    if limit:
        cache_admin.prune(limit)


def _count(stats: dict, what: str) -> None:
    stats[what] = stats.get(what, 0) + 1


def digest(parts) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()

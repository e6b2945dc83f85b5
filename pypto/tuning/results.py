"""Past sweeps: in memory per process, and on disk beside the kernel cache, so that a new
process does not tune again.

An entry is ``<cache>/autotune/<digest>.json``, the digest covering the kernel's source hash,
the configs, the tuning key (key arguments' values, every tensor's dtype), the target, the
objective and PyPTO's version: any change tunes again. Writes follow the kernel cache's rule:
the file is written under a temporary name in the same directory and renamed into place, so
a reader sees a whole entry or none; an unreadable entry is ignored and rewritten."""
from __future__ import annotations

import json
import os
import tempfile

from .. import envs
from .. import cache as cache_mod


def directory() -> str:
    return os.path.join(cache_mod.default_dir(), "autotune")


def disk_enabled() -> bool:
    return envs.PYPTO_DISABLE_CACHE.get() in ("", "0")


def entry_digest(parts) -> str:
    return cache_mod.digest(parts)


def load(digest: str) -> dict | None:
    """The stored sweep, or None (absent, unreadable, or written by something else)."""
    path = os.path.join(directory(), f"{digest}.json")
    try:
        cache_mod.check_trusted(directory(), path)
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except cache_mod.UntrustedCache as e:
        cache_mod.warn_untrusted(e)
        return None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("digest") == digest else None


def save(digest: str, data: dict) -> None:
    """Store a sweep atomically; a cache directory that cannot be written is not an error
    (the result stays in memory), as for kernels."""
    folder = directory()
    try:
        cache_mod.secure_makedirs(cache_mod.default_dir())
        cache_mod.secure_makedirs(folder)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({**data, "digest": digest}, f, indent=1, sort_keys=True)
        os.replace(tmp, os.path.join(folder, f"{digest}.json"))
    except cache_mod.UntrustedCache as e:
        cache_mod.warn_untrusted(e)
    except OSError:
        pass


def remembered(digest: str, compute, use_disk: bool, valid=lambda data: True):
    """(data, cached): the stored sweep for ``digest`` if there is a valid one, else
    ``compute()``'s, stored. ``compute`` returns a JSON-able dict."""
    if use_disk:
        data = load(digest)
        if data is not None and valid(data):
            return data, True
    data = compute()
    if use_disk:
        save(digest, data)
    return data, False


def memoised(memo: dict, digest: str, compute, valid=lambda data: True):
    """``remembered`` with ``memo`` (this process's sweeps) in front, the disk cache if
    enabled behind: a graph rebuilt in the same process finds its sweeps without a read."""
    data = memo.get(digest)
    if data is not None:
        return data, True
    data, cached = remembered(digest, compute, disk_enabled(), valid)
    memo[digest] = data
    return data, cached

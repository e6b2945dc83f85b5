"""Looking after the disk cache as a whole: its entries (kernels, pto-isa libraries, the host
pool, precompiled headers, autotune results) with size and last use, clearing, and pruning
the least recently used down to a size (``PYPTO_CACHE_MAX_BYTES``, checked after every new
entry). Used by ``pypto cache`` (``pypto/tools/cli.py``) and by ``cache.fetch_or_build``."""
from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass

from .. import envs
from .. import cache

SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.I)


@dataclass
class Entry:
    path: str
    key: str
    kind: str            # kernel, pto-isa, ascend-c, host, pch, autotune
    name: str
    size: int
    used: float          # seconds since the epoch: written, or last read


def root() -> str:
    return cache.default_dir()


def trust():
    """Why the cache directory is not trusted, or None (also None when it does not exist)."""
    try:
        return cache.trust_problem(root())
    except OSError:
        return None


def parse_size(text) -> int:
    """``500M``, ``2G``, ``1.5GiB``, ``4096`` → bytes."""
    match = SIZE.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a size; write it as 500M, 2G or a number of bytes")
    scale = 1024 ** " kmgt".index((match.group(2) or " ").lower())
    return int(float(match.group(1)) * scale)


def max_bytes() -> int | None:
    value = envs.PYPTO_CACHE_MAX_BYTES.get()
    return parse_size(value) if value else None


def entries() -> list:
    """Every entry under the cache directory."""
    top = root()
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and ".trash-" not in d
                       and d != "locks"]
        if cache.MANIFEST in filenames:
            found.append(_vanishing(_dir_entry, dirpath, filenames, top))
            dirnames[:] = []
            continue
        for f in filenames:
            if f.endswith((".json", ".pch")) and not f.startswith("."):
                found.append(_vanishing(_file_entry, os.path.join(dirpath, f)))
    return [e for e in found if e is not None]


def _vanishing(read, *args):
    """``read(*args)``, or None for an entry that another process removed (pruned, cleared,
    discarded) while it was being listed."""
    try:
        return read(*args)
    except FileNotFoundError:
        return None


def _dir_entry(path, filenames, top) -> Entry:
    used = os.path.getmtime(os.path.join(path, cache.MANIFEST))
    size = sum(os.path.getsize(os.path.join(path, f)) for f in filenames)
    name, kind = "?", "kernel"
    if "metadata.json" in filenames:
        try:
            with open(os.path.join(path, "metadata.json")) as f:
                name = json.load(f).get("name", "?")
        except (OSError, ValueError):
            pass
    elif "ascend_c.json" in filenames:         # pypto/ascend_c/library.py
        kind = "ascend-c"
        try:
            with open(os.path.join(path, "ascend_c.json")) as f:
                name = json.load(f).get("name", "?")
        except (OSError, ValueError):
            pass
    elif "kernel.cpp" in filenames:
        kind, name = "pto-isa", "(pto-isa library)"
    elif os.path.relpath(path, top).startswith("host"):
        kind, name = "host", "(host thread pool)"
    return Entry(path, os.path.basename(path), kind, name, size, used)


def _file_entry(path) -> Entry:
    kind = "pch" if path.endswith(".pch") else "autotune"
    name = "(pto-isa headers)" if kind == "pch" else "?"
    if kind == "autotune":
        try:
            with open(path) as f:
                name = json.load(f).get("kernel", "?")
        except (OSError, ValueError):
            pass
    key = os.path.basename(path).rsplit(".", 1)[0]
    return Entry(path, key, kind, name, os.path.getsize(path), os.path.getmtime(path))


def remove(entry: Entry) -> None:
    """Gone atomically: renamed aside first, so a reader sees the entry or nothing."""
    trash = f"{entry.path}.trash-{uuid.uuid4().hex[:8]}"
    try:
        os.rename(entry.path, trash)
    except OSError:
        return
    if os.path.isdir(trash):
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.remove(trash)


def clear() -> int:
    found = entries()
    for e in found:
        remove(e)
    return len(found)


def prune(limit: int) -> tuple[int, int]:
    """Remove least recently used entries until at most ``limit`` bytes remain; returns
    (entries removed, bytes left)."""
    found = sorted(entries(), key=lambda e: e.used)
    total = sum(e.size for e in found)
    removed = 0
    for e in found:
        if total <= limit:
            break
        remove(e)
        total -= e.size
        removed += 1
    return removed, total

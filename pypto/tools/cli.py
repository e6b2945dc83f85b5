"""The ``pypto`` command: look after the kernel cache, print a kernel's compiled stages, profile
a script.

    pypto cache list | info | clear | prune --max-size 500M
    pypto asm FILE.py::kernel [--stage tile_ir|pto|cpp|llir|...] x=f32[1024] n=1000 BLOCK=256
    pypto profile SCRIPT.py [ARGS...] [--html OUT.html] [--trace OUT.json]

``asm`` compiles the kernel for the signature given as arguments (tensors as
``dtype[dims]``, with no data: stand-in arrays of that shape; ints and floats as values), as
``kernel.compile(...)`` would, and prints one stage. ``profile`` runs the script (with its
arguments; ``--html``/``--trace`` are taken out of them, anything after ``--`` is left to
the script) under ``pypto.Profiler``, prints the summary and writes the page or trace.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import runpy
import sys
import time
import traceback

# absolute imports: `python -m pypto.cli` runs this file as pypto.cli
from pypto.cache import admin as cache_admin
from pypto.errors import CompilationError
from pypto.runtime.args import standin
from pypto.runtime.jit import JITFunction
from pypto.tools.profiler import Profiler

STAGES = ("source_ir", "tile_ir", "pto", "cpp", "llir", "llir_opt")
DTYPE_ALIASES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "i8": "int8",
                 "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8", "bool": "bool"}


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, TypeError, LookupError, OSError, CompilationError) as e:
        print(f"pypto {args.command}: {e}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pypto", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("cache", help="the on-disk kernel cache")
    csub = c.add_subparsers(dest="action", required=True)
    csub.add_parser("list", help="every entry: kernel, size, last use").set_defaults(
        run=_cache_list)
    csub.add_parser("info", help="where the cache is, its size and limit").set_defaults(
        run=_cache_info)
    csub.add_parser("clear", help="remove every entry").set_defaults(run=_cache_clear)
    prune = csub.add_parser("prune", help="remove least recently used entries down to a size")
    prune.add_argument("--max-size", required=False, default=None,
                       help="e.g. 500M, 2G (default: PYPTO_CACHE_MAX_BYTES)")
    prune.set_defaults(run=_cache_prune)
    a = sub.add_parser("asm", help="compile a kernel for a signature and print one stage")
    a.add_argument("target", metavar="FILE.py::kernel")
    a.add_argument("signature", nargs="*", metavar="name=value",
                   help="tensors as dtype[dims] (f32[1024], f16[64,128]), ints, floats")
    a.add_argument("--stage", default="pto", choices=STAGES)
    a.set_defaults(run=_asm)
    pr = sub.add_parser("profile", help="run a script under the profiler: print the summary, "
                        "write the HTML page (--html) or Chrome trace (--trace)")
    pr.add_argument("script", metavar="SCRIPT.py")
    pr.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                    help="the script's arguments (--html/--trace among them are pypto's; "
                         "after --, all are the script's)")
    pr.add_argument("--html", metavar="OUT.html", help="write the profile page here")
    pr.add_argument("--trace", metavar="OUT.json", help="write the Chrome trace here")
    pr.set_defaults(run=_profile)
    return p


# -- cache -----------------------------------------------------------------------------------

def _cache_list(args) -> int:
    entries = cache_admin.entries()
    now = time.time()
    print(f"{'key':<14}{'kind':<9}{'kernel':<28}{'size':>10}  last used")
    for e in sorted(entries, key=lambda e: -e.used):
        print(f"{e.key[:12]:<14}{e.kind:<9}{e.name[:27]:<28}{_size(e.size):>10}  "
              f"{_age(now - e.used)} ago")
    print(f"{len(entries)} entries, {_size(sum(e.size for e in entries))}")
    return 0


def _cache_info(args) -> int:
    entries = cache_admin.entries()
    limit = cache_admin.max_bytes()
    print(f"cache directory: {cache_admin.root()}")
    print(f"entries: {len(entries)} ({_size(sum(e.size for e in entries))})")
    print(f"size limit: {_size(limit) if limit else 'none'} (PYPTO_CACHE_MAX_BYTES)")
    problem = cache_admin.trust()
    print(f"trusted: {'yes' if problem is None else 'no: ' + problem}")
    return 0


def _cache_clear(args) -> int:
    removed = cache_admin.clear()
    print(f"removed {removed} entries from {cache_admin.root()}")
    return 0


def _cache_prune(args) -> int:
    limit = cache_admin.parse_size(args.max_size) if args.max_size is not None else \
        cache_admin.max_bytes()
    if limit is None:
        raise ValueError("give --max-size (e.g. 500M) or set PYPTO_CACHE_MAX_BYTES")
    removed, left = cache_admin.prune(limit)
    print(f"removed {removed} least recently used entries; {_size(left)} left "
          f"(limit {_size(limit)})")
    return 0


def _size(n: float) -> str:
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"


def _age(seconds: float) -> str:
    for unit, span in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f} {unit}"
    return f"{seconds:.0f} s"


# -- profile -----------------------------------------------------------------------------------

def _profile(args) -> int:
    """Run the script as ``__main__`` under a profiler; whatever it recorded is written even
    when the script fails (its traceback is printed and the exit status is 1)."""
    outputs, script_args = _output_options(args.args, {"html": args.html, "trace": args.trace})
    if not os.path.isfile(args.script):
        raise OSError(f"no such script: {args.script}")
    status = 0
    saved = sys.argv, list(sys.path)
    sys.argv = [args.script] + script_args
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.script)))
    with Profiler() as prof:
        try:
            runpy.run_path(args.script, run_name="__main__")
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Exception:  # noqa: BLE001 - the script's own error: show it, keep the profile
            traceback.print_exc()
            status = 1
        finally:
            sys.argv, sys.path[:] = saved[0], saved[1]
    print(prof.summary())
    if outputs["html"]:
        print(f"profile page: {prof.export_html(outputs['html'])}")
    if outputs["trace"]:
        print(f"Chrome trace: {prof.export_chrome_trace(outputs['trace'])}")
    return status


def _output_options(argv: list, outputs: dict) -> tuple[dict, list]:
    """Take ``--html PATH`` / ``--trace PATH`` (or ``--html=PATH``) out of the script's
    arguments, up to a ``--``; the rest, in order, are the script's."""
    rest, i = [], 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            rest += argv[i + 1:]
            break
        name = word[2:].partition("=")[0] if word.startswith("--") else None
        if name in outputs:
            if "=" in word:
                outputs[name] = word.partition("=")[2]
            elif i + 1 < len(argv):
                outputs[name] = argv[i + 1]
                i += 1
            else:
                raise ValueError(f"--{name} needs a path")
        else:
            rest.append(word)
        i += 1
    return outputs, rest


# -- asm -------------------------------------------------------------------------------------

def _asm(args) -> int:
    path, _, name = args.target.partition("::")
    if not name or not path.endswith(".py"):
        raise ValueError(f"name the kernel as FILE.py::kernel, got {args.target!r}")
    kernel = _load_kernel(path, name)
    values = dict(_argument(text) for text in args.signature)
    compiled = kernel.compile(**values)
    if args.stage not in compiled.asm:
        raise LookupError(f"stage {args.stage!r} is not available (cpp needs ptoas: "
                          "PYPTO_PTOAS or ptoas on PATH)")
    print(compiled.asm[args.stage].rstrip())
    return 0


def _load_kernel(path: str, name: str):
    if not os.path.isfile(path):
        raise OSError(f"no such file: {path}")
    spec = importlib.util.spec_from_file_location(f"_pypto_asm_{os.getpid()}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    kernel = getattr(module, name, None)
    kernel = getattr(kernel, "fn", kernel) if not isinstance(kernel, JITFunction) else kernel
    if not isinstance(kernel, JITFunction):
        raise LookupError(f"{path} has no @pypto.jit kernel named {name!r}")
    return kernel


_TENSOR = re.compile(r"^([a-z0-9_]+)\[([0-9, ]*)\]$")


def _argument(text: str):
    """``x=f32[64,128]`` → a stand-in array; ``n=1000`` → 1000; ``a=0.5`` → 0.5."""
    name, eq, value = text.partition("=")
    if not eq or not name.isidentifier():
        raise ValueError(f"arguments are name=value, got {text!r}")
    match = _TENSOR.match(value.strip())
    if match:
        dtype = DTYPE_ALIASES.get(match.group(1), match.group(1))
        shape = tuple(int(n) for n in match.group(2).replace(" ", "").split(",") if n)
        return name, standin(shape, dtype)
    for parse in (int, float):
        try:
            return name, parse(value)
        except ValueError:
            pass
    if value in ("True", "False"):
        return name, value == "True"
    raise ValueError(f"argument {name}: {value!r} is not a tensor (dtype[dims], e.g. "
                     "f32[1024]), an int or a float")


if __name__ == "__main__":
    sys.exit(main())

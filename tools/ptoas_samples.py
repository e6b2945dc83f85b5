"""PTOAS's own ``test/samples`` kernels through ``pypto.load_pto``, on both engines.

    python tools/ptoas_samples.py [SAMPLES_DIR] [--only SUBSTRING] [--markdown]

``SAMPLES_DIR`` (or ``PTOAS_SAMPLES``) is a directory holding the samples' ``.pto`` files,
searched recursively: a copy of PTOAS's ``test/samples`` (never commit them), e.g.

    git -C <PTOAS mirror> archive a56b18c3 test/samples | tar -x -C /tmp/ptoas

Each sample is loaded (PyPTO's reader, PTOAS's check, the hazard checker, the native
compile), given random inputs of each parameter's dtype (floats as normal numbers, integers
in [-8, 8), integer scalars 0, i1 scalars true, float scalars 1.5) and run on one block on the native engine
and on the pto-isa engine (the sample's own text lowered by PTOAS, its C++ run by pto-isa's
CPU simulator), each on its own copy of the inputs; every tensor must come out equal within
the dtype's tolerance, and for the samples whose meaning is plain numpy (``NUMPY``: additions,
concatenation, the attention and FFN matmuls) equal to numpy's result too. The table says, per
sample, how far it got, the cycle model's time of its native launch, and why it stopped.

A tool, not a benchmark: nothing is timed; it measures how much of the dialect PyPTO reads
and whether PyPTO's meaning of each instruction is the vendor's. PTO_ORACLE (the packaged
ptoas, pto-isa headers and clang) is needed for the pto-isa column; without it that column
says what is missing.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pypto  # noqa: E402
from pypto.errors import CompilationError  # noqa: E402
from pypto.language import dtypes as dt  # noqa: E402

# (rtol, atol) of one engine against the other, per dtype: a few ulps of each format
TOLERANCE = {"float32": (1e-5, 1e-6), "float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2),
             "float64": (1e-12, 1e-14)}


# samples whose meaning is plain numpy: outputs from the inputs (by parameter name)
NUMPY = {
    "VectorAddition/vadd.pto": lambda a: {"arg2": a["arg0"] + a["arg1"]},
    "Addc/addc.pto": lambda a: {"arg3": a["arg0"] + a["arg1"] + a["arg2"]},
    "Concat/concat-pto-ir.pto": lambda a: {"arg2": np.concatenate([a["arg0"], a["arg1"]], 1)},
    "PyPTOIRParser/orchestration_example_kernel_add.pto":
        lambda a: {"arg2": a["arg0"] + a["arg1"]},
    "PyPTOIRParser/orchestration_example_kernel_mul.pto":
        lambda a: {"arg2": a["arg0"] * a["arg1"]},
    "PyPTOIRParser/orchestration_example_kernel_add_scalar.pto":
        lambda a: {"arg2": a["arg0"] + np.float32(a["arg1"])},
    "PyPTOIRParser/vector_example_dag_kernel_add_scalar.pto":
        lambda a: {"arg2": a["arg0"] + np.float32(a["arg1"])},
    **{f"{d}/{d.lower() if d == 'GQA' else 'flash_attention'}_qk{k}.pto":
       (lambda a: {"scores": a["q"] @ a["kt"]}) for d in ("FlashAttention", "GQA")
       for k in ("", "_splitk")},
    **{f"{d}/{d.lower() if d == 'GQA' else 'flash_attention'}_sv{k}.pto":
       (lambda a: {"out": a["softmax"] @ a["v"]}) for d in ("FlashAttention", "GQA")
       for k in ("", "_splitk")},
    **{f"FFN/ffn_fc1{k}.pto": (lambda a: {"h1_s": a["x"] @ a["w1"], "h2_s": a["x"] @ a["w3"]})
       for k in ("", "_splitk")},
    "FFN/ffn_fc2.pto": lambda a: {"out": a["h_s"] @ a["w2"]},
    "MatmulVectorMix/matmul_vector_mix-pto-new.pto":
        lambda a: {"arg3": a["arg0"] @ a["arg1"] + a["arg2"]},
    "Sync/matmul.pto": lambda a: {"arg0": a["arg1"] @ a["arg2"] + a["arg3"]},   # arg4: true
}


@dataclass
class Row:
    sample: str
    loaded: bool = False
    native: bool = False
    ptoisa: bool = False
    equal: bool = False
    numpy: str = "-"            # "yes"/"no" against NUMPY's reference, "-" without one
    npu_us: float | None = None  # the cycle model's time of the native launch (910B1)
    reason: str = ""


def inputs(kernel, rng) -> dict:
    """Random arrays of each tensor parameter's declared shape and dtype; scalars fixed."""
    params = {p.name: p for p in kernel.program.params}
    values = {}
    for name, kind, _ in kernel.params:
        p = params[name]
        if kind == "tensor":
            values[name] = _strided(_array(p.dtype, tuple(p.dims), rng), p.strides)
        else:          # an i1 flag true (its branch loads what it stores), offsets 0
            values[name] = 1.5 if kind == "float" else int(p.dtype == dt.bool_)
    return values


def _array(dtype: dt.dtype, shape: tuple, rng) -> np.ndarray:
    if dtype == dt.bfloat16:
        import ml_dtypes
        return rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    np_type = dtype.to_numpy()
    if dtype.is_floating:
        return rng.standard_normal(shape).astype(np_type)
    if dtype in (dt.bool_, dt.uint8):
        return rng.integers(0, 2, shape).astype(np_type)
    return rng.integers(-8, 8, shape).astype(np_type)


def _strided(a: np.ndarray, strides: tuple) -> np.ndarray:
    """``a``'s values in an array with the declared element strides (a view of a larger
    buffer when the program reads a window of a wider tensor)."""
    if a.ndim == 0 or all(s is None for s in strides):
        return a
    steps = [s if s is not None else t // a.itemsize for s, t in zip(strides, a.strides)]
    size = 1 + sum((n - 1) * s for n, s in zip(a.shape, steps))
    base = np.zeros(size, a.dtype)
    view = np.lib.stride_tricks.as_strided(base, a.shape, [s * a.itemsize for s in steps])
    view[...] = a
    return view


def close(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal integers; floats within a few ulps of the element or of the tensor's largest
    magnitude (a sum in another order is off by ulps of its partial sums, not of its result)."""
    if a.dtype.kind in "iub":
        return np.array_equal(a, b)
    rtol, atol = TOLERANCE.get(str(a.dtype), (1e-5, 1e-6))
    x, y = a.astype(np.float64), b.astype(np.float64)
    finite = np.isfinite(y)
    scale = float(np.max(np.abs(y[finite]))) if finite.any() else 0.0
    return np.allclose(x, y, rtol=rtol, atol=atol + rtol * scale, equal_nan=True)


def _first_line(e: Exception) -> str:
    if isinstance(e, CompilationError) and e.loc is not None:
        return f"line {e.loc.line}: {e.message.splitlines()[0]}"
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def run_sample(path: str, root: str, seed: int = 0) -> Row:
    row = Row(os.path.relpath(path, root))
    try:
        kernel = pypto.load_pto(path)
    except Exception as e:                  # noqa: BLE001 - the reason is the table's point
        row.reason = _first_line(e)
        return row
    row.loaded = True
    args = inputs(kernel, np.random.default_rng(seed))
    results = {}
    for engine in ("native", "pto-isa"):
        copy = {n: _strided(v.copy(), [t // v.itemsize for t in v.strides])
                if isinstance(v, np.ndarray) else v for n, v in args.items()}
        try:
            kernel.engine = engine
            with pypto.Profiler() as prof:
                kernel[(1,)](**copy)
            if engine == "native":
                row.npu_us = prof.kernels[0].npu_time_ms * 1e3
        except Exception as e:              # noqa: BLE001
            row.reason = row.reason or f"{engine}: {_first_line(e)}"
            continue
        results[engine] = copy
        setattr(row, "native" if engine == "native" else "ptoisa", True)
    if len(results) == 2 and not any(k == "tensor" for _, k, _ in kernel.params):
        row.reason = "no tensor parameters: nothing to compare"
    elif len(results) == 2:
        differ = [n for n, v in results["native"].items() if isinstance(v, np.ndarray)
                  and not close(v, results["pto-isa"][n])]
        row.equal = not differ
        if differ:
            row.reason = f"differ in {', '.join(differ)}"
    reference = NUMPY.get(row.sample.replace(os.sep, "/"))
    if reference is not None and results:
        expected = reference(args)
        row.numpy = "yes" if all(close(got[n], expected[n]) for got in results.values()
                                 for n in expected) else "no"
    return row


def sample_paths(root: str, only: str | None = None) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        found += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".pto")]
    return [p for p in found if only is None or only in p]


def table(rows: list[Row]) -> str:
    width = max([len(r.sample) for r in rows] + [6])
    mark = {True: "yes", False: "no"}
    lines = [f"{'sample':<{width}}  loaded  native  pto-isa  equal  numpy  NPU us  reason"]
    for r in rows:
        lines.append(f"{r.sample:<{width}}  {mark[r.loaded]:<6}  {mark[r.native]:<6}  "
                     f"{mark[r.ptoisa]:<7}  {mark[r.equal]:<5}  {r.numpy:<5}  "
                     f"{_us(r.npu_us):>6}  {r.reason}")
    lines.append(f"{len(rows)} samples: {sum(r.loaded for r in rows)} loaded, "
                 f"{sum(r.native for r in rows)} ran natively, "
                 f"{sum(r.ptoisa for r in rows)} ran on pto-isa, "
                 f"{sum(r.equal for r in rows)} equal on both engines, "
                 f"{sum(r.numpy == 'yes' for r in rows)} of "
                 f"{sum(r.numpy != '-' for r in rows)} with a numpy reference equal to it")
    return "\n".join(lines)


def _us(t: float | None) -> str:
    return "-" if t is None else f"{t:.2f}"


def markdown(rows: list[Row], source: str) -> str:
    """The table as a Markdown page (docs/ptoas_samples.md), reasons cut to their first
    sentence."""
    mark = {True: "yes", False: "no"}
    out = ["# PTOAS's test/samples through pypto.load_pto", "",
           f"Generated by `python tools/ptoas_samples.py --markdown` from {source}. One block "
           "per sample, random inputs; *equal*: the native and pto-isa engines agree within "
           "the dtype's tolerance; *numpy*: both equal numpy's result (`-`: no reference). "
           "*NPU us*: the cycle model's time of the native launch on Ascend910B1. "
           "See docs/pto.md, \"Reading .pto that PyPTO did not print\".", "",
           "| sample | loaded | native | pto-isa | equal | numpy | NPU us | reason |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        reason = re.split(r"(?<=[a-z)])\. |\(pto-isa include", r.reason)[0].replace("|", "\\|")
        out.append(f"| {r.sample} | {mark[r.loaded]} | {mark[r.native]} | {mark[r.ptoisa]} | "
                   f"{mark[r.equal]} | {r.numpy} | {_us(r.npu_us)} | {reason} |")
    out += ["", table(rows).splitlines()[-1] + "."]
    return "\n".join(out) + "\n"


def run_all(root: str, only: str | None = None) -> list[Row]:
    oracle = os.environ.get("PTO_ORACLE")
    if oracle and not os.environ.get("PYPTO_PTOAS"):      # the sample's own text, assembled
        os.environ["PYPTO_PTOAS"] = os.path.join(oracle, "bin", "ptoas")
    return [run_sample(p, root) for p in sample_paths(root, only)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("samples", nargs="?", default=os.environ.get("PTOAS_SAMPLES"),
                   help="directory of PTOAS's test/samples (default: $PTOAS_SAMPLES)")
    p.add_argument("--only", help="run the samples whose path contains this")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = p.parse_args(argv)
    if not args.samples or not os.path.isdir(args.samples):
        p.error("give the samples directory (or set PTOAS_SAMPLES): a copy of PTOAS's "
                "test/samples, e.g. git -C <mirror> archive a56b18c3 test/samples | tar -x")
    rows = run_all(args.samples, args.only)
    print(markdown(rows, "PTOAS a56b18c3's test/samples") if args.markdown else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

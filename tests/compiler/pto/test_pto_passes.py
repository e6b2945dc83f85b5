"""The PTO pass table (pypto/compiler/pto/passes/__init__.py): the passes run in the table's
order with the verifier (pto/verifier.py) after each, PYPTO_DUMP_IR shows them by the table's
names, and a pass that breaks the program is named in the verifier's error."""
import re

import numpy as np
import pytest

import pypto
import pypto.language as pl
from pypto.compiler.ast_to_ir import build_function
from pypto.compiler.ir import Module
from pypto.compiler.passes import run_pipeline
from pypto.compiler.pipeline import build_program
from pypto.compiler.pto import For, Inst, Program, Scalar, Tile
from pypto.compiler.pto.lower import lower_to_pto
from pypto.compiler.pto.passes import PTO_PASSES, SELF_SYNCED_PASSES, run_pto_passes
from pypto.compiler.pto.verifier import verify_program
from pypto.errors import InternalError
from pypto.language import dtypes as dt
from pypto.target import get_target
from pypto.runtime.specialize import spec_key, specialise

TARGET = get_target("ascend910b1")


@pypto.jit
def scale_kernel(x, out, n, BLOCK: pl.constexpr):
    acc = pl.zeros((BLOCK,), dtype=pl.float32)
    for i in pl.range(0, n, num_stages=2):
        acc = acc + pl.load(x, offsets=(i * BLOCK,), shape=(BLOCK,))
    pl.store(out, offsets=(0,), value=acc * 2.0)


def specialised():
    """(the frontend's function, tensor specs) of ``scale_kernel`` on 64 floats."""
    args = (np.zeros(64, np.float32), np.zeros(16, np.float32), 4)
    bound = scale_kernel._bind(args, {"BLOCK": 16})
    spec_args, tensor_specs, _ = specialise(scale_kernel, spec_key(scale_kernel, bound), bound)
    return build_function(scale_kernel.source, spec_args, "scale_kernel"), tensor_specs


def lowered() -> Program:
    fn, tensor_specs = specialised()
    return lower_to_pto(run_pipeline(Module(fn, TARGET)), tensor_specs)


def dumped_stages(capsys, auto_sync: bool) -> list[str]:
    """The stages PYPTO_DUMP_IR shows after the Tile IR's, in order."""
    fn, tensor_specs = specialised()
    build_program(fn, tensor_specs, TARGET, auto_sync, fresh=lambda: specialised()[0])
    stages = re.findall(r"^// ----- after (.+) -----$", capsys.readouterr().err, re.M)
    return stages[stages.index("lowering"):]


def test_the_dump_shows_the_tables_passes_in_order(capsys, monkeypatch):
    monkeypatch.setenv("PYPTO_DUMP_IR", "1")
    assert [name for name, _ in PTO_PASSES] == [
        "fold-empty-windows", "split", "cube-chunks", "split-rows", "group-reduce", "run-ahead",
        "double-buffer", "fold-empty-prefetches", "acc-init", "fillpad", "sync"]
    assert dumped_stages(capsys, True) == ["lowering"] + [name for name, _ in PTO_PASSES]
    assert dumped_stages(capsys, False) == ["lowering"] + [n for n, _ in SELF_SYNCED_PASSES]
    assert not {"sync", "split-rows", "group-reduce", "run-ahead", "cube-chunks"} & \
        set(dict(SELF_SYNCED_PASSES))


def test_each_dump_is_the_programs_pto_text(capsys, monkeypatch):
    monkeypatch.setenv("PYPTO_DUMP_IR", "1")
    dumped_stages(capsys, True)        # drains the Tile IR's dumps too
    fn, tensor_specs = specialised()
    _, program, _ = build_program(fn, tensor_specs, TARGET, fresh=lambda: specialised()[0])
    err = capsys.readouterr().err
    last = err.rsplit("// ----- after sync -----\n", 1)[1]
    assert last.startswith("module attributes") and "pto.set_flag" in last


def undeclared_tile(program: Program) -> Program:
    ghost = Tile("ghost", "vec", dt.float32, 1, 16, 0)
    program.body.insert(0, Inst("texpands", [], [ghost], {"value": 0.0}))
    return program


def scalar_used_before_defined(program: Program) -> Program:
    later = Scalar("later", dt.int64)
    program.body[:0] = [Inst("arith.add", [later, later], [Scalar("sum", dt.int64)]),
                        Inst("arith.constant", [], [later], {"value": 1})]
    return program


@pytest.mark.parametrize("broken, problem", [
    (undeclared_tile, "names tile ghost, which the program does not declare"),
    (scalar_used_before_defined, "uses %later before it is defined"),
])
def test_a_broken_pass_is_named_by_the_verifier(broken, problem):
    passes = PTO_PASSES[:2] + (("broken-pass", broken),) + PTO_PASSES[2:]
    with pytest.raises(InternalError, match="PTO verification failed after broken-pass") as e:
        run_pto_passes(lowered(), passes)
    assert problem in str(e.value)


def summing_loop(yields: int) -> Program:
    """for i in 0..4: acc += i, by hand; the loop yields its first ``yields`` values."""
    i, lb, ub, one, acc, nxt, total = (Scalar(n, dt.int64) for n in
                                       ("i", "lb", "ub", "one", "acc", "next", "total"))
    consts = [Inst("arith.constant", [], [s], {"value": v}) for s, v in ((lb, 0), (ub, 4),
                                                                         (one, 1))]
    loop = For(i, lb, ub, one, [lb], [acc], [total], [Inst("arith.add", [acc, i], [nxt])],
               [nxt][:yields])
    return Program("k", "vector", [], [], consts + [loop], TARGET, {})


def test_loop_results_must_match_its_yields():
    assert verify_program(summing_loop(1), "a test")
    with pytest.raises(InternalError, match=r"after a test:\s+vector part: scf.for %i: "
                                            r".* 0 yields and 1 results"):
        verify_program(summing_loop(0), "a test")


def test_a_program_built_by_the_table_verifies():
    program, host = run_pto_passes(lowered())
    assert verify_program(program, "the end") is program and host is None

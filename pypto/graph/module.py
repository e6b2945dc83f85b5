"""``pypto.compile(graph)`` → ``Module``; ``module.run(ctx, inputs)`` launches its kernels
(and its Ascend C calls, ``ascend_c_node``, in dependency order between them).

Compiling plans the kernels (``plan``), writes each one's source (``codegen``) and compiles it
with the ordinary jit for the placeholders' shapes, so compilation errors and the ``.pto`` text
exist before anything runs. Running checks the inputs by name, shape and dtype, allocates
every intermediate and output with ``pypto.empty`` and launches the kernels in dependency
order: ordinary jit launches, so profilers, the disk cache and ``PYPTO_INTERPRET`` apply as to
any kernel.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from .. import envs
from ..target import get_target
from ..errors import CompilationError, compiler_frames_wanted
from ..runtime.device import Context, Tensor, empty
from ..runtime.specialize import dtype_of
from ..runtime import hooks, pool as runtime
from ..layout import as_array
from ..runtime.args import standin
from .ascend_c_node import AscendCNode, AscendCStep
from .. import language as pl_module
from .kernel_source import kernel_name, kernel_source, make_kernel
from .graph import TensorGraph
from .kernel_node import KernelNode
from .launch_form import fastest
from . import execution, ir_text, npu_model
from .mpmd_run import HostChoice, run as run_tasks
from .npu_model import check_strategy
from .plan import Group, candidate_forms, choose_form, plan_groups

# option -> default. tile_fusion: fuse chains of tile_maps into one kernel (plan.py).
# loop_unroll: grid-stride tile loops run unrolled by two with the next tile's loads issued
# ahead (pl.range(num_stages=2), double buffering). layout_opt: accepted for the seed, no
# effect (see docs/language.md, "Graph API": tensors keep the layout they are given).
# autotune: a kernel of parallel_strategy="auto" nodes is launched in the form the cycle model
# ranks fastest on the target (graph/launch_form.py); off, by plan.choose_form's rule.
OPTIONS = {"tile_fusion": True, "layout_opt": True, "loop_unroll": False, "autotune": True}

# Debug mode: while it is on, tools/debug.py keeps its kernel interpreter here and
# ``Module.run`` calls it (the tools sit above the graph, so the tool hands it down).
DEBUG: list = []


@dataclass(eq=False)
class Kernel:
    """One generated kernel: the nodes it computes, its launch form and grid, the jit
    function and (once compiled) the ``CompiledKernel``."""
    name: str
    group: Group
    form: str
    grid: tuple
    source: str
    jit: object
    params: list
    compiled: object = None
    views: object = None        # a kernel node's (inputs, output) -> kernel arguments
    tuning: object = None       # the TuningReport that chose ``form``, if the tuner did

    def arguments(self, inputs: list, outs: list) -> list:
        """The kernel's arguments for the graph tensors' arrays ``inputs`` and ``outs``."""
        if self.views is None:
            return inputs + outs
        return self.views([as_array(a) for a in inputs], as_array(outs[0]))

    def standins(self) -> list:
        """Arrays with the kernel's argument shapes and dtypes over one element of memory:
        compiling reads only those, so nothing of the tensors' size is allocated."""
        return self.arguments([standin(t.shape, t.dtype) for t in self.params],
                              [standin(self.output.shape, self.output.dtype)])

    @property
    def output(self):
        return self.group.output

    @property
    def outputs(self) -> list:
        return [self.group.output]


def compile(graph, target="ascend910b", output=None, emit_ir=False, options=None,  # noqa: A001
            parallel_strategy="auto"):
    """Compile every tile_map node of ``graph`` for ``target`` into a ``Module``.

    ``output``: a path to write the kernels' ``.pto`` text to. ``emit_ir``: accepted for the
    seed; ``module.tile_graph_ir`` and ``module.pto_instructions`` are always filled (the
    compiler produces them anyway). ``options``: see ``OPTIONS``; unknown keys are errors.
    ``parallel_strategy``: how ``run`` and ``model`` schedule the Execution Graph's tasks
    (``npu_model.STRATEGIES``: "auto", "mpmd", "data_parallel", "pipelined")."""
    if not isinstance(graph, TensorGraph):
        raise TypeError(f"pypto.compile(graph=...) takes a pypto.TensorGraph, got "
                        f"{type(graph).__name__}")
    if not isinstance(target, str):
        raise TypeError(f"pypto.compile(target=...) must be a chip name such as "
                        f"'ascend910b', got {target!r}")
    chip = get_target(target)
    opts = _check_options(options)
    check_strategy(parallel_strategy, "pypto.compile")
    if output is not None and not isinstance(output, (str, os.PathLike)):
        raise TypeError(f"pypto.compile(output=...) must be a file path, got {output!r}")
    if not graph.nodes:
        raise ValueError(f"pypto.compile: graph {graph.name!r} has no tile_map nodes (nor "
                         "call_ascend_c calls)")
    module = Module(graph, chip, opts)
    module.parallel_strategy = parallel_strategy
    module.steps = build_kernels(module, debug=False)
    for step in module.steps:
        if isinstance(step, AscendCStep):
            step.build()            # its C++ errors come out here, like a kernel's
        else:
            _compile_kernel(step)
    if output is not None:
        with open(output, "w") as f:
            f.write(module.pto_instructions)
    return module


def _check_options(options) -> dict:
    if options is None:
        return dict(OPTIONS)
    if not isinstance(options, dict):
        raise TypeError(f"pypto.compile(options=...) must be a dict, got {options!r}")
    unknown = sorted(set(options) - set(OPTIONS), key=str)
    if unknown:
        raise ValueError(f"pypto.compile(options=...): unknown option(s) "
                         f"{', '.join(map(repr, unknown))}; accepted: {', '.join(OPTIONS)}")
    for key, value in options.items():
        if not isinstance(value, bool):
            raise TypeError(f"pypto.compile(options=...): {key!r} must be True or False, got "
                            f"{value!r}")
    return {**OPTIONS, **options}


def build_kernels(module, debug: bool) -> list:
    """The module's launch steps in order (not compiled): generated ``Kernel``s and
    ``AscendCStep``s. ``debug``: one block per tile, so a block's index is its tile's index."""
    graph, chip, opts = module.graph, module.target, module.options
    kernels = []
    for group in plan_groups(module.nodes, fuse=opts["tile_fusion"]):
        if isinstance(group.last, AscendCNode):
            kernels.append(AscendCStep(group.last.name, group.last))
            continue
        if isinstance(group.last, KernelNode):
            kernels.append(_node_kernel(group, chip))
            continue
        kernels.append(_group_kernel(group, kernel_name(graph.name, group), chip, opts,
                                     debug))
    return kernels


def _group_kernel(group: Group, name: str, chip, opts, debug: bool) -> Kernel:
    """The group's kernel in the launch form the tuner ranks fastest among
    ``plan.candidate_forms`` (or ``choose_form``'s, with the tuner off)."""
    cores = chip.cores_for(group.uses_cube)
    forms = candidate_forms(group, cores, debug) if opts["autotune"] else \
        [choose_form(group, cores, debug)]
    kernels = []
    for form, grid in forms:
        source, scope = kernel_source(group, name, form, opts["loop_unroll"])
        jitfn = make_kernel(source, scope, name, chip.name)
        kernels.append(Kernel(name, group, form, grid, source, jitfn, group.external_inputs()))
    if len(kernels) == 1:
        return kernels[0]
    return fastest(kernels, chip)


def _node_kernel(group: Group, chip) -> Kernel:
    """The kernel of a ``KernelNode`` (its source is given, its grid fixed)."""
    node = group.last
    jitfn = make_kernel(node.source, {"pl": pl_module, **node.scope}, node.fn_name, chip.name)
    return Kernel(node.fn_name, group, "kernel", node.grid, node.source, jitfn,
                  group.external_inputs(), views=node.views)


def _compile_kernel(kernel: Kernel) -> None:
    try:
        kernel.compiled = kernel.jit.compile(*kernel.standins())
    except CompilationError as e:
        nodes = ", ".join(n.name for n in kernel.group.nodes)
        error = CompilationError(f"{e.message}\n(in kernel {kernel.name}, generated for "
                                 f"tile_map node(s) {nodes})", e.loc, e.call_chain)
        if not compiler_frames_wanted():
            raise error.with_traceback(None) from None
        raise error from e


class Module:
    """A compiled graph: ``run(ctx, inputs)``, ``kernels``, ``tile_graph_ir``,
    ``pto_instructions``, ``input_names``, ``output_names``."""

    def __init__(self, graph, target, options):
        self.graph = graph
        # what the graph held when compiled (nodes added later belong to the next compile)
        self.placeholders = list(graph.placeholders)
        self.nodes = list(graph.nodes)
        self.outputs = list(graph.outputs)
        self.target = target
        self.options = options
        # numpy's dtype per placeholder: a run compares dtypes with these directly (converting
        # each input's dtype, 3 us, was half of a small graph's run)
        self._np_dtypes = {t.name: t.dtype.to_numpy() for t in self.placeholders + self.outputs}
        self.steps: list = []          # launch order: Kernels and AscendCSteps
        self._debug_kernels = None
        self._execution_graph = None
        self.parallel_strategy = "auto"
        self.last_task_order = None    # ("start" | "end", task) of the last MPMD host run
        self._host_choice = HostChoice()  # what "auto" runs on the host (mpmd_run.py)

    @property
    def kernels(self) -> list[Kernel]:
        """The generated jit kernels, in launch order."""
        return [s for s in self.steps if isinstance(s, Kernel)]

    @property
    def ascend_c_steps(self) -> list[AscendCStep]:
        """The Ascend C calls, in launch order."""
        return [s for s in self.steps if isinstance(s, AscendCStep)]

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.placeholders]

    @property
    def output_names(self) -> list[str]:
        return [t.name for t in self.outputs]

    # -- running ----------------------------------------------------------------------------
    def run(self, ctx=None, inputs=None, *, out=None, parallel_strategy=None):
        """Launch the graph on ``inputs`` ({placeholder name: pypto.Tensor or array}). Returns
        the output as a ``pypto.Tensor``, or a tuple of them in node creation order when the
        graph has several outputs. ``out``: arrays (or one array) of the outputs' shapes and
        dtypes to write the outputs into instead (what ``pypto.register_op`` passes: the
        torch tensors it returns). In debug mode (``pypto.debug.enable()``) the kernels run in
        the reference interpreter, one block per tile. ``parallel_strategy`` (default: the
        module's): "data_parallel" launches the kernels one after another, each over all the
        host threads; "mpmd" and "pipelined" run the Execution Graph's tasks as their inputs
        complete (``mpmd_run``; on the host both share the threads); "auto" times its first
        runs both ways and keeps the faster (``mpmd_run.HostChoice``: results are bitwise
        the same either way). Launches are in order whenever something asks for that (debug
        mode, a profiler, the interpreter, another engine, the sanitizer, one thread)."""
        if isinstance(ctx, dict) and inputs is None:      # module.run({"a": ...})
            ctx, inputs = None, ctx
        if ctx is None:
            ctx = Context()
        if not isinstance(ctx, Context):
            raise TypeError(f"Module.run(ctx=...) takes a pypto.Context, got "
                            f"{type(ctx).__name__}")
        values = self._check_inputs(inputs)
        given = self._check_out(out)
        if hooks.ACTIVE:
            hooks.record_graph(self)
        interpret = DEBUG[-1] if DEBUG else None
        strategy = self.parallel_strategy if parallel_strategy is None else \
            check_strategy(parallel_strategy, "Module.run")
        host = interpret is None and self._tasks_on_host(strategy)
        trial = host and strategy == "auto"
        mode = self._host_choice.next() if trial else strategy
        t0 = time.perf_counter()
        if host and mode != "data_parallel" and self._run_tasks(ctx, values, given):
            if trial:
                self._host_choice.record(mode, time.perf_counter() - t0)
            outputs = tuple(values[id(t)] for t in self.outputs)
            return outputs[0] if len(outputs) == 1 else outputs
        for step in (self._debug() if interpret is not None else self.steps):
            outs = [given.get(id(t)) for t in step.outputs]
            outs = [empty(t.shape, t.dtype, ctx) if o is None else o
                    for t, o in zip(step.outputs, outs)]
            args = [values[id(t)] for t in step.params]
            if isinstance(step, AscendCStep):       # on pto-isa's simulator, also in debug mode
                step.run(args, outs)
            elif interpret is not None:
                interpret(step, step.arguments(args, outs))
            else:
                step.jit[step.grid](*step.arguments(args, outs))
            values.update((id(t), o) for t, o in zip(step.outputs, outs))
        if trial and mode == "data_parallel":
            self._host_choice.record(mode, time.perf_counter() - t0)
        outputs = tuple(values[id(t)] for t in self.outputs)
        return outputs[0] if len(outputs) == 1 else outputs

    __call__ = run

    @property
    def host_strategy(self):
        """What ``parallel_strategy="auto"`` settled on for the host ("data_parallel" or
        "mpmd"), None while its first runs are still timing both."""
        return self._host_choice.choice

    def _tasks_on_host(self, strategy: str) -> bool:
        if strategy == "data_parallel" or len(self.steps) < 2 or \
                runtime.pool().threads < 2:
            return False
        if hooks.ACTIVE or envs.PYPTO_INTERPRET.get() not in ("", "0") or \
                envs.sanitize_mode() or envs.PYPTO_ENGINE.get() not in ("", "native"):
            return False
        return all(k.jit.engine in (None, "native") and not k.jit.sanitize
                   for k in self.kernels)

    def _run_tasks(self, ctx, values: dict, given: dict) -> bool:
        """Every output allocated first, then the Execution Graph run on the host threads;
        False (nothing run) if an array does not match the compiled layouts."""
        produced = dict(values)
        step_args = {}
        for step in self.steps:
            outs = [given.get(id(t)) for t in step.outputs]
            outs = [empty(t.shape, t.dtype, ctx) if o is None else o
                    for t, o in zip(step.outputs, outs)]
            step_args[step] = ([produced[id(t)] for t in step.params], outs)
            produced.update((id(t), o) for t, o in zip(step.outputs, outs))
        log = run_tasks(self, step_args, runtime.pool().threads)
        if log is None:
            return False
        self.last_task_order = [(what, self.execution_graph.tasks[i]) for what, i in log]
        values.update(produced)
        return True

    def _check_inputs(self, inputs) -> dict:
        expected = self.input_names
        if not isinstance(inputs, dict):
            raise TypeError(f"Module.run(inputs=...) must be a dict of the graph's inputs "
                            f"{expected}, got {type(inputs).__name__}")
        missing = [n for n in expected if n not in inputs]
        extra = [n for n in inputs if n not in expected]
        if missing or extra:
            parts = ([f"missing {missing}"] if missing else []) + \
                ([f"unknown {extra}"] if extra else [])
            raise InputNameError(f"Module.run(inputs=...): {'; '.join(parts)}. Graph "
                           f"{self.graph.name!r} expects exactly {expected}")
        values = {}
        for t in self.placeholders:
            given = inputs[t.name]
            arr = as_array(given)
            if arr is None:
                raise TypeError(f"Module.run: input {t.name!r} must be a pypto.Tensor or an "
                                f"array, got {type(given).__name__}")
            if tuple(arr.shape) != t.shape:
                raise ValueError(f"Module.run: input {t.name!r} has shape {tuple(arr.shape)}, "
                                 f"the placeholder has shape {t.shape}")
            if arr.dtype != self._np_dtypes[t.name]:
                try:
                    dtype = dtype_of(arr)
                except TypeError as e:
                    raise TypeError(f"Module.run: input {t.name!r}: {e}") from None
                if dtype != t.dtype:
                    raise TypeError(f"Module.run: input {t.name!r} has dtype {dtype}, the "
                                    f"placeholder has dtype {t.dtype}")
            values[id(t)] = given if isinstance(given, Tensor) else arr
        return values

    def _check_out(self, out) -> dict:
        """{id(graph output): array} for ``run(out=...)``; each array checked like an input."""
        if out is None:
            return {}
        arrays = out if isinstance(out, (tuple, list)) else (out,)
        if len(arrays) != len(self.outputs):
            raise ValueError(f"Module.run(out=...): graph {self.graph.name!r} has "
                             f"{len(self.outputs)} output(s) {self.output_names}, got "
                             f"{len(arrays)} array(s)")
        checked = {}
        for t, given in zip(self.outputs, arrays):
            arr = as_array(given)
            if arr is None or arr.shape != t.shape or (
                    arr.dtype != self._np_dtypes[t.name] and dtype_of(arr) != t.dtype):
                what = type(given).__name__ if arr is None else \
                    f"{dtype_of(arr)}{list(arr.shape)}"
                raise ValueError(f"Module.run(out=...): output {t.name!r} is {t.dtype}"
                                 f"{list(t.shape)}, got {what}")
            if not arr.flags.writeable:
                raise ValueError(f"Module.run(out=...): the array for output {t.name!r} is "
                                 "read-only")
            checked[id(t)] = given if isinstance(given, Tensor) else arr
        return checked

    def _debug(self) -> list:
        if self._debug_kernels is None:
            self._debug_kernels = build_kernels(self, debug=True)
        return self._debug_kernels

    # -- what was built ---------------------------------------------------------------------
    @property
    def pto_instructions(self) -> str:
        """Every kernel's ``.pto`` program, one after another."""
        parts = []
        for k in self.kernels:
            nodes = ", ".join(n.name for n in k.group.nodes)
            parts.append(f"// kernel {k.name}: tile_map node(s) {nodes}; grid {k.grid}\n"
                         f"{k.compiled.asm['pto'].rstrip()}\n")
        return "\n".join(parts)

    @property
    def tile_graph_ir(self) -> str:
        return ir_text.tile_graph_text(self)

    # the four levels: Tensor Graph (what the user wrote), Tile Graph (each node's tiling),
    # Block Graph (the kernels: fused groups, launch forms, grids), Execution Graph (tasks)
    @property
    def tensor_graph_ir(self) -> str:
        return ir_text.tensor_graph_text(self)

    @property
    def block_graph_ir(self) -> str:
        return ir_text.block_graph_text(self)

    @property
    def execution_graph(self):
        """The tile tasks of every step and their data dependencies (``execution.py``)."""
        if self._execution_graph is None:
            self._execution_graph = execution.build(self)
        return self._execution_graph

    @property
    def execution_graph_ir(self) -> str:
        return self.execution_graph.text()

    def model(self, parallel_strategy: str = "auto"):
        """The modelled NPU run of the graph under ``parallel_strategy`` ("auto", "mpmd",
        "data_parallel", "pipelined"; ``npu_model.py``): a ``DagModel`` with ``cycles``,
        ``time_us``, the placed tasks and ``bubbles()``."""
        return npu_model.model(self, parallel_strategy)

    def levels(self) -> str:
        """The four levels, one after another."""
        return "\n".join([self.tensor_graph_ir, self.tile_graph_ir, self.block_graph_ir,
                          self.execution_graph_ir])

    def __repr__(self) -> str:
        return (f"<pypto.Module {self.graph.name!r} for {self.target.name}: "
                f"{len(self.kernels)} kernel(s), {len(self.ascend_c_steps)} Ascend C call(s), "
                f"inputs {self.input_names}, outputs "
                f"{self.output_names}>")


class InputNameError(KeyError):
    """Wrong input names for ``Module.run`` (a KeyError whose message is not quoted)."""

    def __str__(self) -> str:
        return str(self.args[0])


"""``pypto.register_op``: an ``OpSource`` as a ``torch.library`` custom op.

The op is ``torch.ops.<namespace>.<name>`` (namespace "pypto" by default) with its schema
written from the source's parameters, a CPU implementation that allocates the outputs with
torch and runs PyPTO on the tensors' own memory, and a fake implementation from PyPTO's shape
inference, so ``torch.compile(..., fullgraph=True)`` traces through it and
``torch.library.opcheck`` passes. ``backward=`` adds an autograd formula. The seed's bare
spelling ``torch.ops.<name>(x)`` works too: the op is also set as that attribute of
``torch.ops`` when no namespace of that name exists (``alias=False`` turns this off).
"""
from __future__ import annotations

import inspect
import warnings

from ..graph import TileOp
from ..runtime.jit import JITFunction
from . import devices
from .devices import device_of
from .sources import EMPTY, OpSource, call_with, make_source

_REGISTERED: dict = {}          # "namespace::name" -> the torch op (CustomOpDef)
_SOURCES: dict = {}             # "namespace::name" -> its OpSource


def register_op(name, fn, *, outputs=None, grid=None, args=None, tile_size=None,
                backward=None, backward_launch=None, namespace="pypto", alias=True,
                target="ascend910b"):
    """Register ``fn`` (a ``@pypto.tile_op``, a compiled graph, or a ``@pypto.jit`` kernel)
    as the PyTorch operator ``torch.ops.<namespace>.<name>`` and return it (callable).

    For a jit kernel, the launch rule: ``outputs`` maps each output parameter to the input
    it is allocated like (``{"out": "x"}``) or to a callable of the inputs returning
    ``(shape, dtype)``; ``grid`` is a tuple or a callable of the inputs (default: one block
    per core); ``args`` gives the parameters computed rather than passed (constants or
    callables of the inputs, e.g. ``{"n": lambda x: x.numel(), "BLOCK": 1024}``). The op
    takes the remaining parameters, in order: tensors, or scalars where annotated ``int``,
    ``float``, ``bool``. A tile op takes one tensor per tile parameter; ``tile_size`` fixes
    its tiling (default: tried in turn, see ``sources._tile_candidates``).

    ``backward``: a function (or tile op) whose parameters are named after the op's inputs,
    its outputs (``out`` for a tile op) and the incoming gradients (``grad_<output>``, or
    ``grad`` for a single output); it returns one gradient per tensor input (None for
    none). A tile op or jit kernel backward is registered as the op ``<name>_backward``, so
    it runs compiled and traces under torch.compile too; a jit kernel's launch rule is
    ``backward_launch`` (a dict of this function's ``outputs``/``grid``/``args``), and its
    outputs, in order, are the gradients."""
    import torch  # lazy: torch loads on first use, never with pypto
    qualname = _qualified_name(name, namespace)
    if qualname in _REGISTERED:
        raise ValueError(f"register_op: {qualname} is already registered (torch cannot "
                         "replace an operator); pick another name")
    source = make_source(fn, outputs=outputs, grid=grid, args=args, tile_size=tile_size,
                         target=target)
    autograd = (None if backward is None else     # checked before torch holds the name
                _autograd(source, backward, backward_launch, name, namespace, target))
    op = torch.library.custom_op(qualname, _implementation(source), mutates_args=(),
                                 device_types="cpu", schema=schema_of(source))
    op.register_fake(_fake(source))
    for device_type in devices.DEVICE_RUNTIMES:          # e.g. "npu", once a runtime is registered
        op.register_kernel(device_type, _implementation(source))
    if autograd is not None:
        formula, setup = autograd
        op.register_autograd(formula, setup_context=setup)
    _REGISTERED[qualname] = op
    _SOURCES[qualname] = source
    if alias and "::" not in name:
        _set_bare_alias(name, getattr(getattr(torch.ops, namespace), name))
    return op


def registered_ops() -> dict:
    """{"namespace::name": op} for every op ``register_op`` made in this process."""
    return dict(_REGISTERED)


def _qualified_name(name, namespace) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_op(name=...) must be a non-empty string, got {name!r}")
    if "::" in name:
        namespace, name = name.split("::", 1)
    for part, what in ((namespace, "namespace"), (name, "name")):
        if not part.isidentifier():
            raise ValueError(f"register_op: the op's {what} {part!r} must be a Python "
                             "identifier (letters, digits, underscores)")
    return f"{namespace}::{name}"


def schema_of(source: OpSource) -> str:
    """``(Tensor x, int n=4) -> Tensor`` (or ``-> (Tensor, Tensor)``) for ``source``."""
    parts = []
    for p in source.params:
        text = f"{p.kind} {p.name}"
        if p.default is not EMPTY:
            text += f"={p.default!r}" if p.kind != "bool" else f"={p.default}"
        parts.append(text)
    n = len(source.output_names)
    result = "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"
    return f"({', '.join(parts)}) -> {result}"


def _bind(source: OpSource, values) -> dict:
    return {p.name: v for p, v in zip(source.params, values)}


def _implementation(source: OpSource):
    """The op's kernel: outputs allocated by torch on the inputs' device, computed by PyPTO in
    place (on the host: the simulated cores; elsewhere: the device runtime, ``devices``)."""
    import torch  # lazy: torch loads on first use, never with pypto

    def implementation(*values):
        args = _bind(source, values)
        device = next(v.device for v in values if isinstance(v, torch.Tensor))
        outs = [torch.empty(shape, dtype=dtype, device=device)
                for shape, dtype in source.outputs(args)]
        source.run(args, outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    return implementation


def _fake(source: OpSource):
    """The fake (meta) kernel: empty outputs of the shapes PyPTO's shape inference gives."""

    def fake(*values):
        args = _bind(source, values)
        device_of(args, source.name)        # a meta tensor beside a CPU one dispatches here
        like = next(v for v in values if hasattr(v, "new_empty"))
        outs = [like.new_empty(shape, dtype=dtype) for shape, dtype in source.outputs(args)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    return fake


def _backward_op(backward, launch, name, namespace, target):
    """(the function the formula calls, the names it takes) for ``backward``: a tile op or jit
    kernel is registered as the op ``<name>_backward`` (compiled, traceable); a function is
    called as it is."""
    kernel = isinstance(backward, JITFunction) and not isinstance(backward, TileOp)
    if kernel and launch is None:
        raise TypeError(f"register_op({name!r}, backward=...): a @pypto.jit kernel backward "
                        "needs its launch rule: backward_launch={'outputs': {...}, 'grid': "
                        "..., 'args': {...}}, as register_op takes for a kernel")
    if launch is not None and not kernel:
        raise TypeError(f"register_op({name!r}, backward_launch=...) is the launch rule of a "
                        "@pypto.jit kernel backward; backward is "
                        f"{type(backward).__name__}")
    if isinstance(backward, (TileOp, JITFunction)):
        if not isinstance(launch, (dict, type(None))):
            raise TypeError(f"register_op({name!r}, backward_launch=...) must be a dict, got "
                            f"{type(launch).__name__}")
        op = register_op(f"{name}_backward", backward, namespace=namespace, alias=False,
                         target=target, **(launch or {}))
        wanted = [p.name for p in _SOURCES[_qualified_name(f"{name}_backward", namespace)].params]
        return (lambda **values: op(*(values[n] for n in wanted))), wanted
    if callable(backward):
        return backward, list(inspect.signature(backward).parameters)
    raise TypeError(f"register_op({name!r}, backward=...) must be a function, a "
                    f"@pypto.tile_op or a @pypto.jit kernel, got {type(backward).__name__}")


def _autograd(source: OpSource, backward, launch, name, namespace, target):
    """(backward(ctx, *grads), setup_context(ctx, inputs, output)) for ``register_autograd``."""
    backward_fn, wanted = _backward_op(backward, launch, name, namespace, target)
    names = [p.name for p in source.params] + source.output_names
    single = len(source.output_names) == 1
    grads = [f"grad_{o}" for o in source.output_names] + (["grad"] if single else [])
    unknown = [n for n in wanted if n not in names + grads]
    if unknown:
        raise ValueError(f"register_op({name!r}, backward=...): parameters {unknown} name "
                         f"nothing the backward can be given: inputs and outputs {names}, "
                         f"gradients {grads}")
    tensor_inputs = [p.name for p in source.params if p.kind == "Tensor"]

    def setup_context(ctx, inputs, output):
        outputs = output if isinstance(output, tuple) else (output,)
        ctx.names = [p.name for p in source.params]
        ctx.scalars = {p.name: v for p, v in zip(source.params, inputs) if p.kind != "Tensor"}
        ctx.save_for_backward(*(v for p, v in zip(source.params, inputs)
                                if p.kind == "Tensor"), *outputs)

    def formula(ctx, *grad_outputs):
        saved = ctx.saved_tensors
        values = dict(zip(tensor_inputs, saved))
        values.update(ctx.scalars)
        values.update(zip(source.output_names, saved[len(tensor_inputs):]))
        values.update(zip(grads, grad_outputs))
        if single:
            values["grad"] = grad_outputs[0]
        result = call_with(backward_fn, {n: values[n] for n in wanted})
        result = result if isinstance(result, (tuple, list)) else (result,)
        if len(result) != len(tensor_inputs):
            raise ValueError(f"the backward of {name!r} returned {len(result)} gradient(s); "
                             f"the op has {len(tensor_inputs)} tensor input(s) "
                             f"{tensor_inputs}")
        by_name = dict(zip(tensor_inputs, result))
        return tuple(by_name.get(p.name) for p in source.params)

    return formula, setup_context


def _set_bare_alias(name, packet) -> None:
    """``torch.ops.<name>`` → the op, as the seed writes it. ``torch.ops`` makes a namespace
    for any attribute it does not have, so an attribute set on it wins; one that exists
    already (a namespace in use) is left alone, with a warning naming the spelling to use."""
    import torch  # lazy: torch loads on first use, never with pypto
    existing = torch.ops.__dict__.get(name)
    if existing is None or existing is packet or _is_pypto_alias(existing):
        setattr(torch.ops, name, packet)
        return
    warnings.warn(f"torch.ops.{name} is already a torch operator namespace, so the bare "
                  f"spelling torch.ops.{name}(...) cannot name the PyPTO op; call it as "
                  f"torch.ops.{packet._qualified_op_name.replace('::', '.')}(...)",
                  stacklevel=3)


def _is_pypto_alias(value) -> bool:
    return any(getattr(value, "_qualified_op_name", None) == q for q in _REGISTERED)

"""Unrolled loop iterations merged back into one write: one kernel launch instead of many.

The trace unrolls ``pypto.loop``, so a loop that cuts a tensor into windows (view → ops →
assemble) leaves one write per iteration, and each would be a launch of its own. A run of
consecutive writes to one buffer is merged when the iterations are the same computation on
windows that step along one axis ``d``: the written windows tile a range of ``d``, every read
either steps with them (its window on ``d`` moving by its extent) or is the same in every
iteration, and no op combines elements across ``d`` (elementwise ops, reductions over other
axes, batched matmul over ``d``). The merged write computes the whole range at once, which is
what CANN's own compiler makes of such a loop (its loops are runtime loops over one graph).
Runs nested in two loops merge along the inner axis first, then along the outer one.
"""
from __future__ import annotations

from . import ops
from .symbolic import SymTensor, reads
from .tracer import Write


def coalesce(writes: list) -> list:
    """``writes`` with every mergeable run of iterations merged (repeated to a fixed point)."""
    while True:
        merged = _one_pass(writes)
        if len(merged) == len(writes):
            return merged
        writes = merged


def _one_pass(writes):
    out, k = [], 0
    read = {(id(node.attrs["buffer"]), node.attrs["version"])
            for write in writes for node in reads(write.value)}
    while k < len(writes):
        run = _longest_run(writes, k, read)
        merged = _merge(run) if len(run) > 1 else None
        out.append(merged or writes[k])
        k += len(run) if merged else 1
    return out


def window(shape, chain):
    """The absolute (start, stop) per buffer axis a chain of slices reads; None for ints."""
    win = [(0, e) for e in shape]
    for index in chain:
        if len(index) > len(win) or not all(isinstance(i, slice) for i in index):
            return None
        for k, item in enumerate(index):
            a, b = win[k]
            s, e, _ = item.indices(b - a)
            win[k] = (a + s, a + max(s, e))
    return win


def _longest_run(writes, k, read):
    """The longest run of writes from ``k`` that steps along one axis; none of its versions
    but the last is read (``read``: the (buffer, version) pairs some value reads), since the
    merged write makes only the last."""
    first = writes[k]
    base = window(first.buffer.shape, first.chain)
    if base is None:
        return [first]
    for axis in range(len(base)):
        run = [first]
        extent = base[axis][1] - base[axis][0]
        for later in writes[k + 1:]:
            win = window(later.buffer.shape, later.chain) if later.buffer is first.buffer \
                else None
            step = len(run) * extent
            expected = [(a + step, b + step) if d == axis else (a, b)
                        for d, (a, b) in enumerate(base)]
            if win != expected or (id(first.buffer), run[-1].version) in read or \
                    not _same_step(first.value, later.value, axis, len(run),
                                   (first.buffer, extent)):
                break
            run.append(later)
        if len(run) > 1:
            return run
    return [first]


def _same_step(a, b, axis, i, dest) -> bool:
    """Whether tree ``b`` is tree ``a`` ``i`` steps later along ``axis``."""
    if not isinstance(a, SymTensor) or not isinstance(b, SymTensor):
        return a == b and type(a) is type(b)
    if a.op != b.op or a._shape != b._shape or a.ptype != b.ptype or len(a.args) != len(b.args):
        return False
    if a.op == "read":
        return _read_steps(a, b, axis, i, dest)
    if not _independent_along(a, axis) or a.attrs != b.attrs:
        return False
    return all(_same_step(x, y, axis, i, dest) for x, y in zip(a.args, b.args))


def _read_steps(a, b, axis, i, dest) -> bool:
    """A read steps with the writes (same extent on ``axis``) or is the same one-wide read
    in every iteration (it broadcasts along ``axis``)."""
    buf, (dest_buf, dest_extent) = a.attrs["buffer"], dest
    if buf is not b.attrs["buffer"] or buf is dest_buf or \
            a.attrs["version"] != b.attrs["version"]:
        return False
    wa, wb = window(buf.shape, a.attrs["chain"]), window(buf.shape, b.attrs["chain"])
    if wa is None or wb is None or len(wa) != len(a._shape):
        return False
    extent = wa[axis][1] - wa[axis][0]
    if wa == wb:
        return extent == 1
    moved = [(s + i * extent, e + i * extent) if d == axis else (s, e)
             for d, (s, e) in enumerate(wa)]
    return extent == dest_extent and wb == moved


def _independent_along(node, axis) -> bool:
    """Whether ``node`` computes each position of ``axis`` from that position alone."""
    if len(node._shape) <= axis:
        return False
    if node.op in ops.EW:
        return all(not isinstance(x, SymTensor) or len(x._shape) == len(node._shape)
                   for x in node.args)
    if node.op in ops.REDUCE:
        return node.attrs["axis"] != axis and node.attrs["keepdim"]
    if node.op == "matmul":
        return axis < len(node._shape) - 2 and all(len(x._shape) == len(node._shape)
                                                   for x in node.args)
    if node.op == "transpose":
        return axis not in node.attrs["axes"]
    return node.op == "full"


def _merge(run) -> Write:
    first = run[0]
    base = window(first.buffer.shape, first.chain)
    axis = next(d for d, (w0, w1) in enumerate(zip(base, window(first.buffer.shape,
                                                                run[1].chain))) if w0 != w1)
    n = len(run)
    value = _widen(first.value, run[1].value, axis, n)
    start, stop = base[axis]
    base[axis] = (start, start + n * (stop - start))
    if isinstance(value, SymTensor) and value._shape[axis] not in (1, n * (stop - start)):
        return None
    chain = (tuple(slice(a, b) for a, b in base),)
    return Write(first.buffer, chain, value, first.line, run[-1].version)


def _widen(a, b, axis, n):
    """Tree ``a`` over ``n`` iterations along ``axis`` (``b``: the second iteration's tree)."""
    if not isinstance(a, SymTensor):
        return a
    shape = list(a._shape)
    if a.op == "read":
        buf = a.attrs["buffer"]
        win = window(buf.shape, a.attrs["chain"])
        if win == window(buf.shape, b.attrs["chain"]):
            return a
        start, stop = win[axis]
        win[axis] = (start, start + n * (stop - start))
        shape[axis] *= n
        return SymTensor("read", (), shape, a.ptype, buffer=buf,
                         chain=(tuple(slice(s, e) for s, e in win),), version=a.attrs["version"])
    args = [_widen(x, y, axis, n) for x, y in zip(a.args, b.args)]
    if a.op == "full":
        shape[axis] *= n
    else:           # grown as much as the operand that grew most (a broadcast one stays 1)
        shape[axis] *= max((new._shape[axis] // old._shape[axis] for new, old
                            in zip(args, a.args) if isinstance(new, SymTensor)), default=1)
    node = SymTensor(a.op, (), shape, a.ptype, **a.attrs)
    node.args = tuple(args)        # already pinned: keep the versions the iterations read
    return node

"""Readable text for Tile IR, stored as ``asm["tile_ir"]`` and dumped between passes."""
from __future__ import annotations

from .ir import Block, Function, Op, Value


class _Names:
    def __init__(self):
        self.names: dict[int, str] = {}

    def __call__(self, v: Value) -> str:
        if v.id not in self.names:
            base = v.hint if v.hint and v.hint.isidentifier() else ""
            n = len(self.names)
            self.names[v.id] = f"%{base}{'_' if base else ''}{n}"
        return self.names[v.id]


def _attrs(op: Op) -> str:
    attrs = {k: v for k, v in op.attrs.items() if not k.startswith("_")}
    if not attrs:
        return ""
    items = ", ".join(f"{k} = {v}" for k, v in attrs.items())
    return f" {{{items}}}"


def _hints(op: Op) -> str:
    """Host-simulation hints (attributes starting with "_") as a trailing comment."""
    hints = [f"{k[1:]}={v}" for k, v in op.attrs.items() if k.startswith("_")]
    return f"  // {' '.join(hints)}" if hints else ""


def _where(v: Value) -> str:
    return f" @{v.addr}" if v.addr is not None else ""


def _print_block(block: Block, name, indent: int, out: list[str]) -> None:
    pad = "  " * indent
    for op in block.ops:
        operands = ", ".join(name(v) for v in op.operands)
        if op.name == "scf.for":
            iv, *carried = op.blocks[0].args
            lb, ub, step, *inits = op.operands
            res = ", ".join(name(r) for r in op.results)
            head = f"{pad}{res + ' = ' if res else ''}scf.for {name(iv)} = {name(lb)} to " \
                   f"{name(ub)} step {name(step)}"
            if carried:
                pairs = ", ".join(f"{name(a)} = {name(i)}" for a, i in zip(carried, inits))
                types = ", ".join(str(a.type) for a in carried)
                head += f" iter_args({pairs}) -> ({types})"
            out.append(head + " {")
            _print_block(op.blocks[0], name, indent + 1, out)
            out.append(pad + "}")
            continue
        res = ", ".join(name(r) for r in op.results)
        types = ", ".join(f"{r.type}{_where(r)}" for r in op.results)
        lhs = f"{res} = " if res else ""
        rhs = f" : {types}" if types else ""
        line = f"{pad}{lhs}{op.name} {operands}{_attrs(op)}{rhs}".replace("  {", " {")
        if not op.blocks:
            out.append(line + _hints(op))
            continue
        out.append(line + " {")
        for i, block in enumerate(op.blocks):
            if i:
                out.append(pad + "} {")
            if block.args:
                out.append(f"{pad}  ^({', '.join(f'{name(a)}: {a.type}' for a in block.args)}):")
            _print_block(block, name, indent + 1, out)
        out.append(pad + "}")


def print_function(fn: Function) -> str:
    name = _Names()
    params = ", ".join(f"{name(p)}: {p.type}" for p in fn.params)
    out = [f"func @{fn.name}({params}) {{"]
    _print_block(fn.body, name, 1, out)
    out.append("}")
    return "\n".join(out) + "\n"

"""Print a PTO ``Program`` as ``.pto`` text: the PTO-ISA MLIR dialect that ptoas reads.

Scalars and loops are ``arith`` / ``scf``; global memory is ``pto.make_tensor_view`` +
``pto.partition_view``; tiles are ``pto.alloc_tile`` with full ``!pto.tile_buf`` types pinned to
their planned ``addr``; instructions are destination-passing ``pto.<op> ins(...) outs(...)``.
"""
from __future__ import annotations

from .isa import SYNC_OPS
from .program import For, If, Inst, Program, Tile, TensorArg, While, walk_insts

_ARITH = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "min": "min", "max": "max"}
_CMP_I = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_CMP_F = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}


class _Printer:
    def __init__(self, program: Program):
        self.p = program
        self.lines: list[str] = []
        self.consts: dict = {}
        self.const_lines: list[str] = []
        self.n = 0

    def fresh(self, base="t") -> str:
        self.n += 1
        return f"%{base}{self.n}"

    def emit(self, text: str, depth: int) -> None:
        self.lines.append("  " * depth + text)

    def const(self, value, ty, depth) -> str:
        key = (repr(value), ty)      # repr: -0.0 is not 0.0, and nan is one constant
        if key not in self.consts:
            name = f"%c{str(value).replace('-', 'm').replace('.', 'p')}_{ty}"
            self.consts[key] = name
            self.const_lines.append(f"    {name} = arith.constant {value} : {ty}")
        return self.consts[key]

    def ref(self, x) -> str:
        return x if isinstance(x, str) else f"%{x.name}"

    def view(self, t: TensorArg, offsets, tile: Tile, depth) -> tuple[str, str]:
        offs = list(offsets)
        if t.rank == 1:
            offs = [self.const(0, "i64", depth)] + offs
        sizes = f"{tile.rows}, {tile.cols}"
        ty = f"!pto.partition_tensor_view<{tile.rows}x{tile.cols}x{t.dtype.mlir}>"
        name = self.fresh("pv")
        self.emit(f"{name} = pto.partition_view %{t.name}_tv, offsets=["
                  f"{', '.join(self.ref(o) for o in offs)}], sizes=[{sizes}] -> {ty}", depth)
        return name, ty

    def program(self) -> str:
        p = self.p
        funcs = []
        for kind, body in p.parts:
            name = p.name if len(p.parts) == 1 else f"{p.name}_{kind}"
            funcs += self.function(name, kind, body)
        head = f'module attributes {{"pto.device-spec" = "{p.target.device_spec}"}} {{'
        return "\n".join([head] + funcs + ["}"]) + "\n"

    def function(self, name: str, kind: str, body: list) -> list[str]:
        p = self.p
        self.lines, self.consts, self.const_lines, self.n = [], {}, [], 0
        args = []
        for a in p.params:
            if isinstance(a, TensorArg):
                args.append(f"%{a.name}: !pto.ptr<{a.dtype.mlir}>")
                args += [f"%{a.name}_d{i}: i64" for i, d in enumerate(a.dims) if d is None]
                args += [f"%{a.name}_s{i}: i64" for i, s in enumerate(a.strides) if s is None]
            else:
                args.append(f"%{a.name}: {a.dtype.mlir}")
        for a in p.params:
            if isinstance(a, TensorArg):
                dims = [self.const(d, "i64", 2) if d is not None else f"%{a.name}_d{i}"
                        for i, d in enumerate(a.dims)]
                strides = [self.const(s, "i64", 2) if s is not None else f"%{a.name}_s{i}"
                           for i, s in enumerate(a.strides)]
                if a.rank == 1:
                    dims, strides = [self.const(1, "i64", 2)] + dims, \
                        [self.const(0, "i64", 2)] + strides
                self.emit(f"%{a.name}_tv = pto.make_tensor_view %{a.name}, shape=["
                          f"{', '.join(dims)}], strides=[{', '.join(strides)}] : "
                          f"!pto.tensor_view<{'x'.join('?' * len(dims))}x{a.dtype.mlir}>", 2)
        used = tiles_used(body)
        for t in p.tiles:
            if t.name in used:
                addr = self.const(t.addr, "i64", 2)
                self.emit(f"%{t.name} = pto.alloc_tile addr = {addr} : {t.type_text()}", 2)
        self.body(body, 2)
        self.emit("return", 2)
        head = (f"  func.func @{name}({', '.join(args)}) attributes "
                f"{{pto.kernel_kind = #pto.kernel_kind<{kind}>}} {{")
        return [head] + self.const_lines + self.lines + ["  }"]

    def body(self, insts, depth) -> None:
        for inst in insts:
            if isinstance(inst, For):
                self.loop(inst, depth)
            elif isinstance(inst, If):
                self.branch(inst, depth)
            elif isinstance(inst, While):
                self.while_loop(inst, depth)
            else:
                self.inst(inst, depth)

    def _results(self, results) -> str:
        return f"{', '.join(f'%{r.name}' for r in results)} = " if results else ""

    def _yield(self, values, depth) -> None:
        if values:
            self.emit(f"scf.yield {', '.join(self.ref(v) for v in values)} : "
                      f"{', '.join(v.dtype.mlir for v in values)}", depth)

    def branch(self, node: If, depth) -> None:
        types = f" -> ({', '.join(r.dtype.mlir for r in node.results)})" if node.results else ""
        self.emit(f"{self._results(node.results)}scf.if {self.ref(node.cond)}{types} {{", depth)
        self.body(node.then_body, depth + 1)
        self._yield(node.then_yields, depth + 1)
        self.emit("} else {", depth)
        self.body(node.else_body, depth + 1)
        self._yield(node.else_yields, depth + 1)
        self.emit("}", depth)

    def while_loop(self, node: While, depth) -> None:
        pairs = ", ".join(f"%{a.name} = {self.ref(i)}" for a, i in zip(node.before_args,
                                                                       node.inits))
        types = ", ".join(a.dtype.mlir for a in node.before_args)
        self.emit(f"{self._results(node.results)}scf.while ({pairs}) : ({types}) -> ({types}) {{",
                  depth)
        self.body(node.before_body, depth + 1)
        fwd = ", ".join(self.ref(v) for v in node.forwarded)
        self.emit(f"scf.condition({self.ref(node.cond)}) {fwd}"
                  f"{' : ' + types if node.forwarded else ''}", depth + 1)
        args = ", ".join(f"%{a.name}: {a.dtype.mlir}" for a in node.after_args)
        self.emit(f"}} do {{\n{'  ' * (depth + 1)}^bb0({args}):", depth)
        self.body(node.after_body, depth + 1)
        self._yield(node.yields, depth + 1)
        self.emit("}", depth)

    def loop(self, f: For, depth) -> None:
        head = f"scf.for %{f.iv.name} = {self.ref(f.lb)} to {self.ref(f.ub)} step {self.ref(f.step)}"
        if f.iter_args:
            pairs = ", ".join(f"%{a.name} = {self.ref(i)}" for a, i in zip(f.iter_args, f.inits))
            types = ", ".join(a.dtype.mlir for a in f.iter_args)
            res = ", ".join(f"%{r.name}" for r in f.results)
            head = f"{res} = {head} iter_args({pairs}) -> ({types})"
        self.emit(head + " : i64 {", depth)
        self.body(f.body, depth + 1)
        if f.yields:
            self.emit(f"scf.yield {', '.join(self.ref(y) for y in f.yields)} : "
                      f"{', '.join(y.dtype.mlir for y in f.yields)}", depth + 1)
        self.emit("}", depth)

    def inst(self, i: Inst, depth) -> None:
        op = i.op
        if op.startswith("arith.") or op in ("pto.program_id", "pto.num_programs", "tensor.dim"):
            self.scalar_inst(i, depth)
            return
        if op in SYNC_OPS:
            self.emit(sync_text(i), depth)
            return
        if op == "tload":
            tensor, *offs = i.ins
            pv, ty = self.view(tensor, offs, i.outs[0], depth)
            self.emit(f"pto.tload ins({pv} : {ty}) outs(%{i.outs[0].name} : "
                      f"{i.outs[0].type_text()}) {{pad_value = {i.attrs['pad']}}}", depth)
            return
        if op == "tstore":
            tensor, *offs = i.outs
            pv, ty = self.view(tensor, offs, i.ins[0], depth)
            self.emit(f"pto.tstore ins(%{i.ins[0].name} : {i.ins[0].type_text()}) "
                      f"outs({pv} : {ty}){_attrs(i.attrs)}", depth)
            return
        if op == "texpands" and not i.ins:
            tile = i.outs[0]
            value = i.attrs["value"]
            c = self.const(float(value) if tile.dtype.is_floating else int(value),
                           tile.dtype.mlir, depth)
            self.emit(f"pto.texpands ins({c} : {tile.dtype.mlir}) outs(%{tile.name} : "
                      f"{tile.type_text()})", depth)
            return
        ins = ", ".join(self.ref(x) for x in i.ins)
        tys = ", ".join(x.type_text() if isinstance(x, Tile) else x.dtype.mlir for x in i.ins)
        outs = ", ".join(f"{self.ref(x)} : {x.type_text()}" for x in i.outs)
        attrs = dict(i.attrs)
        src = i.ins[0].dtype if i.ins else None
        if op == "tcvt" and "rmode" not in attrs and src.is_floating and \
                not i.outs[0].dtype.is_floating:
            attrs["rmode"] = "trunc"    # float → int truncates (an explicit trunc is the same)
        self.emit(f"pto.{op} ins({ins} : {tys}) outs({outs}){_attrs(attrs)}", depth)

    def scalar_inst(self, i: Inst, depth) -> None:
        res = i.outs[0]
        r = self.ref(res)
        ty = res.dtype.mlir
        name = i.op.split(".", 1)[1]
        if i.op == "pto.program_id":
            self.emit(f"{r} = pto.get_block_idx {{dim = {i.attrs['axis']}}} : i64", depth)
        elif i.op == "pto.num_programs":
            self.emit(f"{r} = pto.get_block_num {{dim = {i.attrs['axis']}}} : i64", depth)
        elif i.op == "tensor.dim":
            t = i.ins[0]
            axis = i.attrs["axis"]
            src = (self.const(t.dims[axis], "i64", depth) if t.dims[axis] is not None
                   else f"%{t.name}_d{axis}")
            self.emit(f"{r} = arith.addi {src}, {self.const(0, 'i64', depth)} : i64", depth)
        elif name == "constant":
            self.emit(f"{r} = arith.constant {i.attrs['value']} : {ty}", depth)
        elif name == "cast":
            src = i.ins[0]
            self.emit(f"{r} = {_cast_op(src.dtype, res.dtype)} {self.ref(src)} : "
                      f"{src.dtype.mlir} to {ty}", depth)
        elif name == "select":
            c, a, b = (self.ref(x) for x in i.ins)
            self.emit(f"{r} = arith.select {c}, {a}, {b} : {ty}", depth)
        elif name == "cmp":
            a, b = i.ins
            if a.dtype.is_floating:
                self.emit(f"{r} = arith.cmpf {_CMP_F[i.attrs['pred']]}, {self.ref(a)}, "
                          f"{self.ref(b)} : {a.dtype.mlir}", depth)
            else:
                self.emit(f"{r} = arith.cmpi {_CMP_I[i.attrs['pred']]}, {self.ref(a)}, "
                          f"{self.ref(b)} : {a.dtype.mlir}", depth)
        else:
            a, b = (self.ref(x) for x in i.ins)
            if res.dtype.is_floating:
                mnemonic = {"min": "minimumf", "max": "maximumf"}.get(name, name + "f")
                self.emit(f"{r} = arith.{mnemonic} {a}, {b} : {ty}", depth)
            elif name == "floordiv":
                self.emit(f"{r} = arith.floordivsi {a}, {b} : {ty}", depth)
            elif name == "mod":   # Python's modulo: the remainder takes the divisor's sign
                q = self.fresh("q")
                m = self.fresh("m")
                self.emit(f"{q} = arith.floordivsi {a}, {b} : {ty}", depth)
                self.emit(f"{m} = arith.muli {q}, {b} : {ty}", depth)
                self.emit(f"{r} = arith.subi {a}, {m} : {ty}", depth)
            else:
                mnemonic = {"min": "minsi", "max": "maxsi", "div": "divsi", "shr": "shrsi",
                            "shl": "shli", "and": "andi", "or": "ori",
                            "xor": "xori"}.get(name, name + "i")
                self.emit(f"{r} = arith.{mnemonic} {a}, {b} : {ty}", depth)


_ATTR_SPELLING = {
    "rmode": lambda v: f"#pto<round_mode {v}>",
    "cmp": lambda v: f"#pto<cmp_mode {v}>",
    "atomic": lambda v: f"#pto<atomic_type {v}>",
}


def _attrs(attrs: dict) -> str:
    attrs = {k: v for k, v in attrs.items() if not k.startswith("_")}   # host-only hints
    if not attrs:
        return ""
    parts = [f"{k} = {_ATTR_SPELLING.get(k, str)(v)}" for k, v in attrs.items()]
    return " {" + ", ".join(parts) + "}"


def sync_text(i: Inst) -> str:
    """``pto.set_flag[<PIPE_MTE2>, <PIPE_V>, <EVENT_ID0>]``, ``pto.barrier #pto.pipe<PIPE_V>``,
    ``pto.syncall``, and the cross-core flags ``pto.sync.set[<PIPE_FIX>, 3]`` /
    ``pto.sync.wait[<PIPE_MTE2>, 3]`` (with ``{count = n}`` when waiting for several)."""
    a = i.attrs
    if i.op in ("set_flag", "wait_flag"):
        return f"pto.{i.op}[<PIPE_{a['src']}>, <PIPE_{a['dst']}>, <EVENT_ID{a['event']}>]"
    if i.op == "barrier":
        return f"pto.barrier #pto.pipe<PIPE_{a['pipe']}>"
    if i.op == "syncall":
        return "pto.syncall"
    count = f" {{count = {a['count']}}}" if a.get("count", 1) != 1 else ""
    return f"pto.{i.op}[<PIPE_{a['pipe']}>, {a['flag']}]{count}"


def _cast_op(src, dst) -> str:
    if src.is_floating and dst.is_floating:
        return "arith.extf" if dst.bits > src.bits else "arith.truncf"
    if src.is_floating:
        return "arith.fptosi"
    if dst.is_floating:
        return "arith.sitofp"
    return "arith.extsi" if dst.bits > src.bits else "arith.trunci"


def tiles_used(body: list) -> set[str]:
    """Names of the tiles that the instructions of ``body`` (nested ones included) touch."""
    return {x.name for inst in walk_insts(body) if isinstance(inst, Inst)
            for x in inst.ins + inst.outs if isinstance(x, Tile)}


def print_program(program: Program) -> str:
    return _Printer(program).program()

"""The declared signature of an Ascend C kernel, read from its ``__global__`` function.

A kernel written against pto-isa is ``__global__ AICORE void name(__gm__ T *p, ..., int32_t n)``
(the form ``ptoas`` emits and pto-isa's own kernels use). Its pointer parameters are the
tensors, its other parameters scalars. The element type of a typed pointer is the tensor's
dtype; an untyped one (``__gm__ void *``, ``GM_ADDR``) needs ``dtypes=`` from the declaration.
pto-isa marks roles with ``__in__``/``__out__`` (tests/cpu/st/testcase/tadd): they are read
here too, so such a kernel needs no ``inputs=``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..language import dtypes as dt

# C++ element types -> PyPTO dtypes (pto-isa's names included; half is the chip's fp16)
POINTEE_DTYPES = {
    "float": dt.float32, "float32_t": dt.float32,
    "half": dt.float16, "__fp16": dt.float16, "float16_t": dt.float16, "_Float16": dt.float16,
    "bfloat16_t": dt.bfloat16,
    "int8_t": dt.int8, "uint8_t": dt.uint8, "int16_t": dt.int16, "int32_t": dt.int32,
    "int": dt.int32, "int64_t": dt.int64, "bool": dt.bool_,
}
UNTYPED = ("void", "GM_ADDR")
INT_SCALARS = ("int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t",
               "uint64_t", "int", "unsigned", "unsigned int", "long", "size_t", "bool")
FLOAT_SCALARS = ("float", "double", "half")
_QUALIFIERS = {"__gm__", "const", "volatile", "__restrict__", "__restrict", "__in__", "__out__"}
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


@dataclass(frozen=True)
class Param:
    """One parameter: ``kind`` is "tensor", "int" or "float"; ``dtype`` the pointee's (None
    when untyped); ``role`` "in"/"out" when the source marks it; ``cxx`` the type to cast a
    slot to in the host entry."""
    name: str
    kind: str
    cxx: str
    dtype: object = None
    role: str | None = None
    text: str = ""


@dataclass(frozen=True)
class Signature:
    name: str
    params: tuple
    line: int              # 1-based line of the ``__global__`` function in the source

    @property
    def tensors(self) -> list:
        return [p for p in self.params if p.kind == "tensor"]

    @property
    def scalars(self) -> list:
        return [p for p in self.params if p.kind != "tensor"]

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)


def strip_comments(source: str) -> str:
    """The source with comments blanked (newlines kept, so line numbers stay)."""
    return _COMMENTS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)


def parse(source: str, name: str) -> Signature:
    """The signature of the ``__global__`` function ``name``; ``ValueError`` naming what to
    write when there is none or a parameter cannot be passed from Python."""
    text = strip_comments(source)
    head = re.search(r"__global__\s+(?:\w+\s+)*void\s+" + re.escape(name) + r"\s*\(", text)
    if head is None:
        found = re.findall(r"__global__\s+(?:\w+\s+)*void\s+(\w+)\s*\(", text)
        hint = (f"; the source defines {', '.join(found)}" if found else
                "; it has no __global__ function (write `__global__ AICORE void "
                f"{name}(__gm__ float *x, ...)`)")
        raise ValueError(f"pypto.ascend_c_kernel(name={name!r}): no `__global__ ... void "
                         f"{name}(...)` in the source{hint}")
    start = head.end()
    end = _closing(text, start - 1)
    params = tuple(_param(p.strip(), name) for p in _split(text[start:end]) if p.strip())
    if [p for p in params if p.text == "void"]:
        params = ()
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise ValueError(f"pypto.ascend_c_kernel({name!r}): parameter names repeat: {names}")
    return Signature(name, params, text.count("\n", 0, head.start()) + 1)


def _closing(text: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise ValueError("pypto.ascend_c_kernel: the __global__ function's parameter list is not "
                     "closed")


def _split(params: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in params:
        depth += {"(": 1, "<": 1, ")": -1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur]


def _param(text: str, kernel: str) -> Param:
    if text == "void":
        return Param("", "none", "", text="void")
    words = re.findall(r"[A-Za-z_]\w*|\*|&", text)
    if len(words) < 2 or not re.fullmatch(r"[A-Za-z_]\w*", words[-1]):
        raise ValueError(f"pypto.ascend_c_kernel({kernel!r}): cannot read the parameter "
                         f"`{text}`: write `type name`")
    pname, type_words = words[-1], words[:-1]
    role = "out" if "__out__" in type_words else "in" if "__in__" in type_words else None
    pointer = "*" in type_words or "GM_ADDR" in type_words
    base = " ".join(w for w in type_words if w not in _QUALIFIERS and w not in "*&")
    if "&" in type_words or type_words.count("*") > 1:
        raise ValueError(f"pypto.ascend_c_kernel({kernel!r}): parameter `{text}` cannot be "
                         "passed from Python: a kernel takes GM pointers and scalars")
    if pointer:
        if base in UNTYPED:
            return Param(pname, "tensor", "uint8_t *" if base == "GM_ADDR" else "void *",
                         None, role, text)
        if base not in POINTEE_DTYPES:
            raise ValueError(f"pypto.ascend_c_kernel({kernel!r}): parameter `{text}` points to "
                             f"{base!r}, which is no PyPTO dtype; use one of "
                             f"{', '.join(POINTEE_DTYPES)} (or void with dtypes=)")
        const = "const " if "const" in type_words else ""
        return Param(pname, "tensor", f"{const}{base} *", POINTEE_DTYPES[base], role, text)
    if base in INT_SCALARS:
        return Param(pname, "int", base, None, role, text)
    if base in FLOAT_SCALARS:
        return Param(pname, "float", base, None, role, text)
    raise ValueError(f"pypto.ascend_c_kernel({kernel!r}): scalar parameter `{text}` has type "
                     f"{base!r}; a kernel's scalars are {', '.join(INT_SCALARS)} or "
                     f"{', '.join(FLOAT_SCALARS)}")

"""Checking an Ascend C kernel's declaration against its signature, once, when it is made:
where the source comes from, which pointers are inputs, the declared dtypes, ranks and
scalars. Each mistake is a ``ValueError``/``TypeError`` naming the option and the fix."""
from __future__ import annotations

import inspect
import os

from ..language import dtypes as dt


def read_source(source, name, filename):
    if isinstance(source, os.PathLike):
        path = os.fspath(source)
        with open(path) as f:
            return f.read(), filename or os.path.abspath(path)
    if not isinstance(source, str) or not source.strip():
        raise TypeError(f"pypto.ascend_c_kernel(source=...) must be C++ source text or a path "
                        f"(pathlib.Path) to a .cpp file, got {type(source).__name__}")
    if "\n" not in source and source.endswith((".cpp", ".cc", ".cxx", ".h", ".hpp")) and \
            os.path.isfile(source):
        with open(source) as f:
            return f.read(), filename or os.path.abspath(source)
    return source, filename or f"<ascend_c {name}>"


def roles(signature, inputs, rule) -> tuple[list, list]:
    tensors = [p.name for p in signature.tensors]
    kernel = signature.name
    if inputs is not None:
        if isinstance(inputs, str) or not isinstance(inputs, (list, tuple)) or len(set(inputs)) \
                != len(inputs) or not all(n in tensors for n in inputs):
            raise ValueError(f"pypto.ascend_c_kernel({kernel!r}, inputs=...) must list distinct "
                             f"pointer parameters of {kernel} ({', '.join(tensors)}), got "
                             f"{inputs!r}")
        chosen = list(inputs)
    elif any(p.role for p in signature.tensors):
        chosen = [p.name for p in signature.tensors if p.role != "out"]
    elif callable(rule):
        names = _rule_params(rule)
        if names is None or not all(n in tensors for n in names):
            raise ValueError(
                f"pypto.ascend_c_kernel({kernel!r}): which pointer parameters "
                f"({', '.join(tensors)}) are inputs? Name them with inputs=[...], mark them "
                f"__in__/__out__ in the C++, or name the output rule's parameters after them "
                f"(its parameters are {names})")
        chosen = names
    else:
        count = len(rule) if isinstance(rule, (list, tuple)) else 1
        chosen = tensors[:len(tensors) - count]
    outputs = [n for n in tensors if n not in chosen]
    if not outputs:
        raise ValueError(f"pypto.ascend_c_kernel({kernel!r}): every pointer parameter is an "
                         f"input; a kernel needs at least one output parameter to write")
    return chosen, outputs


def _rule_params(rule):
    try:
        params = list(inspect.signature(rule).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY) for p in params):
        return None
    return [p.name for p in params]


def declared_dtypes(signature, dtypes, inputs) -> dict:
    dtypes = dict(dtypes or {})
    tensors = {p.name: p for p in signature.tensors}
    for n in dtypes:
        if n not in tensors:
            raise ValueError(f"pypto.ascend_c_kernel({signature.name!r}, dtypes=...): {n!r} is "
                             f"no pointer parameter ({', '.join(tensors)})")
    out = {}
    for n, p in tensors.items():
        given = dt.from_any(dtypes[n]) if n in dtypes else None
        if p.dtype is not None and given is not None and given != p.dtype:
            raise ValueError(f"pypto.ascend_c_kernel({signature.name!r}, dtypes=...): {n!r} is "
                             f"`{p.text}` ({p.dtype}), not {given}")
        out[n] = p.dtype or given
        if out[n] is None and n in inputs:
            raise ValueError(f"pypto.ascend_c_kernel({signature.name!r}): input `{p.text}` is "
                             f"untyped; give its dtype with dtypes={{{n!r}: 'float16'}} (say)")
    return out


def declared_ranks(signature, ranks) -> dict:
    ranks = dict(ranks or {})
    names = {p.name for p in signature.tensors}
    for n, r in ranks.items():
        if n not in names or not isinstance(r, int) or r < 1:
            raise ValueError(f"pypto.ascend_c_kernel({signature.name!r}, ranks=...): want "
                             f"{{pointer parameter: rank >= 1}}, got {n!r}: {r!r}")
    return ranks


def declared_scalars(signature, scalars) -> dict:
    scalars = dict(scalars or {})
    names = {p.name for p in signature.scalars}
    unknown = sorted(set(scalars) - names)
    if unknown:
        raise ValueError(f"pypto.ascend_c_kernel({signature.name!r}, scalars=...): "
                         f"{', '.join(unknown)} are no scalar parameters of {signature.name} "
                         f"({', '.join(sorted(names)) or 'none'})")
    return scalars

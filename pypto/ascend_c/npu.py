"""What the NPU target needs to run an Ascend C kernel: its symbol, a host launcher, the launch
(block dim, arguments in the kernel's order) and the bisheng command line that builds it.

Nothing here runs (there is no bisheng or NPU on this host). The command is the one
pto-isa's own NPU demos use (demos/torch_jit/*/jit_util_*.py: ``bisheng -fPIC -shared -xcce
--npu-arch=dav-2201 -O2 -std=c++17 -I<pto-isa>/include kernel.cpp -o lib.so``), and the
launcher is their ``call_kernel``: an ``extern "C"`` function taking the block dim, the stream
and the GM addresses, which launches ``kernel<<<blockDim, nullptr, stream>>>(...)``.
"""
from __future__ import annotations

from dataclasses import dataclass

# --npu-arch per chip family (Ascend 910B is DaVinci 2201, the AIC/AIV "c220" cores)
NPU_ARCH = {"Ascend910B": "dav-2201"}


@dataclass(frozen=True)
class NpuBuild:
    """How the kernel would be built for the NPU: ``command`` (argv of bisheng),
    ``launcher_source`` (C++ to append to the kernel's source), ``launcher`` its symbol."""
    symbol: str
    launcher: str
    command: tuple
    launcher_source: str

    @property
    def command_line(self) -> str:
        return " ".join(self.command)


@dataclass(frozen=True)
class NpuLaunch:
    """One call on the NPU: ``block_dim`` cores, ``arguments`` in the kernel's parameter order
    as (name, role, what) with role "input"/"output"/"scalar" and what a shape and dtype or a
    value; ``call`` the launcher call the host would make."""
    symbol: str
    block_dim: int
    arguments: tuple
    call: str


def arch(target) -> str:
    family = next((f for f in NPU_ARCH if target.device_spec.startswith(f)), None)
    if family is None:
        raise ValueError(f"no bisheng --npu-arch known for {target.device_spec}; known: "
                         f"{', '.join(NPU_ARCH)}")
    return NPU_ARCH[family]


def build(signature, target, headers: str | None, source_path: str) -> NpuBuild:
    """The NPU build of the kernel ``signature`` names (``headers``: pto-isa's include
    directory, or None to leave ``$PTO_ISA_ROOT/include`` in the command)."""
    name = signature.name
    launcher = f"call_{name}"
    params = ", ".join(["uint32_t blockDim", "void *stream"] +
                       [f"uint8_t *{p.name}" if p.kind == "tensor" else f"{p.cxx} {p.name}"
                        for p in signature.params])
    args = ", ".join(f"({_gm(p.cxx)}){p.name}" if p.kind == "tensor" else p.name
                     for p in signature.params)
    source = (f'extern "C" void {launcher}({params})\n{{\n'
              f"    {name}<<<blockDim, nullptr, stream>>>({args});\n}}\n")
    include = headers or "$PTO_ISA_ROOT/include"
    library = f"lib{name}.so"
    command = ("bisheng", "-fPIC", "-shared", "-xcce", f"--npu-arch={arch(target)}", "-O2",
               "-std=c++17", f"-I{include}", source_path, "-o", library)
    return NpuBuild(name, launcher, command, source)


def _gm(cxx: str) -> str:
    return f"__gm__ {cxx}"


def launch(signature, block_dim: int, roles: dict, specs: dict, scalars: dict) -> NpuLaunch:
    """The launch for these arguments (``roles``: param -> "input"/"output", ``specs``:
    param -> TensorSpec, ``scalars``: param -> value)."""
    arguments, shown = [], []
    for p in signature.params:
        if p.kind == "tensor":
            spec = specs[p.name]
            arguments.append((p.name, roles[p.name], f"{spec.dtype}{list(spec.shape)}"))
            shown.append(p.name)
        else:
            arguments.append((p.name, "scalar", scalars[p.name]))
            shown.append(f"{p.name}={scalars[p.name]!r}")
    call = f"call_{signature.name}({block_dim}, stream, {', '.join(shown)})"
    return NpuLaunch(signature.name, block_dim, tuple(arguments), call)

"""The host object code loads wherever MCJIT puts its sections.

RuntimeDyld places an object's code and data sections, and resolves its external symbols, at
whatever addresses the process has free; a 32-bit PC-relative relocation between them aborts
the process ("RuntimeDyldELF ... Assertion `isInt<32>(RealOffset)' failed") once they are more
than 2 GiB apart, which a long run that has loaded torch and many kernels reaches
(benchmarks/board.py aborted so while loading its top-k kernel). The objects are compiled for
the large code model, whose references are 64-bit: this test reads a kernel's ELF relocations
and finds no 32-bit PC-relative one that leaves its section."""
from __future__ import annotations

import struct

import numpy as np

import pypto
import pypto.language as pl

SHT_SYMTAB, SHT_RELA, SHF_EXECINSTR = 2, 4, 0x4
# x86-64 relocations that hold a 32-bit distance from the instruction: PC32, PLT32,
# GOTPC32, GOTPCREL, GOTPCRELX, REX_GOTPCRELX
PC_RELATIVE_32 = {2, 4, 26, 9, 41, 42}


@pypto.jit
def exp_scale(x, out, s, BLOCK: pl.constexpr):
    o = pl.program_id(0) * BLOCK
    pl.store(out, [o], pl.exp(pl.load(x, [o], [BLOCK]) * s) + 0.25)


def _sections(obj: bytes) -> list[tuple]:
    """(type, flags, offset, size, link, info) of every section of an ELF64 object."""
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    out = []
    for i in range(shnum):
        _, sh_type, flags, _, offset, size, link, info = struct.unpack_from(
            "<IIQQQQII", obj, shoff + i * shentsize)
        out.append((sh_type, flags, offset, size, link, info))
    return out


def far_relocations(obj: bytes) -> list[tuple[int, int]]:
    """(relocation type, symbol's section) of each 32-bit PC-relative relocation in code
    whose symbol is in another section or undefined (an external function)."""
    sections = _sections(obj)
    far = []
    for sh_type, _, offset, size, link, info in sections:
        if sh_type != SHT_RELA or not sections[info][1] & SHF_EXECINSTR:
            continue
        symtab = sections[link]
        for at in range(offset, offset + size, 24):
            _, r_info, _ = struct.unpack_from("<QQq", obj, at)
            sym, kind = r_info >> 32, r_info & 0xFFFFFFFF
            shndx, = struct.unpack_from("<H", obj, symtab[2] + sym * 24 + 6)
            if kind in PC_RELATIVE_32 and shndx != info:
                far.append((kind, shndx))
    return far


def test_kernel_code_has_no_32_bit_reference_out_of_its_section():
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    out = np.zeros_like(x)
    exp_scale[(4,)](x, out, 0.5, BLOCK=256)
    np.testing.assert_allclose(out, np.exp(x * 0.5) + 0.25, rtol=1e-6)
    obj = exp_scale.compile(x, out, 0.5, BLOCK=256).asm["obj"]
    assert obj[:4] == b"\x7fELF" and obj[4] == 2          # a 64-bit ELF object
    assert any(t == SHT_RELA for t, *_ in _sections(obj))  # it has relocations to check
    assert far_relocations(obj) == []

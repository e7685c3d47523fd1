"""Triton pieces shared by the Hopper flash-attention kernels (ch18's TMA key loops and
:mod:`aisp.kits.sparse_flash`): a row-tile descriptor, the P V step, and the wait that keeps ptxas
from serializing every wgmma.

``settled(x)`` returns ``x`` through an empty inline-asm statement whose output is tied to its input
(no instruction in the SASS): Triton then waits for the wgmma that produced ``x`` where it is read,
instead of leaving it in flight across the loop's back edge. At 128 registers that in-flight product
pins the accumulator, P and S at once and ptxas serializes every wgmma (advisory C7512; ch18's README,
``_pvwait``). The Triton interpreter runs no inline asm, so there it is the identity.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton import knobs

if knobs.runtime.interpret:
    @triton.jit
    def settled(x):
        """The interpreter's ``settled``: the identity (it runs no inline asm)."""
        return x
else:
    @triton.jit
    def settled(x):
        """``x`` unchanged, read by an empty asm statement (output tied to the input register): Triton
        waits here for the wgmma that produced ``x`` instead of leaving it in flight."""
        return tl.inline_asm_elementwise("", "=r,0", [x], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def row_tiles(ptr, rows, D: tl.constexpr, BLOCK: tl.constexpr):
    """A descriptor over ``ptr`` seen as (rows, D), contiguous, that moves BLOCK x D tiles."""
    return tl.make_tensor_descriptor(ptr, shape=[rows, D], strides=[D, 1], block_shape=[BLOCK, D])


@triton.jit
def pv_step(acc, p, alpha, v_desc, row):
    """acc * alpha + P V for the V tile at ``row``, P rounded to V's dtype."""
    v = v_desc.load([row, 0])
    return tl.dot(p.to(v.dtype), v, acc * alpha[:, None])

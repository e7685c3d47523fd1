"""The mean of two ranks' fp32 buffers in one Triton pass that reads the peer's straight over NVLink:
``out = (own + peer) * 0.5``, where ``peer`` is the other GPU's buffer mapped here (symmetric memory).
Per value it reads 4 bytes over NVLink and 4 from HBM and writes 4: no landing buffer for the peer's
values and no second pass over them (a copy-engine pull writes them to HBM, then a mean reads them
back). Imported only where Triton is installed; its CPU test runs it under TRITON_INTERPRET=1."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 4096
"""Values a program averages: 8 warps, 16 per thread, i.e. four 16-byte loads of each buffer in flight
per thread, up to 2,048 threads an SM: the NVLink reads need many bytes in flight to cover their
round trip (~1-2 us at ~0.4 TB/s is ~0.4-0.8 MB a GPU)."""


@triton.jit
def mean_pair_kernel(own, peer, out, n, BLOCK: tl.constexpr):
    """(own + peer) * 0.5 in fp32, what ``torch.mean`` over the two stacked rows computes (sum, then
    times 1/2; halving is exact, so (a + b) / 2 too) and NCCL's ``ReduceOp.AVG`` gives on two ranks.
    Addition commutes bit for bit, so both ranks write the same values. Offsets are int32: the
    caller keeps ``n`` + BLOCK below 2^31. The peer's load is issued first, the longer wait."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    b = tl.load(peer + offs, mask=mask, other=0.0)
    a = tl.load(own + offs, mask=mask, other=0.0)
    tl.store(out + offs, (a + b) * 0.5, mask=mask)


def mean_pair_(own: torch.Tensor, peer: torch.Tensor, out: torch.Tensor) -> None:
    """``out`` = the mean of ``own`` and ``peer``, elementwise: flat, contiguous fp32 of one length on
    one device (``peer`` may be another GPU's memory mapped on this one)."""
    n = own.numel()
    for t in (peer, out):
        assert t.numel() == n and t.is_contiguous() and t.device == own.device and t.dtype == own.dtype
    assert own.is_contiguous() and own.dtype == torch.float32, "flat fp32 buffers"
    assert n + BLOCK < 2**31, "int32 offsets"
    if n:
        mean_pair_kernel[(triton.cdiv(n, BLOCK),)](own, peer, out, n, BLOCK=BLOCK, num_warps=8)

"""MLA decode's cache head pulled into L2 while the query side runs: a bulk L2 prefetch (sm_90).

The latent kernel (``ch18_mla_wgmma._slice_t``) cannot read a cache byte before the query exists, so
during the query projection and ``_absorb`` (~10 us of weight-bound GEMMs at 11-35% of DRAM, Nsight
Compute, H200) HBM idles. ``prefetch_slices`` launches, on a side branch of the step's graph, one
program per (sequence, slice) that issues ``cp.async.bulk.prefetch.L2.global`` for the first ``rows``
cache rows of the slice the latent kernel's program will start on: 4 KB a request, fire and forget
(no registers, no shared memory, no completion to wait for). At 64 rows (one ``_slice_t`` tile) that
is 256 x 72 KB = 18.9 MB, which HBM fetches beside the query projection's 12.6 MB of weights, well
under the H200's 60 MiB of L2; the latent kernel's first tiles then hit in L2.
A request never leaves its slice's rows (only whole 4 KB chunks inside them are fetched), so every
address lies inside the cache; rows past the context are not touched. A hint only: without it (a
CPU, the interpreter) the output is the same.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

CHUNK = 4096
"""Bytes a prefetch request (a multiple of 16; the cache's rows of 1,152 bytes keep 16-byte alignment)."""


@triton.jit
def _prefetch_l2(cache_ptr, ctx, SPLIT_LEN: tl.constexpr, ROWS: tl.constexpr, ROW_BYTES: tl.constexpr,
                 CHUNK: tl.constexpr, CHUNKS: tl.constexpr):
    """Program (sequence, slice): L2 prefetches of the whole CHUNK-byte pieces of the slice's first ROWS rows
    (the request size in the asm is CHUNK's 4096; ``prefetch_slices`` passes CHUNK)."""
    seq, split = tl.program_id(0), tl.program_id(1)
    start = split * SPLIT_LEN
    rows = tl.minimum(tl.minimum(start + ROWS, start + SPLIT_LEN), ctx) - start  # <= 0 past the context
    base = cache_ptr.to(tl.pointer_type(tl.int8)) + (seq.to(tl.int64) * ctx + start) * ROW_BYTES
    offs = tl.arange(0, CHUNKS).to(tl.int64) * CHUNK
    inside = (offs + CHUNK <= rows.to(tl.int64) * ROW_BYTES).to(tl.int32)
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p cp.async.bulk.prefetch.L2.global [$1], 4096; mov.u32 $0, 0; }",
        "=r,l,r", [base + offs, inside], dtype=tl.int32, is_pure=False, pack=1)  # 4096: CHUNK


def prefetch_rows_bytes(batch: int, splits: int, rows: int, row_bytes: int) -> int:
    """Bytes ``prefetch_slices`` requests for a full context (each slice at least ``rows`` long)."""
    return batch * splits * (rows * row_bytes // CHUNK) * CHUNK


def prefetch_slices(cache: torch.Tensor, splits: int, split_len: int, rows: int) -> None:
    """L2 prefetch of the first ``rows`` rows of each of the ``splits`` slices (``split_len`` rows each) of
    every sequence of ``cache`` (batch, context, width); nothing on a CPU or with ``rows`` 0."""
    if not cache.is_cuda or rows <= 0:
        return
    if not cache.is_contiguous() or cache.data_ptr() % 16 or (cache.shape[2] * cache.element_size()) % 16:
        raise ValueError(f"prefetch_slices: cache {tuple(cache.shape)} {cache.dtype}: rows must be 16-byte aligned")
    row_bytes = cache.shape[2] * cache.element_size()
    chunks = triton.next_power_of_2(max(1, rows * row_bytes // CHUNK))
    _prefetch_l2[(cache.shape[0], splits)](cache, cache.shape[1], SPLIT_LEN=split_len, ROWS=rows, ROW_BYTES=row_bytes,
                                           CHUNK=CHUNK, CHUNKS=chunks, num_warps=max(1, min(4, chunks // 32)))

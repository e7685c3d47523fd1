"""MLA decode's tail in ONE Triton launch: the slices' merge, the ``W_UV`` product and the output projection.

After the latent kernel (``ch18_mla_wgmma._slice_t``) the absorbed step runs three short kernels in
series, each a pass of its own over small data: ``ch18_decode._merge`` (the slices' fp32 partials
into o_lat), the per-head ``W_UV`` bmm (2 MB of weights) and cuBLAS's output projection (8.4 MB).
Each is latency-bound (a few us at 1-3 TB/s) and each waits for the last one to end. Here one
launch does all three in two phases:
- merger programs (head, block of ``BLOCK_B`` sequences): weigh the slices' partials by
  exp2(m - max m) / sum, ``BLOCK_L`` latent columns a step (a (16, sequences x slices) fp32 product
  whose rows past ``BLOCK_B`` stay 0: the merge and the tensor cores' 16 rows in one), round to bf16
  as the merge does, multiply by that head's ``W_UV`` rows (fp32 sums) and write the head's
  (sequences, v_dim) output, rounded as the bmm writes it, into ``o`` (batch, heads x v_dim);
- projector programs (a ``BLOCK_N``-column block of the output): wait until every merger has
  written, then ``out[:, block] = o @ W_O[block]^T`` (fp32 sums, one bf16 rounding, as cuBLAS).
Roles go by a ticket each program takes as it starts (``sync[0]``), not by its program id: a
projector spins only on mergers that already hold tickets, so it runs, never blocking them (no
deadlock whatever the launch order; under the interpreter, which runs programs in order, the mergers
come first). Mergers count themselves done with a release (``sync[1]``) after a barrier; projectors
read it with acquire and load ``o`` past L1 (``.cg``). The last program out (``sync[2]``) sets the
three counters back to 0 for the next launch. Same rounding points as the three kernels it replaces.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl


class TailConfig(NamedTuple):
    """``_tail``'s settings: sequences a merger, latent columns a merger step, output columns a projector,
    K a projector step, pipelining depth, warps."""

    block_b: int = 4
    block_l: int = 64
    block_n: int = 16
    block_k: int = 256
    stages: int = 3
    warps: int = 4


TAIL = TailConfig()
"""At the pair's shape (32 sequences, 16 heads, 8 slices, 2,048 out): 128 mergers (each 64 KB of partials
and its head's 128 KB of W_UV, 8 steps) and 128 projectors (each all of o, 128 KB, and 64 KB of W_O, 8 steps)."""


@triton.jit
def _tail(parts_ptr, ml_ptr, w_uv_ptr, o_ptr, w_o_ptr, out_ptr, sync_ptr, batch, dim, SPLITS: tl.constexpr,
          HEADS: tl.constexpr, LATENT: tl.constexpr, V: tl.constexpr, BLOCK_B: tl.constexpr, ROWS: tl.constexpr,
          BLOCK_L: tl.constexpr, M_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
          MERGERS: tl.constexpr):
    """Ticket t < MERGERS: merge + ``W_UV`` for head t % HEADS, sequences (t // HEADS) * BLOCK_B + [0, BLOCK_B);
    otherwise: output columns (t - MERGERS) * BLOCK_N + [0, BLOCK_N) once all mergers are done."""
    ticket = tl.atomic_add(sync_ptr, 1, sem="relaxed")
    width: tl.constexpr = HEADS * V
    if ticket < MERGERS:
        head, offs_v = ticket % HEADS, tl.arange(0, V)
        # the block's (sequence, slice) partials as ROWS rows; sel[i, r]: slice r's weight in sequence i's merge
        offs_r = tl.arange(0, ROWS)
        seq_r = (ticket // HEADS) * BLOCK_B + offs_r // SPLITS
        live = (offs_r < BLOCK_B * SPLITS) & (seq_r < batch)
        part = (seq_r * SPLITS + offs_r % SPLITS) * HEADS + head
        m = tl.load(ml_ptr + part * 2, mask=live, other=float("-inf"))
        total = tl.load(ml_ptr + part * 2 + 1, mask=live, other=0.0)
        offs_i = tl.arange(0, 16)  # 16 rows: the tensor cores' least height; rows past BLOCK_B stay 0
        mine = (offs_r[None, :] // SPLITS) == offs_i[:, None]
        m_i = tl.where(mine, m[None, :], float("-inf"))
        top = tl.max(m_i, 1)
        w = tl.exp2(m_i - tl.where(top == float("-inf"), 0.0, top)[:, None])  # an empty slice (or row): 0
        den = tl.sum(w * total[None, :], 1)
        sel = w / tl.where(den > 0, den, 1.0)[:, None]
        o = tl.zeros((16, V), tl.float32)
        for l0 in range(0, LATENT, BLOCK_L):
            offs_l = l0 + tl.arange(0, BLOCK_L)
            acc = tl.load(parts_ptr + part[:, None] * LATENT + offs_l[None, :], mask=live[:, None], other=0.0)
            lat = tl.dot(sel, acc, input_precision="ieee")  # (16, BLOCK_L): the merged latent rows, fp32
            w_uv = tl.load(w_uv_ptr + (head * LATENT + offs_l[:, None]) * V + offs_v[None, :])
            o = tl.dot(lat.to(w_uv.dtype), w_uv, o)  # rounded as the merge writes o_lat; fp32 sums as the bmm
        seqs = (ticket // HEADS) * BLOCK_B + offs_i
        tl.store(o_ptr + seqs[:, None] * width + head * V + offs_v[None, :], o.to(o_ptr.dtype.element_ty),
                 mask=((offs_i < BLOCK_B) & (seqs < batch))[:, None])
        tl.debug_barrier()  # every thread's stores before the release
        tl.atomic_add(sync_ptr + 1, 1, sem="release")
    else:
        cols = (ticket - MERGERS) * BLOCK_N + tl.arange(0, BLOCK_N)
        rows = tl.arange(0, M_PAD)
        done = tl.atomic_add(sync_ptr + 1, 0, sem="acquire")
        while done < MERGERS:
            done = tl.atomic_add(sync_ptr + 1, 0, sem="acquire")
        out = tl.zeros((M_PAD, BLOCK_N), tl.float32)
        for k in range(0, width, BLOCK_K):
            offs_k = k + tl.arange(0, BLOCK_K)
            a = tl.load(o_ptr + rows[:, None] * width + offs_k[None, :], mask=(rows < batch)[:, None], other=0.0,
                        cache_modifier=".cg")
            w_o = tl.load(w_o_ptr + cols[:, None] * width + offs_k[None, :], mask=(cols < dim)[:, None], other=0.0)
            out = tl.dot(a, tl.trans(w_o), out)
        tl.store(out_ptr + rows[:, None] * dim + cols[None, :], out.to(out_ptr.dtype.element_ty),
                 mask=(rows < batch)[:, None] & (cols < dim)[None, :])
    tl.debug_barrier()
    if tl.atomic_add(sync_ptr + 2, 1, sem="acq_rel") == tl.num_programs(0) - 1:  # the last one out: reset
        tl.atomic_xchg(sync_ptr, 0)
        tl.atomic_xchg(sync_ptr + 1, 0)
        tl.atomic_xchg(sync_ptr + 2, 0)


def new_sync(device: torch.device) -> torch.Tensor:
    """The tail's three counters (tickets, mergers done, programs out), zero; each launch leaves them zero."""
    return torch.zeros(3, dtype=torch.int32, device=device)


def mla_tail(parts: torch.Tensor, ml: torch.Tensor, w_uv_t: torch.Tensor, w_o: torch.Tensor, o: torch.Tensor,
             sync: torch.Tensor, splits: int, config: TailConfig = TAIL) -> torch.Tensor:
    """``(merge(parts, ml) @ W_UV per head) @ W_O^T``, (batch, dim) in W_O's dtype, for the latent kernel's
    partials (batch x splits x heads rows of latent fp32; max and sum), ``w_uv_t`` (heads, latent, v_dim),
    ``w_o`` (dim, heads x v_dim), the scratch ``o`` (batch, heads x v_dim) and ``sync`` (``new_sync``);
    batch up to 64; splits, latent, v_dim and the config's sizes powers of two (the blocks at most the
    sizes they cut, the latent, v_dim and the K step at least 16)."""
    (heads, latent, v), (dim, width), batch = w_uv_t.shape, w_o.shape, o.shape[0]
    block_b, block_l, block_n, block_k, stages, warps = config
    block_l, block_k = min(block_l, latent), min(block_k, width & -width)  # K steps: a power of two dividing the width
    ok = all(d >= 16 and d & (d - 1) == 0 for d in (block_l, v, block_n, block_k)) and latent % block_l == 0
    ok = ok and all(d & (d - 1) == 0 for d in (splits, block_b)) and batch <= 64 and block_b <= 16 and width == heads * v
    if not (ok and parts.shape == (batch * splits * heads, latent) and ml.shape == (batch * splits * heads, 2)
            and o.shape == (batch, width) and all(t.is_contiguous() for t in (parts, ml, w_uv_t, w_o, o))):
        raise ValueError(f"mla_tail: parts {tuple(parts.shape)}, W_UV^T {tuple(w_uv_t.shape)}, W_O {tuple(w_o.shape)}, "
                         f"o {tuple(o.shape)}, {splits} splits, {config}")
    out = w_o.new_empty(batch, dim)
    mergers = heads * triton.cdiv(batch, block_b)
    _tail[(mergers + triton.cdiv(dim, block_n),)](
        parts, ml, w_uv_t, o, w_o, out, sync, batch, dim, SPLITS=splits, HEADS=heads, LATENT=latent, V=v,
        BLOCK_B=block_b, ROWS=max(16, block_b * splits), BLOCK_L=block_l, M_PAD=max(16, triton.next_power_of_2(batch)),
        BLOCK_N=block_n, BLOCK_K=block_k, MERGERS=mergers, num_warps=warps, num_stages=stages)
    return out

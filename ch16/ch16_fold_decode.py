"""The decode step of ``fp8_weight_decode``'s ``_folded`` variant: ``_fused``'s step with the small
kernels between the GEMVs folded into the GEMVs (15 kernels a step instead of 21).

``_gemv_fold`` is ``ch16_fp8_gemv._gemv_fp8`` (same tiles, swapped operands, pipelined 16-byte
copies) with a prologue and an epilogue:

* ``NORM`` (QKV, SwiGLU up/gate, LM head): x is the residual stream and the RMSNorm is applied in
  the x load: ``round(x * rsqrt(ss / K + eps) * w)``, where ``ss`` (one fp32 per row) is the row's
  sum of squares, accumulated by the kernel that wrote x. No norm kernel.
* ``EPI_RESID`` (attention output, SwiGLU down; K split): each program writes its fp32 partials and
  counts itself in at a per-output-block counter; the last of an output block's splits sums the
  splits, scales, rounds, adds the residual, stores it, and adds the block's sum of squares to the
  next norm's ``ss`` (fp32 atomics). This replaces ``_add_norm``.
* ``EPI_ROPE`` (QKV; an output block is one head): the last split of a head sums, scales, applies
  RoPE and stores the query head or the cache's key/value at the row's position (``_rope_cache``).

The fix-up runs in the tail of a GEMV still streaming weights on other SMs, not as a kernel after it
drained. ``_embed_ss`` gathers the embedding rows, writes the first ``ss`` and zeroes the others (the
counters reset themselves). Rounding as ``ch16_fused_decode``'s; only the sums of squares add in
another order (atomics). libdevice's sin/cos keep a 32-48 byte stack frame for huge angles (as in
``_rope_cache``): unused, the angles are reduced to [-pi, pi] first.
"""

from __future__ import annotations

import triton
import triton.language as tl

EPI_STORE, EPI_RESID, EPI_ROPE = 0, 1, 2


@triton.jit
def _embed_ss(table_ptr, tok_ptr, x_ptr, ss_ptr, N, SITES: tl.constexpr, BLOCK: tl.constexpr):
    """Row r: x[r] = table[tok[r]]; ss[0, r] = sum x[r]^2; ss[1:SITES, r] = 0."""
    row, rows = tl.program_id(0), tl.num_programs(0)
    offs, inside = tl.arange(0, BLOCK), tl.arange(0, BLOCK) < N
    x = tl.load(table_ptr + tl.load(tok_ptr + row) * N + offs, mask=inside, other=0.0).to(tl.float32)
    tl.store(x_ptr + row * N + offs, x.to(x_ptr.dtype.element_ty), mask=inside)
    tl.store(ss_ptr + row, tl.sum(x * x, 0))
    for site in tl.static_range(1, SITES):
        tl.store(ss_ptr + site * rows + row, 0.0)


@triton.jit
def _gemv_fold(x_ptr, w_ptr, s_ptr, y_ptr, cnt_ptr, M, N, K, K_SPLIT, ss_in_ptr, nw_ptr, eps, res_ptr, ss_out_ptr,
               pos_ptr, q_ptr, k_ptr, v_ptr, max_len, log2_base, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, SPLITS: tl.constexpr, GLU: tl.constexpr, NORM: tl.constexpr,
               EPI: tl.constexpr, HEADS: tl.constexpr, KV_HEADS: tl.constexpr):
    """Program (n-block, k-split) of acc[BLOCK_N, ROWS] = w[n-block, k-range] @ x'[:M, k-range]^T, x' = x,
    NORM: x normalized, GLU: silu(gate) * up; then EPI (see the module's docstring). EPI_STORE (no split):
    y (M, N) = acc * scale in x's dtype; else y is the (SPLITS, M, N) fp32 partials' workspace."""
    pid_n, pid_k = tl.program_id(0), tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, ROWS)
    offs_k = pid_k * K_SPLIT + tl.arange(0, BLOCK_K)
    in_n, in_m = offs_n < N, offs_m < M
    dt = x_ptr.dtype.element_ty
    w_ptrs = w_ptr + offs_n[:, None] * K + offs_k[None, :]
    x_ptrs = x_ptr + offs_m[None, :] * (2 * K if GLU else K) + offs_k[:, None]
    nw_ptrs = nw_ptr + offs_k
    rstd = 1.0 / tl.sqrt(tl.load(ss_in_ptr + offs_m, mask=in_m, other=0.0) / K + eps)
    acc = tl.zeros((BLOCK_N, ROWS), dtype=tl.float32)
    for _ in range(0, K_SPLIT, BLOCK_K):
        w = tl.load(w_ptrs, mask=in_n[:, None], other=0.0).to(tl.float16)
        xr = tl.load(x_ptrs, mask=in_m[None, :], other=0.0).to(tl.float32)
        if GLU:
            up = tl.load(x_ptrs + K, mask=in_m[None, :], other=0.0).to(tl.float32)
            xr = ((xr / (1.0 + tl.exp(-xr))).to(dt).to(tl.float32) * up).to(dt)
        elif NORM:
            xr = (xr * rstd[None, :] * tl.load(nw_ptrs).to(tl.float32)[:, None]).to(dt)
        acc = tl.dot(w, xr.to(tl.float16), acc)
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
        nw_ptrs += BLOCK_K
    mask = in_n[:, None] & in_m[None, :]
    if EPI == 0:
        y = acc * tl.load(s_ptr + offs_n, mask=in_n, other=0.0)[:, None]
        tl.store(y_ptr + offs_m[None, :] * N + offs_n[:, None], y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(y_ptr + pid_k * M * N + offs_m[None, :] * N + offs_n[:, None], acc, mask=mask)
        tl.debug_barrier()  # every thread's partials stored before the count (the atomic releases them)
        arrived = tl.atomic_add(cnt_ptr + pid_n, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLITS - 1:  # the output block's last split: the fix-up
            tl.atomic_xchg(cnt_ptr + pid_n, 0, sem="relaxed", scope="gpu")  # ready for the next launch
            if EPI == 1:
                _fix_resid(y_ptr, s_ptr, res_ptr, ss_out_ptr, M, N, pid_n, ROWS, BLOCK_N, SPLITS)
            else:
                _fix_rope(y_ptr, s_ptr, pos_ptr, q_ptr, k_ptr, v_ptr, M, N, max_len, log2_base, pid_n, ROWS,
                          BLOCK_N, SPLITS, HEADS, KV_HEADS)


@triton.jit
def _split_sum(p_ptr, M, N, cols, ROWS: tl.constexpr, WIDTH: tl.constexpr, SPLITS: tl.constexpr):
    """(ROWS, WIDTH = len(cols)) sums of the SPLITS partials at ``cols`` (rows >= M: 0), read through L2."""
    offs_m = tl.arange(0, ROWS)
    tile = offs_m[:, None] * N + cols[None, :]
    live = (offs_m < M)[:, None] & (cols < N)[None, :]
    acc = tl.zeros((ROWS, WIDTH), tl.float32)
    for split in tl.static_range(SPLITS):
        acc += tl.load(p_ptr + split * M * N + tile, mask=live, other=0.0, cache_modifier=".cg")
    return acc


@triton.jit
def _fix_resid(p_ptr, s_ptr, res_ptr, ss_ptr, M, N, pid_n, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
               SPLITS: tl.constexpr):
    """res[:, block] = round(res + round(scale * sum of splits)); ss[r] += sum over the block of res[r]^2."""
    dt = res_ptr.dtype.element_ty
    offs_m, cols = tl.arange(0, ROWS), pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    live = (offs_m < M)[:, None] & (cols < N)[None, :]
    y = _split_sum(p_ptr, M, N, cols, ROWS, BLOCK_N, SPLITS) * tl.load(s_ptr + cols, mask=cols < N, other=0.0)[None, :]
    at = res_ptr + offs_m[:, None] * N + cols[None, :]
    x = (tl.load(at, mask=live, other=0.0).to(tl.float32) + y.to(dt).to(tl.float32)).to(dt)
    tl.store(at, x, mask=live)
    tl.atomic_add(ss_ptr + offs_m, tl.sum(x.to(tl.float32) * x.to(tl.float32), 1), mask=offs_m < M, sem="relaxed",
                  scope="gpu")


@triton.jit
def _fix_rope(p_ptr, s_ptr, pos_ptr, q_ptr, k_ptr, v_ptr, M, N, max_len, log2_base, head, ROWS: tl.constexpr,
              D: tl.constexpr, SPLITS: tl.constexpr, HEADS: tl.constexpr, KV_HEADS: tl.constexpr):
    """``ch16_fused_decode._rope_cache`` for one head (the output block) and all rows: summed, scaled,
    rounded; query and key heads rotated; queries to q (rows, HEADS, D), keys/values to the cache."""
    half: tl.constexpr = D // 2
    dt = q_ptr.dtype.element_ty
    offs_m, offs = tl.arange(0, ROWS), tl.arange(0, D)
    swap, in_m = (offs + half) % D, offs_m < M
    x = (_split_sum(p_ptr, M, N, head * D + offs, ROWS, D, SPLITS) * tl.load(s_ptr + head * D + offs)[None, :]).to(dt)
    x = x.to(tl.float32)
    x_sw = _split_sum(p_ptr, M, N, head * D + swap, ROWS, D, SPLITS) * tl.load(s_ptr + head * D + swap)[None, :]
    x_sw = x_sw.to(dt).to(tl.float32)
    pos = tl.load(pos_ptr + offs_m, mask=in_m, other=0)
    if head < HEADS + KV_HEADS:
        freq = tl.exp2(-(offs % half).to(tl.float32) / half * log2_base)
        angle = pos.to(tl.float32)[:, None] * freq[None, :]
        angle -= 6.283185307179586 * tl.floor(angle / 6.283185307179586 + 0.5)  # into [-pi, pi]
        cos = tl.cos(angle).to(dt).to(tl.float32)
        sin = tl.where((offs < half)[None, :], -tl.sin(angle), tl.sin(angle)).to(dt).to(tl.float32)
        x = ((x * cos).to(dt).to(tl.float32) + x_sw * sin).to(dt).to(tl.float32)
    if head < HEADS:
        tl.store(q_ptr + (offs_m[:, None] * HEADS + head) * D + offs[None, :], x.to(dt), mask=in_m[:, None])
    else:
        kv = (head - HEADS) % KV_HEADS
        slot = ((offs_m[:, None] * KV_HEADS + kv) * max_len + pos[:, None]) * D + offs[None, :]
        live = in_m[:, None] & (pos[:, None] < max_len) & (offs[None, :] < D)
        if head < HEADS + KV_HEADS:
            tl.store(k_ptr + slot, x.to(k_ptr.dtype.element_ty), mask=live)
        else:
            tl.store(v_ptr + slot, x.to(v_ptr.dtype.element_ty), mask=live)

"""Optimized KV cache, append fused into attention: one Triton kernel a step, in a CUDA graph.

Baseline (baseline_kv_cache_naive.py): ``torch.cat`` per token.
Optimized (this variant): as optimized_kv_cache_naive_graph.py (one K/V buffer, the call captured
in a CUDA graph), but a step is ONE kernel, as in FlashAttention's ``flash_attn_with_kvcache``:
one program per (batch, head) loads the step's new key and value, stores them into slot P + t
of the cache, and attends the step's query over slots 0..P+t-1 read from the cache (online
softmax in fp32) plus the new key/value from registers; it writes its output row straight into
the (batch, heads, steps, dim) result, so no slot-write kernel, no per-step output and no final
cat. The cache bytes read are the declared ones; the slot writes are 128 KB a step.
Expect: not yet measured. Estimate (arithmetic, not a measurement): a step is one kernel and a
graph gap (~0.5-1 us). At cuDNN's 3.8 TB/s (its measured rate here) that is ~41 us a step,
10.5 ms a call, 88% of 4.2 TB/s; at 3.4 TB/s, 45 us and 80%. Whether this plain Triton loop
(256 programs, 64-row tiles) streams as fast as cuDNN's kernel is the open question; the
harness keeps the faster of the variants.
Run: python ch13/optimized_kv_cache_naive_fused.py  |  aisp bench run -t ch13:kv_cache_naive
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from optimized_kv_cache_naive_graph import GraphedFusedCache

import aisp

BLOCK_N = 64
"""Cache rows a program reads per iteration (64 x 128 bf16: 16 KB of keys and 16 KB of values)."""


@triton.jit(do_not_specialize=["t", "pos"])  # one compile for all 256 steps
def append_attend_kernel(q_ptr, nk_ptr, nv_ptr, k_ptr, v_ptr, o_ptr, t, pos, steps, length, scale,
                         D: tl.constexpr, BLOCK_N: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    d = tl.arange(0, D)
    row = (bh * steps + t) * D  # (batch, heads, steps, D) inputs and output, contiguous
    kn = tl.load(nk_ptr + row + d)
    vn = tl.load(nv_ptr + row + d)
    base = bh * length * D  # (batch, heads, length, D) cache, contiguous; pos: the new slot
    tl.store(k_ptr + base + pos * D + d, kn)
    tl.store(v_ptr + base + pos * D + d, vn)
    q = tl.load(q_ptr + row + d).to(tl.float32) * (scale * 1.4426950408889634)  # log2 domain
    m = tl.sum(q * kn.to(tl.float32), 0)  # the new key's score starts the running max
    den = m * 0.0 + 1.0
    acc = vn.to(tl.float32)
    n = tl.arange(0, BLOCK_N)
    tile = base + n[:, None] * D + d[None, :]
    k_next = tl.load(k_ptr + tile, mask=(n < pos)[:, None], other=0.0)
    v_next = tl.load(v_ptr + tile, mask=(n < pos)[:, None], other=0.0)
    for start in range(0, pos, BLOCK_N):
        live = start + n < pos
        k, v = k_next.to(tl.float32), v_next.to(tl.float32)
        ahead = (start + BLOCK_N + n < pos)[:, None]  # the next tile's loads fly while this one computes
        k_next = tl.load(k_ptr + tile + (start + BLOCK_N) * D, mask=ahead, other=0.0)
        v_next = tl.load(v_ptr + tile + (start + BLOCK_N) * D, mask=ahead, other=0.0)
        s = tl.where(live, tl.sum(k * q[None, :], 1), float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 0))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - m_new)
        den = den * alpha + tl.sum(p, 0)
        acc = acc * alpha + tl.sum(p[:, None] * v, 0)
        m = m_new
    tl.store(o_ptr + row + d, (acc / den).to(o_ptr.dtype.element_ty))


def append_attend(q: torch.Tensor, new_k: torch.Tensor, new_v: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  out: torch.Tensor, prompt: int, t: int) -> None:
    """Step ``t``: write ``new_k/new_v[:, :, t]`` into slot ``prompt + t`` of ``k``/``v`` and set
    ``out[:, :, t]`` to the query's attention over slots ``0..prompt + t`` (SDPA's default scale)."""
    b, h, steps, d = q.shape
    assert all(x.is_contiguous() for x in (q, new_k, new_v, k, v, out)), "contiguous layouts only"
    append_attend_kernel[(b * h,)](q, new_k, new_v, k, v, out, t, prompt + t, steps, k.shape[2], d ** -0.5,
                                   D=d, BLOCK_N=BLOCK_N, num_warps=4)


class FusedAppendAttend(GraphedFusedCache):
    scratch = ("kv", "out")

    def buffers(self) -> None:
        w = self.workload
        self.kv = self.new_kv_buffer(w.prompt + w.steps)
        self.out = torch.empty_like(self.new_q)

    def decode(self) -> torch.Tensor:
        p, kv = self.workload.prompt, self.kv
        kv[0, :, :, :p].copy_(self.prompt_k)
        kv[1, :, :, :p].copy_(self.prompt_v)
        for t in range(self.workload.steps):
            append_attend(self.new_q, self.new_k, self.new_v, kv[0], kv[1], self.out, p, t)
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return FusedAppendAttend()


if __name__ == "__main__":
    aisp.main(get_benchmark)

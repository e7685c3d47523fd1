"""Optimized fp8 weight decode, folded step: ``_fused``'s step with its norms and RoPE folded into the GEMVs.

Baseline (baseline_fp8_weight_decode.py): a graphed bf16 decode step of 8 tokens, bound by reading
1.13 GB of bf16 weights.
Optimized: ``_fused``'s e4m3 weights, GEMV tiles, attention and top-4 kernels, but 15 kernels a step
instead of 21 (``ch16_fold_decode``): the last K split of each output block sums the splits and does
the residual add (attention output, SwiGLU down) or RoPE and the cache write (QKV) in the GEMV's tail,
and each norm is applied in the next GEMV's x load from per-row sums of squares the residual add
accumulated (``_fused``'s 4 ``_add_norm`` and 2 ``_rope_cache`` kernels go; the embedding gather
stays a kernel). The weight bytes are the same (0.57 GB a step); ~0.5 MB less activation traffic.
Expect: not yet measured. Estimate (arithmetic, not a measurement): ``_fused`` takes 0.262 ms a
step, ~0.195 ms of it GEMVs and ~0.067 ms its 12 other kernels and their gaps (~5.6 us each); 6 of
them go, each fix-up adding ~1-2 us to a GEMV's tail: ~15-25 us a step saved, 16 steps ~3.8-3.95 ms,
~58-60% of HBM (``_fused`` 54.5%). Not 80%: the GEMVs alone (0.195 ms at 69-77% of DRAM) are 73% of
the ceiling's 0.143 ms a step; crossing 80% needs the weight stream to continue across kernels.
Run: python ch16/optimized_fp8_weight_decode_folded.py  |  aisp bench run -t ch16:fp8_weight_decode
"""

from __future__ import annotations

import dataclasses
import math

import torch
import triton
from optimized_fp8_weight_decode_fused import FP8FusedDecode, FusedStep

import aisp
from aisp.kits.llm import TOP, Decoder, DenseKVCache


def _eps(norm: torch.nn.RMSNorm) -> float:
    return norm.eps if norm.eps is not None else torch.finfo(torch.float32).eps


class FoldedStep(FusedStep):
    """``FusedStep`` (same interface and math) in 3 + 6 x layers kernels: ``ch16_fold_decode``'s."""

    def __init__(self, model: Decoder, cache: DenseKVCache, batch: int, kv_len: int, top: int) -> None:
        device = cache.k.device
        self.ss = torch.zeros(2 * model.cfg.layers + 1, batch, device=device)  # per norm site: rows' sum of x^2
        self.counts = torch.zeros(4096, dtype=torch.int32, device=device)  # arrivals per output block (self-reset)
        super().__init__(model, cache, batch, kv_len, top)

    def _gemv(self, x: torch.Tensor, layer: torch.nn.Module, epi: int, *, glu: bool = False, norm: tuple = (),
              res: torch.Tensor | None = None, site: int = 0, layer_index: int = 0) -> torch.Tensor:
        """One ``_gemv_fold`` launch: y (M, N) for EPI_STORE; None after the residual or RoPE fix-up.
        norm: (site, RMSNorm) applied to x in the load; res/site: the residual and the ss it feeds."""
        from ch16_fold_decode import EPI_ROPE, EPI_STORE, _gemv_fold
        from ch16_fp8_gemv import CONFIG, MAX_ROWS, k_splits

        cfg, w8, scale = self.cfg, layer.w8.view(torch.float8_e4m3fn), layer.scale
        gemv = dataclasses.replace(CONFIG, block_n=cfg.head_dim) if epi == EPI_ROPE else CONFIG
        (m, kx), n = x.shape, w8.shape[0]
        k = kx // 2 if glu else kx
        if (not 0 < m <= MAX_ROWS or w8.shape[1] != k or k % gemv.block_k or n * kx >= 2**31 or triton.cdiv(
                n, gemv.block_n) > self.counts.numel() or not (x.is_contiguous() and w8.is_contiguous())):
            raise ValueError(f"_gemv_fold: x {tuple(x.shape)}, w {tuple(w8.shape)} cannot be tiled")
        split = 1 if epi == EPI_STORE else k_splits(n, k, gemv)
        y = torch.empty(split, m, n, device=x.device, dtype=x.dtype if epi == EPI_STORE else torch.float32)
        ss_in, norm_w, eps = (self.ss[norm[0]], norm[1].weight, _eps(norm[1])) if norm else (self.ss[0], scale, 1.0)
        ck, cv = self.cache.k[layer_index], self.cache.v[layer_index]
        q = torch.empty(m, cfg.heads, cfg.head_dim, device=x.device, dtype=x.dtype) if epi == EPI_ROPE else x
        _gemv_fold[(triton.cdiv(n, gemv.block_n), split)](
            x, w8, scale, y, self.counts, m, n, k, k // split, ss_in, norm_w, eps, x if res is None else res,
            self.ss[site], self.pos, q, ck, cv, ck.shape[2], math.log2(cfg.rope_base), ROWS=8 if m <= 8 else MAX_ROWS,
            BLOCK_N=gemv.block_n, BLOCK_K=gemv.block_k, SPLITS=split, GLU=glu, NORM=bool(norm), EPI=epi,
            HEADS=cfg.heads, KV_HEADS=cfg.kv_heads, num_warps=gemv.warps, num_stages=gemv.stages)
        return y[0] if epi == EPI_STORE else q

    def _step(self) -> None:
        from ch16_fold_decode import EPI_RESID, EPI_ROPE, EPI_STORE, _embed_ss
        from ch16_fused_decode import _top_feedback

        model, cfg = self.model, self.cfg
        rows, blocks = len(self.tok), list(model.blocks)
        x = torch.empty(rows, cfg.dim, device=self.tok.device, dtype=model.embed.weight.dtype)
        _embed_ss[(rows,)](model.embed.weight, self.tok, x, self.ss, cfg.dim, SITES=self.ss.shape[0],
                           BLOCK=triton.next_power_of_2(cfg.dim), num_warps=8)
        for i, blk in enumerate(blocks):
            q = self._gemv(x, blk.attn.qkv, EPI_ROPE, norm=(2 * i, blk.norm1), layer_index=i)
            self._gemv(self._flash(i, q), blk.attn.out, EPI_RESID, res=x, site=2 * i + 1)
            gate_up = self._gemv(x, blk.gate_up, EPI_STORE, norm=(2 * i + 1, blk.norm2))
            self._gemv(gate_up, blk.down, EPI_RESID, glu=True, res=x, site=2 * i + 2)
        logits = self._gemv(x, model.head, EPI_STORE, norm=(2 * len(blocks), model.norm))
        _top_feedback[(rows,)](logits, self.top, self.next_tok, self.tok, self.pos, cfg.vocab, TOP=self.top.shape[1],
                               BLOCK=triton.next_power_of_2(cfg.vocab), num_warps=16)


class FP8FoldedDecode(FP8FusedDecode):
    def make_step(self) -> FoldedStep:
        w = self.workload
        return FoldedStep(self.model, self.cache, w.batch, w.prompt + w.steps, TOP)


def get_benchmark() -> aisp.Benchmark:
    return FP8FoldedDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)

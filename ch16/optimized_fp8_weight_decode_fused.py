"""Optimized fp8 weight decode, fused step: the ``_gemv`` variant's GEMVs with the rest of the step in 4 kernels.

Baseline (baseline_fp8_weight_decode.py): a graphed bf16 decode step of 8 tokens, bound by reading
1.13 GB of bf16 weights.
Optimized: the ``_gemv`` variant's e4m3 weights and GEMV kernel (``ch16_fp8_gemv``), but the step is
not the kit decoder's forward: ``FusedStep`` runs the same math in 21 kernels a step (9 GEMVs and 12
others; ``ch16_fused_decode``) where the kit's forward runs ~75 (65 aten ops a step, counted on a
CPU with the torch profiler, plus 6 split sums): the split-K sum, scale, residual add and next RMSNorm
in one row kernel (the first gathers the embedding); the QKV sum, RoPE (angles in registers) and the
cache write in one; flash-decoding to each row's position (no additive mask; cuDNN's kernel read the
cache at 0.92 TB/s) and its merge; SwiGLU in the down GEMV's x load; top-4, token and feedback in
one. The weight bytes are the same (0.57 GB); ~1 MB of activations a step no longer round-trips.
Expect: measured, H200, 2026-11-29 (two runs): 8.538 -> 4.184 ms and 8.544 -> 4.192 ms for 16 steps,
2.04x [2.04, 2.04] over bf16, 1.56x over ``_gemv`` (6.513, 6.508 ms in the same runs): 0.262 ms a step,
54.5% of HBM (estimated 4.0-4.6 ms, 1.4-1.6x, 50-57%). The GPU test, per call: ``_gemv`` 6.481 ms
(1.48 TB/s), ``_fused`` 4.187 ms (2.30 TB/s), the same tokens.
Run: python ch16/optimized_fp8_weight_decode_fused.py  |  aisp bench run -t ch16:fp8_weight_decode
"""

from __future__ import annotations

import math

import torch
import triton
from baseline_fp8_weight_decode import BF16Decode
from ch16_decode import StepGraph

import aisp
from aisp.kits.fp8_layers import to_fp8
from aisp.kits.llm import TOP, Decoder, DenseKVCache


class FusedStep:
    """``GraphedDecode``'s interface (``tok``, ``pos`` in; ``next_tok``, ``top`` out; a call replays
    one step; warm-up and capture at position ``kv_len - 1``) over ``model``'s ``GemvFP8Linear`` layers."""

    def __init__(self, model: Decoder, cache: DenseKVCache, batch: int, kv_len: int, top: int) -> None:
        device = cache.k.device
        self.model, self.cache, self.kv_len, self.cfg = model, cache, kv_len, model.cfg
        self.tok, self.pos, self.next_tok = (torch.zeros(batch, dtype=torch.long, device=device) for _ in range(3))
        self.top = torch.zeros(batch, top, device=device)
        self.ones = torch.ones(self.cfg.kv_heads, device=device)  # _combine's V scales
        self.step = StepGraph(self._step, self._prime, device)

    def _prime(self) -> None:
        self.tok.zero_()
        self.pos.fill_(self.kv_len - 1)

    def _norm(self, p: torch.Tensor | None, scale: torch.Tensor | None, x: torch.Tensor, norm: torch.nn.RMSNorm
              ) -> torch.Tensor:
        """xn = norm(x + round(scale * sum(p))), x updated in place (p None: x = the embedding rows)."""
        from ch16_fused_decode import _add_norm

        rows, dim = x.shape
        xn, eps = torch.empty_like(x), norm.eps if norm.eps is not None else torch.finfo(torch.float32).eps
        source = self.model.embed.weight if p is None else x
        _add_norm[(rows,)](x if p is None else p, norm.weight if scale is None else scale, source, self.tok,
                           norm.weight, x, xn, rows * dim, dim, eps, SPLITS=1 if p is None else p.shape[0],
                           EMBED=p is None, BLOCK=triton.next_power_of_2(dim), num_warps=8)
        return xn

    def _attention(self, layer: int, xn: torch.Tensor, qkv: torch.nn.Module) -> torch.Tensor:
        from ch16_fp8_gemv import gemv_launch
        from ch16_fp8_kv import G_PAD, _combine
        from ch16_fused_decode import BLOCK_KEYS, SPLIT_LEN, _attend, _rope_cache

        cfg, (rows, dim), k, v = self.cfg, xn.shape, self.cache.k[layer], self.cache.v[layer]
        groups, hd, max_len = cfg.heads // cfg.kv_heads, cfg.head_dim, k.shape[2]
        p = gemv_launch(xn, qkv.w8.view(torch.float8_e4m3fn), qkv.scale, True)
        q = torch.empty(rows, cfg.heads, hd, device=xn.device, dtype=xn.dtype)
        _rope_cache[(rows, cfg.heads + 2 * cfg.kv_heads)](
            p, qkv.scale, self.pos, q, k, v, rows * p.shape[2], p.shape[2], max_len, math.log2(cfg.rope_base),
            SPLITS=p.shape[0], HEADS=cfg.heads, KV_HEADS=cfg.kv_heads, D=hd, num_warps=1)
        splits = triton.next_power_of_2(triton.cdiv(self.kv_len, SPLIT_LEN))
        parts = torch.empty(rows * cfg.heads * splits, hd, device=xn.device, dtype=torch.float32)
        ml = torch.empty(rows * cfg.heads * splits, 2, device=xn.device, dtype=torch.float32)
        _attend[(rows * cfg.kv_heads, splits)](
            q, k, v, self.pos, parts, ml, max_len, math.log2(math.e) / hd**0.5, KV_HEADS=cfg.kv_heads,
            GROUPS=groups, G_PAD=G_PAD, D=hd, SPLIT_LEN=SPLIT_LEN, BLOCK_N=BLOCK_KEYS, num_warps=4, num_stages=2)
        out = torch.empty(rows, dim, device=xn.device, dtype=xn.dtype)
        _combine[(rows * cfg.heads,)](parts, ml, self.ones, out, KV_HEADS=cfg.kv_heads, SPLITS=splits, GROUPS=groups,
                                      D=hd, num_warps=4)
        return out

    def _step(self) -> None:
        from ch16_fp8_gemv import fp8_gemv, gemv_launch
        from ch16_fused_decode import _top_feedback

        model, e4m3 = self.model, torch.float8_e4m3fn
        blocks = list(model.blocks)
        x = torch.empty(len(self.tok), self.cfg.dim, device=self.tok.device, dtype=model.embed.weight.dtype)
        xn = self._norm(None, None, x, blocks[0].norm1)
        for i, blk in enumerate(blocks):
            out = blk.attn.out
            p = gemv_launch(self._attention(i, xn, blk.attn.qkv), out.w8.view(e4m3), out.scale, True)
            xn = self._norm(p, out.scale, x, blk.norm2)
            gate_up = fp8_gemv(xn, blk.gate_up.w8.view(e4m3), blk.gate_up.scale)
            p = gemv_launch(gate_up, blk.down.w8.view(e4m3), blk.down.scale, True, glu=True)
            xn = self._norm(p, blk.down.scale, x, blocks[i + 1].norm1 if i + 1 < len(blocks) else model.norm)
        logits = fp8_gemv(xn, model.head.w8.view(e4m3), model.head.scale)
        rows, vocab = logits.shape
        _top_feedback[(rows,)](logits, self.top, self.next_tok, self.tok, self.pos, vocab, TOP=self.top.shape[1],
                               BLOCK=triton.next_power_of_2(vocab), num_warps=16)

    def __call__(self) -> None:
        self.step()


class FP8FusedDecode(BF16Decode):
    def prepare(self) -> None:
        from ch16_fp8_gemv import GemvFP8Linear

        to_fp8(self.model, layer=GemvFP8Linear)

    def make_step(self) -> FusedStep:
        w = self.workload
        return FusedStep(self.model, self.cache, w.batch, w.prompt + w.steps, TOP)


def get_benchmark() -> aisp.Benchmark:
    return FP8FusedDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)

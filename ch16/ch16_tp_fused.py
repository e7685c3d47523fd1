"""The fused tensor-parallel decode of ``tp_decode_multigpu``'s ``_fused`` variant: one rank's shard of
the wide decoder (``ch16_tp.ShardedDecoder``'s weights), ~28 kernels a step instead of ~107, a
vocab-parallel LM head, and all of a call's steps in one CUDA graph.

Per block: cuBLAS GEMMs on the shard's weights (the row-parallel ones write straight into their call
site's symmetric-memory buffer: no copy in) and ``ch16_fused_decode``'s kernels around them at a unit
scale and one split (``_rope_cache``, ``_attend`` + ``ch16_fp8_kv._combine``, ``_add_norm``: the
all-reduced partial + residual + next RMSNorm, the first gathering the embedding), and :func:`_glu`.
Each rank writes its half of the logits into a zeroed (batch, vocab) buffer; one more one-shot
all-reduce gives both ranks the whole logits exactly (x + 0 = x), then ``_top_feedback``.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from ch16_decode import StepGraph
from ch16_fp8_kv import G_PAD, _combine, _pdl_enter
from ch16_fused_decode import BLOCK_KEYS, SPLIT_LEN, _add_norm, _attend, _rope_cache, _top_feedback
from ch16_tp import Reduce, Shard, ShardedDecoder, nccl_reduce

from aisp.kits.llm import DenseKVCache
from aisp.kits.multirank import SymmetricReduce

GLU_BLOCK = 1024  # SwiGLU width per program of _glu


@triton.jit
def _glu(gu_ptr, out_ptr, F, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    """Program (row, block): out[row] = round(SiLU(gate)) * up, gate_up[row] = (gate | up), each F wide."""
    _pdl_enter(PDL)
    row, offs = tl.program_id(0), tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < F
    gate = tl.load(gu_ptr + row * 2 * F + offs, mask=inside, other=0.0).to(tl.float32)
    up = tl.load(gu_ptr + row * 2 * F + F + offs, mask=inside, other=0.0).to(tl.float32)
    act = (gate / (1.0 + tl.exp(-gate))).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * F + offs, (act * up).to(out_ptr.dtype.element_ty), mask=inside)


class ReduceSites:
    """A buffer per call site (``shapes``) a rank's partial is written into; ``self(site)``: the sum over
    ranks (buffers kept as written): one-shot kernels over symmetric memory on CUDA ranks (as
    ``SymmetricReduce``), ``reduce`` (the process group) on a copy elsewhere, the buffer at one shard."""

    def __init__(self, shapes: list[tuple[int, ...]], dtype: torch.dtype, device: torch.device, count: int,
                 reduce: Reduce = nccl_reduce) -> None:
        self.count, self.reduce, self.symmetric = count, reduce, device.type == "cuda" and count > 1
        if self.symmetric:
            kits = [SymmetricReduce(1, shape, dtype, device) for shape in shapes]
            self.group, self.bufs = kits[0].group, [kit.bufs[0] for kit in kits]
        else:
            self.bufs = [torch.empty(shape, dtype=dtype, device=device) for shape in shapes]
        for buf in self.bufs:
            buf.zero_()  # the vocab-parallel head writes only its columns: the rest stay zero
        self.outs = [torch.empty_like(buf) for buf in self.bufs] if count > 1 else self.bufs

    def __call__(self, site: int) -> torch.Tensor:
        buf, out = self.bufs[site], self.outs[site]
        if self.symmetric:
            return torch.ops.symm_mem.one_shot_all_reduce_out(buf, "sum", self.group, out)
        return self.reduce(out.copy_(buf), site) if self.count > 1 else buf


class FusedTPDecode:
    """``steps`` greedy steps of ``batch`` rows on one rank's shard (``model``; ``cache``, its ``shard_cache``)
    in one CUDA graph (called directly on a CPU): ``generate(first, start)`` -> tokens (batch, steps), top
    logits (batch, steps, top). Warm-up and capture start at ``kv_len - 1`` (past every prompt)."""
    pdl: dict[str, bool] = {}  # the Triton launches' PDL options (``ch16_fp8_kv._pdl_enter``): ``_push_pdl``'s

    def __init__(self, model: ShardedDecoder, cache: DenseKVCache, shard: Shard, batch: int, kv_len: int,
                 steps: int, top: int, reduce: Reduce = nccl_reduce) -> None:
        emb = model.embed.weight
        device, dtype, cfg = emb.device, emb.dtype, model.cfg
        self.model, self.cache, self.cfg, self.kv_len, self.shard = model, cache, cfg, kv_len, shard
        self.vocab = model.head.weight[shard.part(cfg.vocab)]  # this rank's rows of the LM head
        self.heads, self.kv_heads = cfg.heads // shard.count, cfg.kv_heads // shard.count
        qkv_width = (self.heads + 2 * self.kv_heads) * cfg.head_dim
        self.ffn, self.splits = cfg.ffn // shard.count, triton.next_power_of_2(triton.cdiv(kv_len, SPLIT_LEN))
        self.sites = ReduceSites([(batch, cfg.dim)] * (2 * cfg.layers) + [(batch, cfg.vocab)], dtype, device,
                                 shard.count, reduce)

        def new(*shape: int, kind: torch.dtype = dtype) -> torch.Tensor:
            return torch.zeros(shape, dtype=kind, device=device)
        self.x, self.xn, self.qkv = new(batch, cfg.dim), new(batch, cfg.dim), new(batch, qkv_width)
        self.q, self.attn = new(batch, self.heads, cfg.head_dim), new(batch, self.heads * cfg.head_dim)
        self.parts = new(batch * self.heads * self.splits, cfg.head_dim, kind=torch.float32)
        self.ml = new(batch * self.heads * self.splits, 2, kind=torch.float32)
        self.gate_up, self.act = new(batch, 2 * self.ffn), new(batch, self.ffn)
        self.ones = torch.ones(max(cfg.dim, qkv_width), device=device)  # unit scales of the fp8 kernels
        self.tok, self.pos = new(batch, kind=torch.long), new(batch, kind=torch.long)
        self.tokens, self.tops = new(steps, batch, kind=torch.long), new(steps, batch, top, kind=torch.float32)
        self.graph = StepGraph(self._call, self._prime, device)

    def _prime(self) -> None:
        self.tok.zero_(), self.pos.fill_(self.kv_len - 1)

    def _norm(self, summed: torch.Tensor | None, norm: torch.nn.RMSNorm) -> None:
        """x += summed (None: x = the embedding rows of tok); xn = norm(x)."""
        (rows, dim), embed = self.x.shape, summed is None
        eps = norm.eps if norm.eps is not None else torch.finfo(torch.float32).eps
        _add_norm[(rows,)](self.x if embed else summed, self.ones, self.model.embed.weight if embed else self.x,
                           self.tok, norm.weight, self.x, self.xn, rows * dim, dim, eps, SPLITS=1, EMBED=embed,
                           BLOCK=triton.next_power_of_2(dim), num_warps=8, **self.pdl)

    def _attention(self, layer: int) -> None:
        """attn = attention of the rank's heads over the cache, the new key and value written first."""
        cfg, rows, k, v = self.cfg, self.x.shape[0], self.cache.k[layer], self.cache.v[layer]
        groups, hd, max_len, width = self.heads // self.kv_heads, cfg.head_dim, k.shape[2], self.qkv.shape[1]
        _rope_cache[(rows, self.heads + 2 * self.kv_heads)](
            self.qkv, self.ones, self.pos, self.q, k, v, rows * width, width, max_len, math.log2(cfg.rope_base),
            SPLITS=1, HEADS=self.heads, KV_HEADS=self.kv_heads, D=hd, num_warps=1, **self.pdl)
        _attend[(rows * self.kv_heads, self.splits)](
            self.q, k, v, self.pos, self.parts, self.ml, max_len, math.log2(math.e) / hd**0.5,
            KV_HEADS=self.kv_heads, GROUPS=groups, G_PAD=G_PAD, D=hd, SPLIT_LEN=SPLIT_LEN, BLOCK_N=BLOCK_KEYS,
            num_warps=4, num_stages=2, **self.pdl)
        _combine[(rows * self.heads,)](self.parts, self.ml, self.ones, self.attn, KV_HEADS=self.kv_heads,
                                       SPLITS=self.splits, GROUPS=groups, D=hd, num_warps=4, **self.pdl)

    def _step(self, t: int) -> None:
        blocks, sites, rows = list(self.model.blocks), self.sites, self.x.shape[0]
        self._norm(None, blocks[0].norm1)
        for i, blk in enumerate(blocks):
            torch.mm(self.xn, blk.qkv.t(), out=self.qkv)
            self._attention(i)
            torch.mm(self.attn, blk.out.t(), out=sites.bufs[2 * i])
            self._norm(sites(2 * i), blk.norm2)
            torch.mm(self.xn, blk.gate_up.t(), out=self.gate_up)
            _glu[(rows, triton.cdiv(self.ffn, GLU_BLOCK))](self.gate_up, self.act, self.ffn, BLOCK=GLU_BLOCK,
                                                          num_warps=4)
            torch.mm(self.act, blk.down.t(), out=sites.bufs[2 * i + 1])
            self._norm(sites(2 * i + 1), blocks[i + 1].norm1 if i + 1 < len(blocks) else self.model.norm)
        head = len(blocks) * 2
        torch.mm(self.xn, self.vocab.t(), out=sites.bufs[head][:, self.shard.part(self.cfg.vocab)])
        logits = sites(head)
        _top_feedback[(rows,)](logits, self.tops[t], self.tokens[t], self.tok, self.pos, self.cfg.vocab,
                               TOP=self.tops.shape[2], BLOCK=triton.next_power_of_2(self.cfg.vocab), num_warps=16)

    def _call(self) -> None:
        for t in range(len(self.tokens)):
            self._step(t)

    def generate(self, first: torch.Tensor, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.tok.copy_(first)
        self.pos.fill_(start)
        self.graph()
        return self.tokens.t().contiguous(), self.tops.transpose(0, 1).contiguous()

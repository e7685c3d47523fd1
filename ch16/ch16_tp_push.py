"""The ``_push`` variant's step: ``ch16_tp_fused.FusedTPDecode`` with its 5 one-shot all-reduce kernels
a step folded into the kernels that consume the sums (2 ranks): 23 kernels a step instead of 28.

Each row-parallel GEMM writes its partial locally; :func:`_push_norm` (a program per row) stores the
row into the peer's inbox (its symmetric buffer of the site) over NVLink, meets the peer's program of
the row at a flag pair in the signal pads (:func:`_meet`), reads the peer's row from its own inbox
(local, no P2P load) and adds both partials (round(a + b), as the one-shot kernel, on both ranks),
the residual and the next RMSNorm; :func:`_push_top` does the LM head's half-rows, then the top 4.
A rank refills site s only after its peer passed the later sites' flags (read site s). Gloo ranks
(CPU tests): the peer's data comes by ``all_gather``, its flags set as it would set them. ``PDL``: each
kernel waits for its predecessor before any push, flag or err access (``_push_pdl``'s docstring: why).
"""

from __future__ import annotations

from functools import cached_property

import torch
import torch.distributed as dist
import triton
import triton.language as tl
from ch16_fp8_kv import _pdl_enter
from ch16_fused_decode import _store_norm, _top_feedback
from ch16_tp import Shard, ShardedDecoder
from ch16_tp_fused import GLU_BLOCK, FusedTPDecode, ReduceSites, _glu

from aisp.kits.llm import DenseKVCache

SPINS = 1 << 23  # polls before a flag gives up (err set, later waits skipped): seconds; fails, never hangs


@triton.jit
def _meet(send_ptr, wait_ptr, err_ptr, SPINS: tl.constexpr):
    """Peer's flag 0 -> 1 (release: after the stores), own flag 1 -> 0 (acquire: before the loads)."""
    n = tl.where(tl.load(err_ptr, volatile=True) == 0, 0, SPINS)
    while (tl.atomic_cas(send_ptr, 0, 1, sem="release", scope="sys") != 0) & (n < SPINS):
        n += 1
    while (tl.atomic_cas(wait_ptr, 1, 0, sem="acquire", scope="sys") != 1) & (n < SPINS):
        n += 1
    tl.atomic_xchg(err_ptr, 1, mask=n >= SPINS)


@triton.jit
def _push_norm(part_ptr, box_ptr, peer_box_ptr, pad_ptr, peer_pad_ptr, err_ptr, x_ptr, w_ptr, xn_ptr, N, eps,
               SPINS: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    """Row r: peer_box[r] = part[r]; meet the peer at flag r; x[r] += round(part[r] + box[r]);
    xn[r] = RMSNorm(x[r]) * w (``ch16_fused_decode._add_norm``'s rounding)."""
    row, offs = tl.program_id(0), tl.arange(0, BLOCK)
    inside = offs < N
    w = _pdl_enter(PDL, w_ptr, offs, inside)  # PDL: the norm weights (no kernel writes them) before the wait
    mine = tl.load(part_ptr + row * N + offs, mask=inside, other=0.0)
    tl.store(peer_box_ptr + row * N + offs, mine, mask=inside)
    tl.debug_barrier()  # every thread's stores before the release
    _meet(peer_pad_ptr + row, pad_ptr + row, err_ptr, SPINS)
    theirs = tl.load(box_ptr + row * N + offs, mask=inside, other=0.0, cache_modifier=".cg")
    y = (mine.to(tl.float32) + theirs.to(tl.float32)).to(x_ptr.dtype.element_ty).to(tl.float32)
    x = (tl.load(x_ptr + row * N + offs, mask=inside, other=0.0).to(tl.float32) + y)
    _store_norm(x.to(x_ptr.dtype.element_ty).to(tl.float32), w_ptr, x_ptr, xn_ptr, row, offs, inside, N, eps, w)


@triton.jit
def _push_top(logits_ptr, peer_ptr, pad_ptr, peer_pad_ptr, err_ptr, top_ptr, next_ptr, tok_ptr, pos_ptr, V, lo, hi,
              SPINS: tl.constexpr, TOP: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    """Row r: this rank's logits [lo, hi) of row r to the peer's buffer; meet the peer at flag r; then
    ``_top_feedback`` on the whole row (the peer's columns pushed into this rank's buffer)."""
    _pdl_enter(PDL)
    row, offs = tl.program_id(0), tl.arange(0, BLOCK)
    mine = (offs >= lo) & (offs < hi)
    own = tl.load(logits_ptr + row * V + offs, mask=mine, other=0.0, cache_modifier=".cg")  # none left in L1
    tl.store(peer_ptr + row * V + offs, own, mask=mine)
    tl.debug_barrier()
    _meet(peer_pad_ptr + row, pad_ptr + row, err_ptr, SPINS)
    _top_feedback(logits_ptr, top_ptr, next_ptr, tok_ptr, pos_ptr, V, TOP, BLOCK)


class PushLinks:
    """Per buffer of ``sites``: the peer's (mapped here), this rank's and the peer's flags (``rows`` of
    its signal pad); ``err`` (1 once a flag timed out). Gloo: local stand-ins, :meth:`emulate`."""

    def __init__(self, sites: ReduceSites, rank: int, rows: int) -> None:
        if sites.count != 2:
            raise ValueError(f"the push all-reduce joins 2 ranks, not {sites.count}")
        self.sites, self.rank, self.rows = sites, rank, rows
        self.err = torch.zeros(1, dtype=torch.int32, device=sites.bufs[0].device)
        if sites.symmetric:
            import torch.distributed._symmetric_memory as symm_mem  # CUDA builds only
            hs = [(symm_mem.rendezvous(buf, sites.group), buf) for buf in sites.bufs]
            at = [(b.data_ptr() - h.get_buffer(rank, (1,), b.dtype).data_ptr()) // b.element_size() for h, b in hs]
            self.peer_bufs = [h.get_buffer(1 - rank, tuple(b.shape), b.dtype, o) for (h, b), o in zip(hs, at, strict=True)]
            self.pads, self.peer_pads = ([h.get_signal_pad(r, (rows,), torch.int32) for h, _ in hs] for r in (rank, 1 - rank))
        else:
            self.peer_bufs = [torch.zeros_like(buf) for buf in sites.bufs]
            self.pads, self.peer_pads = ([self.err.new_zeros(rows) for _ in sites.bufs] for _ in range(2))

    def emulate(self, site: int, part: torch.Tensor, cols: slice = slice(None)) -> None:
        """Gloo: the peer's ``part`` (columns ``cols``) into this rank's ``site`` buffer, flags as it leaves them."""
        if self.sites.symmetric:
            return
        both = [torch.empty_like(part) for _ in range(2)]
        dist.all_gather(both, part.contiguous())
        self.sites.bufs[site][:, cols] = both[1 - self.rank][:, cols]
        self.pads[site].fill_(1), self.peer_pads[site].zero_()


class PushTPDecode(FusedTPDecode):
    """``FusedTPDecode``, all-reduces by :func:`_push_norm` / :func:`_push_top` (at one shard: its step)."""

    @cached_property
    def links(self) -> PushLinks:
        return PushLinks(self.sites, self.shard.index, self.x.shape[0])  # first built in the first warm-up step

    def __init__(self, model: ShardedDecoder, cache: DenseKVCache, shard: Shard, *args, **kwargs) -> None:
        super().__init__(model, cache, shard, *args, **kwargs)
        if self.shard.count == 2 and self.links.err.item():
            raise RuntimeError("a rank-to-rank flag timed out in the warm-up steps")

    def _norm(self, part: torch.Tensor | None, norm: torch.nn.RMSNorm, site: int = -1) -> None:
        """x += part + the peer's partial of ``site``; xn = norm(x) (no site: ``FusedTPDecode``'s)."""
        if site < 0:
            return super()._norm(part, norm)
        links, (rows, dim) = self.links, self.x.shape
        links.emulate(site, part)
        eps = norm.eps if norm.eps is not None else torch.finfo(torch.float32).eps
        _push_norm[(rows,)](part, self.sites.bufs[site], links.peer_bufs[site], links.pads[site],
                            links.peer_pads[site], links.err, self.x, norm.weight, self.xn, dim, eps, SPINS=SPINS,
                            BLOCK=triton.next_power_of_2(dim), num_warps=8, **self.pdl)

    def _step(self, t: int) -> None:
        if self.shard.count == 1:
            return super()._step(t)
        blocks, sites, rows, cfg = list(self.model.blocks), self.sites, self.x.shape[0], self.cfg
        self._norm(None, blocks[0].norm1)
        for i, blk in enumerate(blocks):
            torch.mm(self.xn, blk.qkv.t(), out=self.qkv)
            self._attention(i)
            torch.mm(self.attn, blk.out.t(), out=sites.outs[2 * i])
            self._norm(sites.outs[2 * i], blk.norm2, 2 * i)
            torch.mm(self.xn, blk.gate_up.t(), out=self.gate_up)
            _glu[(rows, triton.cdiv(self.ffn, GLU_BLOCK))](self.gate_up, self.act, self.ffn, BLOCK=GLU_BLOCK, num_warps=4,
                                                          **self.pdl)
            torch.mm(self.act, blk.down.t(), out=sites.outs[2 * i + 1])
            self._norm(sites.outs[2 * i + 1], blocks[i + 1].norm1 if i + 1 < len(blocks) else self.model.norm, 2 * i + 1)
        links, cols, logits = self.links, self.shard.part(cfg.vocab), sites.bufs[-1]  # the last site: the head
        torch.mm(self.xn, self.vocab.t(), out=logits[:, cols])
        links.emulate(-1, logits, Shard(1 - self.shard.index, 2).part(cfg.vocab))
        _push_top[(rows,)](logits, links.peer_bufs[-1], links.pads[-1], links.peer_pads[-1], links.err,
                           self.tops[t], self.tokens[t], self.tok, self.pos, cfg.vocab, cols.start, cols.stop,
                           SPINS=SPINS, TOP=self.tops.shape[2], BLOCK=triton.next_power_of_2(cfg.vocab), num_warps=16,
                           **self.pdl)

"""The receiver's checksum (``ch15_kv_transfer.checksum``: one fp32 sum per pool page) with PyTorch's CUDA
summation order reproduced bit for bit, but computed a run of layers at a time, so each chunk's share is
summed as soon as it is scattered and only the last chunk's share is left after the transfer.

PyTorch's reduction (ATen ``Reduce.cuh``) for a bf16 pool (layers, pages, heads, tokens, dim) summed over
all dims but pages, with R = layers x page elements in 8,192..131,071, at least 16 pages and 512 | R: one
block of 32 x 16 threads per page; thread (x, y) adds the page's elements x + 32 y + 512 k, k = 0, 1, ...
(layer-major, so layer l holds k in [l S, (l + 1) S), S = page elements / 512) into accumulator k % 4;
combines them ((a0 + a1) + a2) + a3; each warp folds its 32 lanes with ``shfl_down`` (offsets 16, 8, 4,
2, 1 on CUDA in recent PyTorch; older releases 1, 2, 4, 8, 16: ``down=False``); the 16 warps fold in
shared memory (offsets 8, 4, 2, 1). The four accumulators per (page, thread) are the state between runs
of layers (8 KiB a page). ``calibrate`` checks which fold order the installed PyTorch uses, on this GPU,
against ``checksum`` itself; without a bit-exact match the caller keeps ``checksum``.
"""

from __future__ import annotations

import torch

THREADS, LANES, WARPS = 512, 32, 16
"""PyTorch's block for this reduction: 32 lanes x 16 warps."""


def applies(pool: torch.Tensor) -> bool:
    """Whether ``pool``'s checksum takes the path described above (so the kernel can match it) and the
    kernel's layout assumptions hold: contiguous bf16 on CUDA, a page a multiple of 2,048 elements (a layer
    boundary falls on a multiple of 4 k-steps), 16-byte aligned."""
    if pool.dim() < 3 or not pool.is_cuda or pool.dtype != torch.bfloat16 or not pool.is_contiguous():
        return False
    layers, pages, page = pool.shape[0], pool.shape[1], pool[0, 0].numel()
    return (layers >= 2 and pages >= WARPS and page % (4 * THREADS) == 0 and 8192 <= layers * page < 131072
            and pool.data_ptr() % 16 == 0)


def reference(pool: torch.Tensor, down: bool = True) -> torch.Tensor:
    """The order above in fp32 torch ops (elementwise adds only: exact on any device), for tests."""
    layers, pages = pool.shape[:2]
    x = pool.reshape(layers, pages, -1, THREADS).float().permute(1, 0, 2, 3).reshape(pages, -1, THREADS)
    acc = torch.zeros(pages, 4, THREADS)
    for k in range(x.shape[1]):
        acc[:, k % 4] += x[:, k].cpu()
    v = (((acc[:, 0] + acc[:, 1]) + acc[:, 2]) + acc[:, 3]).reshape(pages, WARPS, LANES)
    while v.shape[-1] > 1:
        half = v.shape[-1] // 2
        v = v[..., :half] + v[..., half:] if down else v[..., 0::2] + v[..., 1::2]
    w = v[..., 0]
    while w.shape[-1] > 1:
        half = w.shape[-1] // 2
        w = w[..., :half] + w[..., half:]
    return w[..., 0].to(pool.device)


class PageSums:
    """Per-page checksums of one or more pools, a run of layers at a time (Triton, on CUDA)."""

    def __init__(self, pool: torch.Tensor, state: torch.Tensor, down: bool) -> None:
        self.layers, self.pages, self.page = pool.shape[0], pool.shape[1], pool[0, 0].numel()
        self.state, self.down = state, down

    @staticmethod
    def workspace(pools: int, pool: torch.Tensor) -> torch.Tensor:
        """The state of ``pools`` pools shaped as ``pool``: 4 fp32 accumulators a thread, a page."""
        return torch.empty(pools, pool.shape[1], 4 * THREADS, device=pool.device, dtype=torch.float32)

    def add(self, pool: torch.Tensor, which: int, layers: slice, out: torch.Tensor) -> None:
        """Add ``pool``'s ``layers`` (a run; the first starts at 0, the last ends at the pool's last layer)
        into state ``which``; after the last layer, write the sums into ``out`` (fp32, one per page)."""
        from ch15_page_sums_triton import page_sums_kernel
        assert pool.shape[:2] == (self.layers, self.pages) and 0 <= layers.start < layers.stop <= self.layers
        assert out.dtype == torch.float32 and out.is_contiguous() and out.numel() == self.pages
        steps = self.page // THREADS
        page_sums_kernel[(self.pages,)](pool, self.state[which], out, self.pages * self.page,
                                        layers.start * steps, layers.stop * steps, S=steps,
                                        FIRST=layers.start == 0, LAST=layers.stop == self.layers,
                                        DOWN=self.down, num_warps=4)


def calibrate(like: torch.Tensor, checksum) -> PageSums | None:
    """A ``PageSums`` for pools shaped as ``like`` (its state for 2 pools), with the fold order that
    reproduces ``checksum`` bit for bit on 17 random pages of this GPU (run a layer at a time, so the
    state between runs is checked too); None where the kernel does not apply or neither order matches."""
    if not applies(like):
        return None
    gen = torch.Generator(device=like.device).manual_seed(5)
    probe = torch.randn(like.shape[0], 17, *like.shape[2:], device=like.device, generator=gen)
    scale = torch.randint(-6, 7, probe.shape, device=like.device, generator=gen).float().exp2()
    probe = (probe * scale).to(torch.bfloat16)
    want = checksum(probe)
    for down in (True, False):
        sums = PageSums(probe, PageSums.workspace(2, like), down)
        got = torch.full_like(want, float("nan"))
        for layer in range(probe.shape[0]):
            sums.add(probe, 1, slice(layer, layer + 1), got)
        if torch.equal(got.view(torch.int32), want.view(torch.int32)):
            return PageSums(like, sums.state, down)
    return None

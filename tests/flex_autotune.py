"""What the FlexAttention ``_autotuned`` variants' tests share: each variant's output beside its
parent's on a CPU, a stand-in ``torch.compile`` that records its arguments (the CUDA path checked
without a GPU), and the two mask properties behind the kernel_options ROWS_GUARANTEED_SAFE and
BLOCKS_ARE_CONTIGUOUS, checked on a BlockMask."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.nn.attention.flex_attention import BlockMask

AUTOTUNE = {"dynamic": False, "mode": "max-autotune-no-cudagraphs"}
"""The torch.compile arguments every autotuned variant passes on a GPU."""
SMALLEST_BLOCK_N = 64
"""The narrowest key step (BLOCK_N) among max-autotune's forward configs."""


def outputs(build: Callable[[str, int], Any], *modules: str) -> list[torch.Tensor]:
    """Each module's benchmark from ``build(module, seed=0)`` (the chapter test's CPU builder), set
    up and run once."""
    found = []
    for module in modules:
        bench = build(module, 0)
        bench.setup()
        found.append(bench.run())
    return found


class CompileRecorder:
    """Stands in for ``torch.compile``: records each call's keyword arguments and returns ``fn``."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, fn: Callable[..., Any], **kwargs: Any) -> Callable[..., Any]:
        self.calls.append(kwargs)
        return fn


def _tiles(mask: BlockMask):
    batch, heads, q_tiles = mask.kv_num_blocks.shape
    for b in range(batch):
        for h in range(heads):
            for i in range(q_tiles):
                yield b, h, i


def rows_guaranteed_safe(mask: BlockMask) -> bool:
    """Whether every query row sees a key in the first step the kernel takes for its query tile:
    the first ``SMALLEST_BLOCK_N`` keys of the first listed partial tile (partial tiles are visited
    before full ones), or a full tile. Otherwise a row's running max is -inf after that step and
    ROWS_GUARANTEED_SAFE would turn it into NaN."""
    tile_q, tile_kv = mask.BLOCK_SIZE
    q_len = mask.seq_lengths[0]
    for b, h, i in _tiles(mask):
        rows = torch.arange(i * tile_q, min((i + 1) * tile_q, q_len))
        if mask.kv_num_blocks[b, h, i] == 0:
            if mask.full_kv_num_blocks is None or mask.full_kv_num_blocks[b, h, i] == 0:
                return False
            continue
        first = int(mask.kv_indices[b, h, i, 0]) * tile_kv
        keys = torch.arange(first, first + SMALLEST_BLOCK_N)
        seen = mask.mask_mod(torch.tensor(b), torch.tensor(h), rows[:, None], keys[None, :])
        if not seen.any(1).all():
            return False
    return True


def blocks_are_contiguous(mask: BlockMask) -> bool:
    """Whether every query tile's partial tiles, and its full tiles, are consecutive key tiles in
    ascending order (the kernel then steps to the next tile without loading its index)."""
    lists = [(mask.kv_num_blocks, mask.kv_indices)]
    if mask.full_kv_num_blocks is not None:
        lists.append((mask.full_kv_num_blocks, mask.full_kv_indices))
    for counts, indices in lists:
        for b, h, i in _tiles(mask):
            listed = indices[b, h, i, :int(counts[b, h, i])]
            if len(listed) and not torch.equal(listed, torch.arange(int(listed[0]), int(listed[0]) + len(listed),
                                                                    dtype=listed.dtype)):
                return False
    return True

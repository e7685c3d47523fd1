"""KV caches for :class:`aisp.kits.llm.model.Decoder`: a preallocated (dense) one and a paged one.

Both hold keys and values of every layer and are *bound* to one forward with ``bind(positions,
rows)``: which cache rows (sequences) the batch's rows are, and the position of every new token.
The bound step writes the new keys/values at those positions (one indexed store per layer and K/V
into the flat (slots, dim) view of the storage), reads back every key up to the longest position,
and masks keys after each query's own position. Storage starts zeroed, so
masked slots never hold NaN (a masked NaN would still poison attention's weighted sum).

* :class:`DenseKVCache` reserves ``max_len`` slots per row: (layers, rows, kv_heads, max_len, dim).
* :class:`PagedKVCache` holds a pool of ``page_size``-token pages, (layers, pages, kv_heads,
  page_size, dim), and a block table per row that maps a position's page index to a pool page.
  Page 0 is a trash page: unused table entries point to it, so padding tokens and finished rows
  write there harmlessly (their slots are always masked). :class:`PagePool` hands pages out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from aisp.kits.llm.config import LLMConfig


class KVCache(Protocol):
    """What attention needs from a cache bound to one forward."""

    fresh: bool
    """Every row starts at position 0: attention needs only the new keys (no read, no mask)."""
    tail: bool
    """Every row's new tokens are its last ones, positions kv_len - tokens .. kv_len - 1: attention
    reads the cache (exactly kv_len keys) and is causal aligned to the lower right (no mask)."""

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store new keys/values (batch, tokens, kv_heads, dim) at the bound positions."""

    def read(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values (batch, kv_heads, kv_len, dim): every slot before the bound ``kv_len``."""

    def mask(self, positions: torch.Tensor) -> torch.Tensor:
        """Boolean (batch, 1, tokens, keys): key j is visible to the query at position p iff j <= p."""


def visible(positions: torch.Tensor, keys: int) -> torch.Tensor:
    return (torch.arange(keys, device=positions.device) <= positions[..., None])[:, None]


def slots(blocks: torch.Tensor, offsets: torch.Tensor, heads: int, block_len: int) -> torch.Tensor:
    """Indices (batch, tokens, heads) into storage (blocks, heads, block_len, dim) viewed as (slots, dim)
    of every new token's key/value head: token (i, j) is at offset ``offsets[i, j]`` of block ``blocks[i, j]``."""
    head = torch.arange(heads, device=offsets.device)
    return (blocks[..., None] * heads + head) * block_len + offsets[..., None]


class DenseKVCache:
    """``max_len`` slots reserved for each of ``rows`` sequences."""

    def __init__(self, cfg: LLMConfig, rows: int, max_len: int, device: torch.device, dtype: torch.dtype) -> None:
        shape = (cfg.layers, rows, cfg.kv_heads, max_len, cfg.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)

    def bind(self, positions: torch.Tensor, kv_len: int, rows: torch.Tensor | None = None,
             fresh: bool = False, tail: bool = False) -> DenseStep:
        """A step writing at ``positions`` (batch, tokens) of cache ``rows`` (the first batch rows when None);
        ``kv_len`` bounds every position + 1 (known on the host, so no sync); ``fresh``: the rows
        start at position 0 (a prefill); ``tail``: every row's positions are kv_len - tokens ..
        kv_len - 1 (a prefill chunk after cached ones; the caller's promise, as kv_len is)."""
        return DenseStep(self, positions, kv_len, rows, fresh, tail)

    def nbytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()


class DenseStep:
    def __init__(self, cache: DenseKVCache, positions: torch.Tensor, kv_len: int, rows: torch.Tensor | None,
                 fresh: bool, tail: bool = False) -> None:
        self.kv_len, self.rows, self.fresh, self.tail = kv_len, rows, fresh, tail
        count = positions.shape[0]
        rows_index = torch.arange(count, device=positions.device) if rows is None else rows
        layers, _, heads, max_len, dim = cache.k.shape
        self.slots = slots(rows_index[:, None].expand_as(positions), positions, heads, max_len)
        self.flat = cache.k.view(layers, -1, dim), cache.v.view(layers, -1, dim)
        live = slice(None, count if rows is None else None)  # the rows read (all, then indexed, when given)
        self.live = cache.k[:, live, :, :kv_len], cache.v[:, live, :, :kv_len]

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        self.flat[0][layer].index_put_((self.slots,), k)
        self.flat[1][layer].index_put_((self.slots,), v)

    def read(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        k, v = self.live[0][layer], self.live[1][layer]
        return (k, v) if self.rows is None else (k[self.rows], v[self.rows])

    def mask(self, positions: torch.Tensor) -> torch.Tensor:
        return visible(positions, self.kv_len)


class PagePool:
    """Host-side free list of pool pages 1..pages-1 (page 0 is the trash page)."""

    def __init__(self, pages: int) -> None:
        self.free = list(range(pages - 1, 0, -1))

    def allocate(self, n: int) -> list[int]:
        if n > len(self.free):
            raise MemoryError(f"KV page pool exhausted: {n} pages asked, {len(self.free)} free")
        return [self.free.pop() for _ in range(n)]

    def release(self, pages: list[int]) -> None:
        self.free.extend(reversed(pages))


def pages_for(tokens: int, page_size: int) -> int:
    return -(-tokens // page_size)


@dataclass(frozen=True)
class PageLayout:
    pages: int
    """Pool pages, the trash page 0 included."""
    page_size: int = 16
    """Tokens per page."""
    rows: int = 1
    """Sequences with a block table row."""
    max_pages: int = 1
    """Block table width: pages the longest sequence may hold."""


class PagedKVCache:
    """A pool of pages and a block table (``layout``), all pages zeroed, every table entry the trash page."""

    def __init__(self, cfg: LLMConfig, layout: PageLayout, device: torch.device, dtype: torch.dtype) -> None:
        shape = (cfg.layers, layout.pages, cfg.kv_heads, layout.page_size, cfg.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.page_size = layout.page_size
        self.table = torch.zeros(layout.rows, layout.max_pages, device=device, dtype=torch.long)

    def assign(self, row: int, pages: list[int]) -> None:
        """Row ``row``'s positions 0.. live in ``pages`` (the rest of its table: the trash page)."""
        entries = torch.zeros(self.table.shape[1], dtype=torch.long, pin_memory=self.table.is_cuda)
        entries[:len(pages)] = torch.tensor(pages, dtype=torch.long)
        self.table[row].copy_(entries, non_blocking=True)

    def bind(self, positions: torch.Tensor, kv_len: int, rows: torch.Tensor | None = None,
             fresh: bool = False, tail: bool = False) -> PagedStep:
        """As :meth:`DenseKVCache.bind`, through the rows' block tables."""
        return PagedStep(self, positions, kv_len, rows, fresh, tail)

    def nbytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()


class PagedStep:
    def __init__(self, cache: PagedKVCache, positions: torch.Tensor, kv_len: int, rows: torch.Tensor | None,
                 fresh: bool, tail: bool = False) -> None:
        ps, self.fresh, self.tail, self.kv_len = cache.page_size, fresh, tail, kv_len
        table = cache.table[:positions.shape[0]] if rows is None else cache.table[rows]
        self.cache, self.pages = cache, table[:, :pages_for(kv_len, ps)]
        layers, _, heads, _, dim = cache.k.shape
        self.slots = slots(table.gather(1, positions // ps), positions % ps, heads, ps)
        self.flat = cache.k.view(layers, -1, dim), cache.v.view(layers, -1, dim)

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        self.flat[0][layer].index_put_((self.slots,), k)
        self.flat[1][layer].index_put_((self.slots,), v)

    def read(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        def gather(pool: torch.Tensor) -> torch.Tensor:
            b, n = self.pages.shape
            g = pool[self.pages]  # (batch, pages, kv_heads, page_size, dim)
            return g.transpose(1, 2).reshape(b, g.shape[2], n * g.shape[3], g.shape[4])[:, :, :self.kv_len]
        return gather(self.cache.k[layer]), gather(self.cache.v[layer])

    def mask(self, positions: torch.Tensor) -> torch.Tensor:
        return visible(positions, self.kv_len)

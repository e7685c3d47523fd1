"""The host side of a serving step, for ch16:async_scheduling: a paged-cache scheduler that, per
decode step, places each running request's next position (taking a new page from the pool when it
crosses a page boundary), stages positions and block tables in a host buffer for the graphed step,
and, once a step's tokens are on the host, does a server's per-token output work (append the token,
detokenize it, check a stop string). Reset to the post-prefill state at the start of every call."""

from __future__ import annotations

import torch

from aisp.kits.llm import PagePool

STOP = "<|end|>"
"""A stop string the outputs are checked for (it never occurs: the stream fixes output lengths)."""


class Scheduler:
    def __init__(self, pool: PagePool, pages: list[list[int]], lengths: list[int], table: torch.Tensor,
                 page_size: int) -> None:
        self.initial = (list(pool.free), [list(p) for p in pages], list(lengths))
        self.pool, self.table, self.page_size = pool, table.clone(), page_size
        self.pieces = [f" w{i}" for i in range(65536)]
        """Stand-in detokenizer: the text of every token id."""
        self.reset()

    def reset(self) -> None:
        free, pages, lengths = self.initial
        self.pool.free, self.pages, self.lengths = list(free), [list(p) for p in pages], list(lengths)
        for s, row in enumerate(self.pages):
            self.table[s, :len(row)] = torch.tensor(row)
            self.table[s, len(row):] = 0
        self.tokens: list[list[int]] = [[] for _ in self.pages]
        self.texts = ["" for _ in self.pages]
        self.stopped = [False for _ in self.pages]

    def prepare(self, positions: torch.Tensor, table: torch.Tensor) -> None:
        """The next step's positions (rows,) and block tables (rows, width) into host buffers; a row
        whose position opens a page gets one from the pool."""
        for s, pos in enumerate(self.lengths):
            if pos // self.page_size == len(self.pages[s]):
                page = self.pool.allocate(1)[0]
                self.table[s, len(self.pages[s])] = page
                self.pages[s].append(page)
        positions.copy_(torch.tensor(self.lengths))
        table.copy_(self.table)
        self.lengths = [n + 1 for n in self.lengths]

    def process(self, tokens: torch.Tensor) -> None:
        """A step's tokens (rows,), on the host: append, detokenize, check the stop string."""
        for s, token in enumerate(tokens.tolist()):
            self.tokens[s].append(token)
            self.texts[s] += self.pieces[token]
            self.stopped[s] = self.stopped[s] or STOP in self.texts[s][-16:]

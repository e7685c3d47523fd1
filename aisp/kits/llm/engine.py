"""Greedy generation loops over a KV cache: prefill, one decode step, static batches, and
iteration-level (continuous) batching. None of them waits for the device: lengths are known on the
host (the request stream fixes each output length), tokens stay on the device.

Outputs are :class:`Generated`: per request and output step the greedy token (-1 after the
request's last one) and the ``TOP`` largest logits (fp32, 0 after the last token).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from aisp.kits.llm.cache import DenseKVCache, PagedKVCache, PagePool, pages_for
from aisp.kits.llm.model import Decoder
from aisp.kits.llm.requests import Request
from aisp.kits.llm.sampling import greedy_top

Cache = DenseKVCache | PagedKVCache
TOP = 4
"""Logits kept per generated token for verification."""


@dataclass(frozen=True)
class Generated:
    tokens: torch.Tensor
    """(requests, longest output) int64, -1 after each request's last token."""
    top: torch.Tensor
    """(requests, longest output, TOP) fp32: the step's largest logits, 0 after the last token."""

    @classmethod
    def empty(cls, requests: Sequence[Request], device: torch.device) -> Generated:
        longest = max(r.output_len for r in requests)
        return cls(torch.full((len(requests), longest), -1, dtype=torch.long, device=device),
                   torch.zeros(len(requests), longest, TOP, device=device))

    def as_tuple(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.tokens, self.top


def on_device(values: Sequence[int], device: torch.device) -> torch.Tensor:
    """int64 ``values`` on ``device`` without blocking the host: staged in pinned memory on CUDA
    (``torch.tensor(values, device=cuda)`` copies from pageable memory and waits for the GPU)."""
    return torch.tensor(values, dtype=torch.long, pin_memory=device.type == "cuda").to(device, non_blocking=True)


def right_pad(prompts: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    """(batch, longest) token ids, zeros after each prompt."""
    return torch.nn.utils.rnn.pad_sequence([p.to(device) for p in prompts], batch_first=True)


def prefill(model: Decoder, cache: Cache, prompts: Sequence[torch.Tensor], rows: torch.Tensor | None = None) -> torch.Tensor:
    """Writes the prompts' keys/values into cache ``rows`` (the first ones when None) from position
    0; returns the logits (batch, vocab) after each prompt's last token."""
    tokens = right_pad(prompts, model.head.weight.device)
    b, p = tokens.shape
    positions = torch.arange(p, device=tokens.device).expand(b, p)
    hidden = model.hidden(tokens, positions, cache.bind(positions, p, rows, fresh=True))
    last = on_device([len(x) - 1 for x in prompts], tokens.device)
    return model.head(hidden[torch.arange(b, device=tokens.device), last])


def decode(model: Decoder, cache: Cache, tokens: torch.Tensor, positions: torch.Tensor, kv_len: int) -> torch.Tensor:
    """One token per row (batch,) at ``positions`` (batch,); logits (batch, vocab)."""
    step = cache.bind(positions[:, None], kv_len)
    return model(tokens[:, None], positions[:, None], step)[:, 0]


def finish(out: Generated, group: Sequence[Request], steps: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Stores a batch's per-step (tokens, top logits) as the outputs of ``group``, cut at each
    request's output length."""
    tokens, top = torch.stack([t for t, _ in steps], 1), torch.stack([v for _, v in steps], 1)
    cols = torch.arange(tokens.shape[1], device=tokens.device)
    over = cols >= on_device([r.output_len for r in group], tokens.device)[:, None]
    rids = on_device([r.rid for r in group], tokens.device)
    out.tokens[rids, :tokens.shape[1]] = tokens.masked_fill(over, -1)
    out.top[rids, :tokens.shape[1]] = top.masked_fill(over[..., None], 0.0)


def static_generate(model: Decoder, cache: DenseKVCache, requests: Sequence[Request], batch: int) -> Generated:
    """Requests in arrival order, ``batch`` at a time: prefill the padded batch, then decode every
    row until the batch's longest output is done (finished rows keep stepping: the padding waste)."""
    device = model.head.weight.device
    out = Generated.empty(requests, device)
    for start in range(0, len(requests), batch):
        group = requests[start:start + batch]
        steps = [greedy_top(prefill(model, cache, [r.prompt for r in group]), TOP)]
        positions = on_device([len(r.prompt) for r in group], device)
        kv_len = max(len(r.prompt) for r in group)
        for _ in range(max(r.output_len for r in group) - 1):
            kv_len += 1
            steps.append(greedy_top(decode(model, cache, steps[-1][0], positions, kv_len), TOP))
            positions = positions + 1
        finish(out, group, steps)
    return out


class ContinuousBatcher:
    """``slots`` decode rows refilled at every iteration: a finished request's slot takes the next
    waiting request, which is prefilled into that row before the next decode step. With a
    :class:`PagePool` the cache is paged and a request holds pages for its prompt and output only.
    ``prefill_budget`` caps the padded prompt tokens prefilled together (a scheduler's batched-token
    limit; at least one request is always admitted), which bounds prefill activation memory."""

    def __init__(self, model: Decoder, cache: Cache, slots: int, pool: PagePool | None = None,
                 prefill_budget: int | None = None) -> None:
        self.model, self.cache, self.slots, self.pool = model, cache, slots, pool
        self.prefill_budget = prefill_budget
        self.on_tokens: Callable[[list[int]], None] | None = None
        """Called after every prefill and decode step with the ids of the requests that got a
        token in it (a latency tool synchronizes there and stamps the time; None: no calls)."""
        self.device = model.head.weight.device

    def run(self, requests: Sequence[Request]) -> Generated:
        """Generates every request (arrival order; all treated as waiting); the outputs."""
        out = Generated.empty(requests, self.device)
        zeros = torch.zeros(self.slots, dtype=torch.long, device=self.device)
        self.tok, self.pos, self.col, self.active = zeros.clone(), zeros.clone(), zeros.clone(), zeros.clone()
        self.all_rows = torch.arange(self.slots, device=self.device)
        longest = out.tokens.shape[1]
        self.buf = torch.full((self.slots, longest + 1), -1, dtype=torch.long, device=self.device)
        self.buf_top = torch.zeros(self.slots, longest + 1, TOP, device=self.device)
        self.held: list[Request | None] = [None] * self.slots
        self.left, self.length, self.pages = [0] * self.slots, [0] * self.slots, [[] for _ in range(self.slots)]
        waiting = list(requests)
        while waiting or any(self.held):
            waiting = self._admit(waiting, out)
            if any(self.held):
                self._step(out)
        return out

    def _admit(self, waiting: list[Request], out: Generated) -> list[Request]:
        free = [s for s in range(self.slots) if self.held[s] is None]
        group: list[Request] = []
        for r in waiting[:len(free)]:
            longest = max([len(r.prompt)] + [len(g.prompt) for g in group])
            if group and self.prefill_budget is not None and longest * (len(group) + 1) > self.prefill_budget:
                break
            group.append(r)
        if not group:
            return waiting
        free, rest = free[:len(group)], waiting[len(group):]
        for s, r in zip(free, group, strict=True):
            self.held[s], self.left[s], self.length[s] = r, r.output_len - 1, len(r.prompt)
            if self.pool is not None and isinstance(self.cache, PagedKVCache):
                self.pages[s] = self.pool.allocate(pages_for(len(r.prompt) + r.output_len, self.cache.page_size))
                self.cache.assign(s, self.pages[s])
        rows = on_device(free, self.device)
        first, top = self.fill(group, free, rows)
        self.tok[rows], self.buf[rows, 0], self.buf_top[rows, 0], self.col[rows] = first, first, top, 1
        self.pos[rows] = on_device([len(r.prompt) for r in group], self.device)
        self.active[rows] = 1
        self._notify([r.rid for r in group])
        for s in free:
            if self.left[s] == 0:
                self._release(s, out)
        return rest

    def fill(self, group: list[Request], slots: list[int], rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Puts ``group``'s prompt keys/values into cache ``slots`` (``rows``: the same on the device);
        returns their first tokens and top logits. Here a prefill; a decode-only server (chapter 15's
        disaggregated pair) overrides it to receive them from a prefill server."""
        return greedy_top(prefill(self.model, self.cache, [r.prompt for r in group], rows), TOP)

    def _step(self, out: Generated) -> None:
        kv_len = 1 + max(self.length[s] for s in range(self.slots) if self.held[s] is not None)
        self.tok, top = greedy_top(decode(self.model, self.cache, self.tok, self.pos, kv_len), TOP)
        self.buf[self.all_rows, self.col], self.buf_top[self.all_rows, self.col] = self.tok, top
        self.pos += self.active
        self.col += self.active
        self._notify([r.rid for r in self.held if r is not None])
        for s in range(self.slots):
            if self.held[s] is not None:
                self.left[s] -= 1
                self.length[s] += 1
                if self.left[s] == 0:
                    self._release(s, out)

    def _notify(self, rids: list[int]) -> None:
        if self.on_tokens is not None:
            self.on_tokens(rids)

    def _release(self, s: int, out: Generated) -> None:
        r = self.held[s]
        assert r is not None
        out.tokens[r.rid, :r.output_len] = self.buf[s, :r.output_len]
        out.top[r.rid, :r.output_len] = self.buf_top[s, :r.output_len]
        self.held[s], self.active[s] = None, 0
        if self.pool is not None and isinstance(self.cache, PagedKVCache):
            self.cache.assign(s, [])  # the idle row now writes to the trash page
            self.pool.release(self.pages[s])
            self.pages[s] = []

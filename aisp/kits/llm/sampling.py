"""Next-token choice from logits (batch, vocab): greedy, and top-p (nucleus) sampling on the device."""

from __future__ import annotations

import torch


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """The most likely token per row (batch,)."""
    return logits.argmax(dim=-1)


def greedy_top(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The greedy token per row (batch,) and the row's ``k`` largest logits (batch, k) as fp32:
    what a serving pair returns, so verification sees the context through the logits too."""
    values, indices = logits.topk(k, dim=-1)
    return indices[:, 0], values.float()


def top_p(logits: torch.Tensor, p: float, gen: torch.Generator, temperature: float = 1.0) -> torch.Tensor:
    """A token per row from the smallest set of most likely tokens whose probability reaches ``p``
    (the most likely token is always kept), after dividing the logits by ``temperature``."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    before = sorted_probs.cumsum(dim=-1) - sorted_probs
    sorted_probs = sorted_probs.masked_fill(before >= p, 0.0)
    pick = torch.multinomial(sorted_probs, 1, generator=gen)
    return order.gather(-1, pick).squeeze(-1)

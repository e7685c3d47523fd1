"""A JSON-like grammar compiled to vocabulary tables, for guided decoding (``guided_decoding``).

The kit's tokenizer-free vocabulary gets token classes from a fixed seed (independent of the run's
seed): 16 tokens each for ``{ } " : ,``, 10% digit tokens, 50% letter tokens, the rest never
allowed. The grammar is a finite-state machine over classes, JSON Lines of flat objects with short
keys and short integers::

    {"key": 123, "k": 4}{"abc": 56}...   keys: 1-3 letter tokens, values: 1-3 digit tokens

Compiling it for the vocabulary (what outlines/XGrammar do once per schema) gives two tables:
``blocked`` (states, vocab): the tokens a state forbids, and ``next_cls`` (states, classes): the
state after a token of a class (-1: forbidden). A step masks the logits with ``blocked[state]``,
picks a token, then ``state = next_cls[state, cls[token]]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

LBRACE, RBRACE, QUOTE, COLON, COMMA, DIGIT, LETTER, OTHER = range(8)
CLASSES = 8
PUNCT_TOKENS = 16
"""Tokens per punctuation class (every state allows at least this many: more than TOP)."""

ARCS = {  # state: {class: next state}; state 0 starts an object
    0: {LBRACE: 1},
    1: {QUOTE: 2},                                  # after "{" or ","
    2: {LETTER: 3},
    3: {LETTER: 4, QUOTE: 6},
    4: {LETTER: 5, QUOTE: 6},
    5: {QUOTE: 6},
    6: {COLON: 7},
    7: {DIGIT: 8},
    8: {DIGIT: 9, COMMA: 1, RBRACE: 0},
    9: {DIGIT: 10, COMMA: 1, RBRACE: 0},
    10: {COMMA: 1, RBRACE: 0},
}


def token_classes(vocab: int, seed: int = 1234) -> torch.Tensor:
    """(vocab,) int64 class of every token id."""
    order = torch.randperm(vocab, generator=torch.Generator().manual_seed(seed))
    cls = torch.full((vocab,), OTHER, dtype=torch.long)
    sizes = [PUNCT_TOKENS] * 5 + [vocab // 10, vocab // 2]
    start = 0
    for c, n in enumerate(sizes):
        cls[order[start:start + n]] = c
        start += n
    return cls


@dataclass(frozen=True)
class Grammar:
    cls: torch.Tensor
    """(vocab,) int64 token class."""
    next_cls: torch.Tensor
    """(states, classes) int64 next state, -1 where the class is forbidden."""
    blocked: torch.Tensor
    """(states, vocab) bool: True where the state forbids the token."""

    @classmethod
    def compile(cls, vocab: int, device: torch.device) -> Grammar:
        classes = token_classes(vocab)
        table = torch.full((len(ARCS), CLASSES), -1, dtype=torch.long)
        for state, arcs in ARCS.items():
            for c, nxt in arcs.items():
                table[state, c] = nxt
        blocked = table[:, classes] < 0
        return cls(classes.to(device), table.to(device), blocked.to(device))

    def accepts(self, tokens: list[int]) -> bool:
        """Whether the token sequence follows the grammar from state 0 (a prefix of valid output)."""
        state = 0
        for t in tokens:
            state = int(self.next_cls[state, self.cls[t]])
            if state < 0:
                return False
        return True

"""The serving decoder's shape, and the sizes and FLOPs derived from it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LLMConfig:
    vocab: int = 32000
    """Vocabulary size."""
    dim: int = 1024
    """Model width."""
    layers: int = 8
    """Decoder blocks."""
    heads: int = 16
    """Query heads (dim must divide by it)."""
    kv_heads: int = 4
    """Key/value heads (GQA: heads must divide by it; equal to heads is plain multi-head)."""
    ffn: int = 2816
    """SwiGLU hidden width."""
    rope_base: float = 10000.0
    """RoPE frequency base."""

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    def params(self) -> int:
        """Parameters: embedding, head, per block QKV, output, SwiGLU and two norms, final norm."""
        d, kv = self.dim, self.kv_heads * self.head_dim
        block = d * (d + 2 * kv) + d * d + 3 * d * self.ffn + 2 * d
        return 2 * self.vocab * d + self.layers * block + d

    def kv_bytes_per_token(self, itemsize: int = 2) -> int:
        """Bytes one token's keys and values take in the cache, all layers."""
        return 2 * self.layers * self.kv_heads * self.head_dim * itemsize

    def forward_flops(self, tokens: int, context: float) -> float:
        """FLOPs of a forward over ``tokens`` new tokens attending to ``context`` keys on average:
        2 per weight per token (embedding excluded) plus QK^T and PV (4 * dim per key)."""
        weights = self.params() - self.vocab * self.dim
        return 2.0 * tokens * weights + 4.0 * tokens * context * self.dim * self.layers

    def prefill_flops(self, tokens: int, context: float, logit_rows: int = 1) -> float:
        """FLOPs of a prefill of ``tokens`` prompt tokens attending to ``context`` keys on average:
        :meth:`forward_flops` with the LM head on ``logit_rows`` tokens only (one a prompt: its last,
        the next token's logits, all the kit's ``prefill`` computes; 0 for a prefix whose logits no one
        reads), not on every token: 2 * vocab * dim FLOPs less for each of the others."""
        return self.forward_flops(tokens, context) - 2.0 * (tokens - logit_rows) * self.vocab * self.dim

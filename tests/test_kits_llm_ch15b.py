"""The kit's additions for chapter 15's disaggregated pair: ``ContinuousBatcher.fill`` is where a
request's prompt K/V and first token enter a slot, so a decode-only server can receive them
instead of prefilling (ch15/optimized_disagg_prefill_decode_multigpu.py)."""

from __future__ import annotations

import torch

from aisp.kits.llm import (
    ContinuousBatcher,
    DenseKVCache,
    LLMConfig,
    Request,
    StreamConfig,
    build_decoder,
    request_stream,
)

CPU = torch.device("cpu")
CFG = LLMConfig(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, ffn=128)
STREAM = StreamConfig(requests=6, prompt_mean=12, output_mean=5, max_prompt=24, max_output=9, vocab=CFG.vocab)


class Handoff(ContinuousBatcher):
    """Fills slots from K/V and first tokens computed by another batcher's prefill (as a decode
    server receives them), recording which requests went to which slots."""

    def __init__(self, source: ContinuousBatcher, *args: object) -> None:
        super().__init__(*args)
        self.source, self.calls = source, []

    def fill(self, group: list[Request], slots: list[int], rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.calls.append(([r.rid for r in group], slots, rows.tolist()))
        first, top = self.source.fill(group, list(range(len(group))), torch.arange(len(group)))
        for i, s in enumerate(slots):
            n = len(group[i].prompt)
            self.cache.k[:, s, :, :n] = self.source.cache.k[:, i, :, :n]
            self.cache.v[:, s, :, :n] = self.source.cache.v[:, i, :, :n]
        return first, top


def test_a_batcher_filled_from_another_prefill_generates_the_same_tokens() -> None:
    model, stream = build_decoder(CFG, 0, CPU), request_stream(STREAM, 1)
    plain = ContinuousBatcher(model, DenseKVCache(CFG, 3, 40, CPU, torch.float32), 3).run(stream)
    source = ContinuousBatcher(model, DenseKVCache(CFG, 3, 24, CPU, torch.float32), 3)
    handoff = Handoff(source, model, DenseKVCache(CFG, 3, 40, CPU, torch.float32), 3)
    out = handoff.run(stream)
    assert torch.equal(out.tokens, plain.tokens)
    torch.testing.assert_close(out.top, plain.top, rtol=1e-4, atol=1e-4)
    assert sorted(r for rids, _, _ in handoff.calls for r in rids) == list(range(len(stream)))
    assert all(slots == rows and len(slots) == len(rids) for rids, slots, rows in handoff.calls)


def test_a_fill_that_drops_the_kv_changes_the_logits() -> None:
    model, stream = build_decoder(CFG, 0, CPU), request_stream(STREAM, 1)
    plain = ContinuousBatcher(model, DenseKVCache(CFG, 3, 40, CPU, torch.float32), 3).run(stream)

    class Dropped(ContinuousBatcher):
        def fill(self, group, slots, rows):
            first = super().fill(group, slots, rows)
            self.cache.k[:, slots] = 0
            return first

    out = Dropped(model, DenseKVCache(CFG, 3, 40, CPU, torch.float32), 3).run(stream)
    assert not torch.allclose(out.top, plain.top, rtol=1e-4, atol=1e-4)

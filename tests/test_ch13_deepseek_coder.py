"""ch13/train_deepseek_coder.py: fill-in-the-middle reordering, interpolated rotary positions,
grouped-query attention, a tiny model that learns, and compiled steps that match eager ones."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from test_ch13_pairs import load

TINY = dict(vocab=64, seq=16, dim=32, layers=2, heads=4, kv_heads=2, ffn=48)


@pytest.fixture(scope="module")
def coder():
    return load("train_deepseek_coder")


def test_fim_reorders_rows_into_prefix_suffix_middle(coder):
    c = coder.CoderConfig(**TINY, fim_rate=1.0)
    begin, hole, end = coder.fim_ids(c)
    rows = torch.arange(2 * 12).view(2, 12)
    out = coder.fim_permute(rows, c, torch.Generator().manual_seed(3))
    assert out.shape == rows.shape
    for row, mixed in zip(rows, out, strict=True):
        body = row[:-3].tolist()
        m = mixed.tolist()
        assert m[0] == begin and m.count(hole) == 1 and m.count(end) == 1
        prefix, suffix, middle = m[1:m.index(hole)], m[m.index(hole) + 1:m.index(end)], m[m.index(end) + 1:]
        assert prefix + middle + suffix == body  # the document is intact, only reordered


def test_fim_rate_zero_leaves_rows_alone(coder):
    c = coder.CoderConfig(**TINY, fim_rate=0.0)
    rows = torch.arange(24).view(2, 12)
    assert torch.equal(coder.fim_permute(rows, c, torch.Generator().manual_seed(0)), rows)


def test_rope_interpolation_divides_positions_by_the_scale(coder):
    scaled = coder.CoderConfig(**{**TINY, "seq": 16}, rope_scale=4.0)
    plain = replace(scaled, rope_scale=1.0, seq=4)
    cos4, sin4 = coder.rope_tables(scaled, 8, torch.device("cpu"))
    cos1, sin1 = coder.rope_tables(plain, 8, torch.device("cpu"))
    torch.testing.assert_close(cos4[::4], cos1)  # position 4k with factor 4 is position k unscaled
    torch.testing.assert_close(sin4[::4], sin1)
    x = torch.randn(1, 2, 16, 8)
    torch.testing.assert_close(coder.rotate(x, cos4, sin4).norm(dim=-1), x.norm(dim=-1))


def test_grouped_query_attention_has_fewer_key_value_weights(coder):
    gqa = coder.Attention(coder.CoderConfig(**TINY))
    mha = coder.Attention(coder.CoderConfig(**{**TINY, "kv_heads": 4}))
    assert gqa.kv.weight.numel() * 2 == mha.kv.weight.numel()


def test_the_tiny_model_learns_and_compiled_steps_match_eager(coder):
    c = coder.CoderConfig(**TINY)
    eager = coder.train(c, steps=20, batch=4, device=torch.device("cpu"), compiled=False, lr=1e-2)
    assert eager.losses[-1] < eager.losses[0] - 0.5 and eager.tokens_s > 0
    traced = coder.train(c, steps=5, batch=4, device=torch.device("cpu"), compiled=True, backend="aot_eager", lr=1e-2)
    torch.testing.assert_close(torch.tensor(traced.losses), torch.tensor(eager.losses[:5]), rtol=1e-4, atol=1e-5)


def test_main_reports_each_mode_and_rejects_too_few_steps(coder, capsys):
    assert coder.main(["--steps", "4", "--seq", "16", "--dim", "32", "--layers", "1", "--eager-only"]) == 0
    assert "eager: loss" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        coder.main(["--steps", "2"])
    assert exc.value.code == 2

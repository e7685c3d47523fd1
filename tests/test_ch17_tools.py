"""latency_accuracy_sweep.py on a CPU: the Pareto marking on recorded points, the truncated decoder
(all blocks: the full model; shared weights), the cascade's two ends, and a tiny sweep end to end
(table printed, the full model agrees with itself, plot written when matplotlib is there)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

CH17 = Path(__file__).resolve().parents[1] / "ch17"
sys.path.insert(0, str(CH17))
import latency_accuracy_sweep as sweep  # noqa: E402

from aisp.kits.llm import build_decoder  # noqa: E402

RECORDED = [sweep.Point("full", 10.0, 1.0), sweep.Point("exit@1", 2.0, 0.6), sweep.Point("exit@2", 4.0, 0.55),
            sweep.Point("cascade", 5.0, 0.95), sweep.Point("slow", 12.0, 0.9), sweep.Point("tie", 10.0, 1.0)]


def test_pareto_marks_the_undominated_points() -> None:
    marked = {p.name: p.pareto for p in sweep.pareto(RECORDED)}
    assert marked == {"full": True, "exit@1": True, "exit@2": False, "cascade": True, "slow": False, "tie": True}


@pytest.fixture(scope="module")
def model():
    return build_decoder(sweep.TINY, 0, torch.device("cpu"))


def test_truncated_decoder_shares_the_weights_and_all_blocks_are_the_model(model) -> None:
    tokens = torch.randint(256, (3, 7), generator=torch.Generator().manual_seed(0))
    whole = sweep.truncated(model, sweep.TINY.layers)
    assert torch.equal(sweep.next_token(whole, tokens)[0], sweep.next_token(model, tokens)[0])
    two = sweep.truncated(model, 2)
    assert len(two.blocks) == 2 and two.blocks[1] is model.blocks[1] and two.head is model.head


def test_cascade_ends(model) -> None:
    tokens = torch.randint(256, (5, 6), generator=torch.Generator().manual_seed(1))
    small = sweep.truncated(model, 1)
    assert torch.equal(sweep.cascade(small, model, tokens, float("-inf")), sweep.next_token(small, tokens)[0])
    assert torch.equal(sweep.cascade(small, model, tokens, float("inf")), sweep.next_token(model, tokens)[0])


def test_tiny_sweep_end_to_end(tmp_path, capsys) -> None:
    plot = ["--plot", str(tmp_path / "sweep.png")] if _has_matplotlib() else []
    points = sweep.main(["--tiny", "--device", "cpu", "--requests", "16", "--prompt", "8", "--iterations", "2", *plot])
    names = [p.name for p in points]
    assert names[:4] == ["exit@1", "exit@2", "exit@3", "full"] and len(names) == 4 + len(sweep.SweepConfig.quantiles)
    full = next(p for p in points if p.name == "full")
    assert full.agreement == 1.0 and any(p.pareto for p in points)
    assert all(0.0 <= p.agreement <= 1.0 and p.latency_ms > 0 for p in points)
    assert "agreement" in capsys.readouterr().out
    if plot:
        assert (tmp_path / "sweep.png").stat().st_size > 1000


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True

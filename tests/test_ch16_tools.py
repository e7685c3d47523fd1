"""ch16/serve_bench.py on a CPU with a tiny decoder: every request gets all its tokens, arrivals
are honoured (no first token before a request arrives), the summary and table hold the figures,
and the plot is written."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from aisp.harness.loader import import_module_at

CH16 = Path(__file__).resolve().parents[1] / "ch16"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(CH16))
    yield import_module_at(CH16 / "serve_bench.py")
    sys.path.remove(str(CH16))


def tiny(bench, rate: float, paged: bool):
    cfg, _, _ = bench.config_from(["--tiny", "--requests", "5", "--rate", str(rate), "--slots", "2",
                                   "--prompt-mean", "6", "--output-mean", "3"] + (["--paged"] if paged else []))
    return cfg


@pytest.mark.parametrize("paged", [False, True])
def test_serves_every_token_after_each_arrival(bench, paged: bool) -> None:
    cfg = tiny(bench, 40.0, paged)
    summary, times = bench.serve(cfg, torch.device("cpu"))
    requests = bench.llm.request_stream(cfg.stream, cfg.seed)
    assert [len(t.tokens) for t in times] == [r.output_len for r in requests]
    assert all(t.first_token >= t.arrival for t in times)
    assert summary["ttft_p99_ms"] >= summary["ttft_p50_ms"] > 0 and 0.0 <= summary["goodput"] <= 1.0
    assert summary["tokens_per_s"] > 0


def test_a_later_arrival_is_not_served_early(bench) -> None:
    cfg = tiny(bench, 4.0, False)  # ~0.25 s between arrivals
    _, times = bench.serve(cfg, torch.device("cpu"))
    start = times[0].arrival
    assert times[-1].arrival - start > 0.2
    assert times[-1].first_token >= times[-1].arrival


def test_table_and_plot(bench, tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "serve.png"
    bench.main(["--tiny", "--device", "cpu", "--requests", "4", "--rate", "0", "--slots", "2", "--prompt-mean", "6",
                "--output-mean", "3", "--plot", str(out)])
    text = capsys.readouterr().out
    for label in ("TTFT p50 / p99", "TPOT p50 / p99", "output tokens/s", "goodput"):
        assert label in text
    assert out.stat().st_size > 0

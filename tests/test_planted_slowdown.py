"""tests/planted_slowdown.py's planting: the planted variant computes the same thing and still verifies."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch
from conftest import run_fixture_pairs

from aisp.harness.loader import import_module_at
from aisp.harness.options import RunOptions

sys.path.insert(0, str(Path(__file__).parent))
from planted_slowdown import plant  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "modes"


def _output(path: Path) -> tuple[object, torch.Tensor]:
    bench = import_module_at(path).get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), 0
    bench.setup()
    return bench, bench.run()


def test_planted_variant_gives_the_same_output_and_passes_verification(tmp_path):
    _, original = _output(FIXTURES / "optimized_sum.py")
    folder = tmp_path / "modes"
    shutil.copytree(FIXTURES, folder)
    changed = plant(folder, "sum", 50)
    assert {p.name for p in changed} == {"optimized_sum.py", "optimized_sum_gpuonly.py"}
    assert "planted by tests/planted_slowdown.py: 50% slower" in (folder / "optimized_sum.py").read_text()
    bench, planted = _output(folder / "optimized_sum.py")
    assert bench.run.__name__ == "slowed_run"
    torch.testing.assert_close(planted, original, rtol=0, atol=0)
    results = run_fixture_pairs(folder, folder, RunOptions(device="cpu", verify_only=True, artifacts_dir=tmp_path / "r"))
    sums = [r for r in results if r["name"] == "sum"]
    assert sums and sums[0]["verdict"] in ("ok", "ok-unchecked"), sums[0]["reason"]

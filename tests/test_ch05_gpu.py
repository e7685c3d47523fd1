"""Chapter 5 on a GPU: every variant that can run here matches its baseline through the harness's
verified call (inputs unchanged, fresh output), also after its inputs are refilled; the pipelined
uint8 variant gives the serial one's bits; gds_check gives a verdict."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest
import torch
from conftest import variant_modules
from refill_check import check_refilled_pair

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.execute import guarded_run
from aisp.harness.loader import import_module_at
from aisp.harness.verify import compare

CH05 = Path(__file__).resolve().parents[1] / "ch05"
pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def io_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AISP_IO_DIR", str(tmp_path))
    return tmp_path


def load(module: str) -> ModuleType:
    return import_module_at(CH05 / f"{module}.py")


def skip_without_io_uring() -> None:
    """The io_uring variant raises aisp.Unavailable in setup() where the host forbids io_uring."""
    try:
        load("ch05_uring").Ring(2).close()
    except OSError as exc:
        pytest.skip(f"io_uring forbidden here: {exc}")


def build(module: str, seed: int) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    reason = unmet_requirements(bench.workload.requires, torch.device("cuda"))
    if reason:
        pytest.skip(f"{module}: {reason}")
    if module == "optimized_packed_shards_uring":
        skip_without_io_uring()
    if module == "optimized_gds_read":
        name, ok, detail = load("gds_check").read_probe(Path(os.environ["AISP_IO_DIR"]))
        if not ok:
            pytest.skip(f"{name}: {detail} (python ch05/gds_check.py)")
    bench.device, bench.seed = torch.device("cuda"), seed
    return bench


@pytest.mark.parametrize(("baseline", "optimized"), variant_modules(CH05))
def test_pair_matches_on_gpu(baseline: str, optimized: str) -> None:
    base, opt = build(baseline, 3), build(optimized, 3)
    base.setup()
    ref = guarded_run(base)
    base.teardown()
    opt.setup()
    compare(ref, guarded_run(opt), load(baseline).WORKLOAD)
    opt.teardown()


@pytest.mark.parametrize(("baseline", "optimized"), variant_modules(CH05))
def test_pair_matches_on_refilled_inputs_on_gpu(baseline: str, optimized: str) -> None:
    check_refilled_pair(build(baseline, 0), build(optimized, 0), load(baseline).WORKLOAD)


def test_uint8_pipelined_is_bitwise_the_serial_variant() -> None:
    """Chunked copies on a copy stream and per-chunk normalizes give the serial variant's bits, on
    two calls (the second reuses the device buffer the first call's normalize read)."""
    serial, pipelined = build("optimized_uint8_transfer", 3), build("optimized_uint8_transfer_pipelined", 3)
    serial.setup()
    pipelined.setup()
    ref = guarded_run(serial)
    for _ in range(2):
        for (_, want), (_, got) in zip(ref, guarded_run(pipelined), strict=True):
            assert torch.equal(got, want)
    serial.teardown()
    pipelined.teardown()


def test_gds_check_gives_a_verdict(capsys) -> None:
    assert load("gds_check").main([]) == 0
    out = capsys.readouterr().out
    assert any(v in out for v in ("GPUDirect Storage usable", "compatibility mode only", "no cuFile path"))

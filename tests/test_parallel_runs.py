"""--gpus through the real runner on a CPU, with a made-up list of four GPUs (the workers get
CUDA_VISIBLE_DEVICES and a CPU share, and run the fixture pairs on the CPU): the same verdicts as one
pair at a time, each pair's placement and phases recorded, and Ctrl-C/SIGTERM ending every worker
of every "GPU"."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from conftest import FIXTURE_PAIRS, REPO
from test_processes import PROCESSES, interrupt_when_recorded, pid_file  # noqa: F401  (pid_file: a fixture)
from test_reuse_workers import TIMED

from aisp.harness.discovery import resolve_targets
from aisp.harness.options import RunOptions
from aisp.harness.phases import ORDER
from aisp.harness.runner import Hooks, run_suite
from aisp.harness.scheduler import Gpu, Topology

TARGETS = ["pairs:good", "pairs:raises", "pairs:needs_gpu", "pairs:nan_output", "pairs:wrong_shape"]
FAKE_GPUS = "from aisp.harness.scheduler import Gpu, Topology\n" \
            "from aisp.system import gpu_topology\n" \
            "gpu_topology.topology = lambda text, env=None: Topology(tuple(Gpu(i, str(i)) for i in range({n})), 4)\n" \
            "import sys\nfrom aisp.cli.main import main\nsys.argv[0] = 'aisp'\nmain()\n"


def fake_topology(count: int) -> Topology:
    """``count`` GPUs sharing this host's two cores (the first two bound to core 0 and 1 in turn)."""
    return Topology(tuple(Gpu(i, str(i), (0, 1) if hasattr(os, "sched_getaffinity") else ()) for i in range(count)), 8)


def _options(artifacts: Path) -> RunOptions:
    return RunOptions(iterations=3, warmup=1, warmup_s=0, device="cpu", artifacts_dir=artifacts)


@pytest.fixture(scope="module")
def one_at_a_time(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """The fixture pairs one at a time (a worker each): the four-GPU run's reference, and its timed
    pair's phases for the phases test (a worker start less)."""
    return run_suite(resolve_targets(TARGETS, REPO, (FIXTURE_PAIRS,)), _options(tmp_path_factory.mktemp("one")))[0]


def test_four_gpus_give_the_verdicts_of_one_at_a_time(one_at_a_time: list[dict], tmp_path: Path):
    pairs = resolve_targets(TARGETS, REPO, (FIXTURE_PAIRS,))
    one = one_at_a_time
    four, run_dir = run_suite(pairs, _options(tmp_path), hooks=Hooks(topology=fake_topology(4)))
    assert [r["target"] for r in four] == TARGETS, "the summary keeps the order asked for"
    untimed = {r["target"]: r["verdict"] for r in one if r["target"] != "pairs:good"}
    assert untimed == {r["target"]: r["verdict"] for r in four if r["target"] != "pairs:good"}
    assert untimed == {"pairs:raises": "error", "pairs:needs_gpu": "skipped", "pairs:nan_output": "verify-failed",
                       "pairs:wrong_shape": "verify-failed"}
    good = [r for r in (*one, *four) if r["target"] == "pairs:good"]
    assert all(r["speedup"] and r["baseline"]["verification"] is not None for r in good)
    for result in four:
        placement = result["placement"]
        assert len(placement["gpus"]) == 1 and placement["gpus"][0] in "0123"
        assert placement["threads"] == 1 and placement["applied"]["threads"] == 1, "8 cores // 4 GPUs, 1 core each"
        if hasattr(os, "sched_getaffinity"):
            assert placement["applied"]["cpus"] == placement["cpus"] and placement["cpus"] in ("0", "1")
        assert set(result["phases"]) <= {*ORDER, "total"} and result["phases"]["total"] > 0
    assert all(r["placement"]["gpus"] == [] and r["placement"]["applied"]["threads"] >= 1 for r in one)
    manifest = (run_dir / "manifest.json").read_text()
    assert '"gpus": [\n      "0",\n      "1",\n      "2",\n      "3"\n    ]' in manifest


def test_a_timed_pair_records_every_phase(one_at_a_time: list[dict]):
    (result,) = [r for r in one_at_a_time if r["target"] == "pairs:good"]
    phases = result["phases"]
    assert {"start", "import", "setup", "verify", "warmup", "timed", "memory", "teardown", "exit"} <= set(phases)
    inside = sum(v for k, v in phases.items() if k != "total")
    assert inside == pytest.approx(phases["total"], rel=0.05, abs=0.05), "the phases add up to the worker's wall time"


def hanging_pairs(folder: Path) -> Path:
    """Two hanging pairs (each records its worker and a detached sleeper) in a folder of their own."""
    folder.mkdir()
    for name in ("hangs_a", "hangs_b"):
        for side in ("baseline", "optimized"):
            (folder / f"{side}_{name}.py").write_text(
                "from common_processes import HangsWithChild\n\n\ndef get_benchmark():\n    return HangsWithChild()\n")
    return folder


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_stops_the_workers_of_every_gpu(sig: signal.Signals, pid_file: Path, tmp_path: Path):  # noqa: F811
    mine = hanging_pairs(tmp_path / "mine")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(PROCESSES)])}
    cmd = [sys.executable, "-c", FAKE_GPUS.format(n=2), "bench", "run", "--root", str(mine), "--gpus", "2",
           "--device", "cpu", "--timeout-multiplier", "20", "--artifacts-dir", str(tmp_path / "artifacts")]
    interrupt_when_recorded(cmd, env, pid_file, 4, sig)  # 4: both workers (one per GPU) and their sleepers at once


def test_the_live_view_shows_each_gpus_pair_and_an_eta():
    from io import StringIO

    from rich.console import Console

    from aisp.report.console import RichReporter, eta_seconds

    assert eta_seconds(120.0, 0, 10) is None
    assert eta_seconds(120.0, 4, 10) == 180.0, "4 pairs in 120 s: 6 more take 180 s"
    pairs = resolve_targets(TARGETS[:3], REPO, (FIXTURE_PAIRS,))
    out = StringIO()
    reporter = RichReporter(Console(file=out, width=120, force_terminal=False))
    reporter.start(pairs)
    reporter.pair_started(pairs[0], "GPU 0")
    reporter.pair_started(pairs[1], "GPUs 1,2")
    shown = StringIO()
    Console(file=shown, width=120).print(reporter._view())
    assert "GPU 0" in shown.getvalue() and "pairs:good" in shown.getvalue() and "GPUs 1,2" in shown.getvalue()
    assert "ETA: after the first pair" in shown.getvalue()
    reporter.pair_done({"target": "pairs:good", "group": "pairs", "name": "good", "verdict": "ok"})
    assert reporter.running == {"pairs:raises": "GPUs 1,2"}
    reporter.live.stop()


@pytest.mark.gpu
def test_every_gpu_of_this_host_gives_the_verdicts_of_one_at_a_time(tmp_path: Path):
    """On a GPU host (at least two GPUs): the fixture pairs on every GPU at once, with this host's
    real shares, against one at a time."""
    import torch

    from aisp.system.gpu_topology import topology

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    pairs = resolve_targets(TARGETS, REPO, (FIXTURE_PAIRS,))
    options = RunOptions(iterations=5, warmup=1, artifacts_dir=tmp_path)
    one, _ = run_suite(pairs, options)
    every, _ = run_suite(pairs, options, hooks=Hooks(topology=topology("all")))
    # On a GPU host needs_gpu is timed too: ok or inconclusive is the timing's call (it read ok alone and
    # inconclusive beside the others on 2 x H200, 2026-11-30), so timed verdicts compare as 'timed'.
    def outcomes(results: list[dict]) -> list[str]:
        return ["timed" if r["verdict"] in TIMED else r["verdict"] for r in results if r["target"] != "pairs:good"]

    assert outcomes(one) == outcomes(every)
    assert {r["placement"]["gpus"][0] for r in every} <= {str(i) for i in range(torch.cuda.device_count())}
    assert all(r["placement"]["applied"]["threads"] == r["placement"]["threads"] for r in every)

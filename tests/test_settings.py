"""Process-wide settings one variant changes are restored before the other's calls, and reported."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from aisp.harness import settings
from aisp.harness.discovery import resolve_targets
from aisp.harness.execute import Variant
from aisp.harness.loader import import_module_at
from aisp.harness.options import RunOptions
from aisp.harness.runner import run_suite
from aisp.harness.settings import ProcessSettings

TIMING = Path(__file__).resolve().parent / "fixtures" / "timing"


@pytest.fixture
def actors(tmp_path):
    """Two variants watched by one ProcessSettings; torch's settings put back whatever happens."""
    first, second = Variant(tmp_path / "baseline_x.py"), Variant(tmp_path / "optimized_x.py")
    dtype, precision = torch.get_default_dtype(), torch.get_float32_matmul_precision()
    yield ProcessSettings(tmp_path, first.evidence.notes), first, second
    torch.set_default_dtype(dtype)
    torch.set_float32_matmul_precision(precision)


def test_torch_setting_is_restored_and_its_changer_named(actors):
    watch, first, second = actors
    torch.set_default_dtype(torch.float64)
    torch.set_float32_matmul_precision("medium")
    watch.enter(second.evidence.notes)
    assert torch.get_default_dtype() == torch.float32
    assert torch.get_float32_matmul_precision() == "highest"
    assert first.evidence.notes == ["changed process-wide float32_matmul_precision, cuda.matmul.allow_tf32, "
                                    "default_dtype; restored before each timed call"]
    watch.enter(first.evidence.notes)
    assert not second.evidence.notes


def test_new_tf32_api_is_undone_too(actors):
    """Once the fp32_precision API is used, torch refuses the legacy reads: that counts as changed."""
    watch, first, second = actors
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    watch.enter(second.evidence.notes)
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.get_float32_matmul_precision() == "highest"
    assert "float32_matmul_precision" in first.evidence.notes[0]


def test_rebound_global_of_a_pair_module_is_restored(actors, tmp_path):
    watch, first, second = actors
    (tmp_path / "shared_knob.py").write_text("FAST = False\n")
    module = import_module_at(tmp_path / "shared_knob.py")
    try:
        watch.snapshot_modules()
        watch.enter(second.evidence.notes)
        module.FAST = True
        watch.enter(first.evidence.notes)
        assert module.FAST is False
        assert second.evidence.notes == ["changed process-wide shared_knob.FAST; restored before each timed call"]
    finally:
        sys.modules.pop("shared_knob", None)


def test_enter_reads_no_files_and_a_module_snapshot_is_taken_once(actors, tmp_path, monkeypatch):
    """Before each call, enter() only compares what it snapshotted; globbing and resolving the pair's
    folder happens in snapshot_modules(), after loading and setup, never per call."""
    watch, first, second = actors
    (tmp_path / "late_knob.py").write_text("FAST = False\n")
    module = import_module_at(tmp_path / "late_knob.py")
    try:
        watch.snapshot_modules()
        module.FAST = True
        watch.snapshot_modules()  # already snapshotted: the first snapshot stands
        monkeypatch.setattr(Path, "glob", lambda *a: pytest.fail("enter() read the pair's folder"))
        monkeypatch.setattr(Path, "resolve", lambda *a: pytest.fail("enter() resolved a path"))
        watch.enter(second.evidence.notes)
        assert module.FAST is False and "late_knob.FAST" in first.evidence.notes[0]
    finally:
        sys.modules.pop("late_knob", None)


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    options = RunOptions(iterations=4, warmup=1, warmup_s=0.0, device="cpu",
                         artifacts_dir=tmp_path_factory.mktemp("art"))
    results, _ = run_suite(resolve_targets(["timing:threads", "timing:global"], TIMING, (TIMING,)), options)
    return {r["name"]: r for r in results}


def test_thread_count_set_in_run_is_undone_before_the_baselines_calls(suite):
    result = suite["threads"]
    threads = result["placement"]["applied"]["threads"]  # the worker's own, from the runner's CPU share
    if threads < 2:
        pytest.skip("needs the worker to run torch on more than one thread")
    assert result["verdict"] in ("ok-unchecked", "slower"), result["reason"]
    assert result["baseline"]["metrics"]["threads_min"] == threads
    assert result["variants"][0]["metrics"]["threads_min"] == threads
    assert "optimized_threads: changed process-wide num_threads; restored before each timed call" in result["notes"]


def test_global_rebound_in_setup_is_undone_before_the_baselines_calls(suite):
    result = suite["global"]
    assert result["verdict"] in ("ok-unchecked", "slower"), result["reason"]
    assert result["baseline"]["metrics"]["repeat_min"] == 8
    assert any(n.startswith("optimized_global: changed process-wide common_timing.REPEAT") for n in result["notes"])


class FakeContext:
    """A CUDA context's limit, per device: unreadable until ``ready`` (CUDA not initialised yet)."""

    def __init__(self) -> None:
        self.ready, self.device, self.limit, self.writes = False, 0, {0: 0, 1: 4096}, []

    def read(self):
        return (self.device, self.limit[self.device]) if self.ready else None

    def write(self, value: int) -> None:
        self.writes.append((self.device, value))
        self.limit[self.device] = value


@pytest.fixture
def context(monkeypatch):
    fake = FakeContext()
    monkeypatch.setattr(settings, "CONTEXT_SETTINGS", {"cudaLimitPersistingL2CacheSize": (fake.read, fake.write)})
    return fake


def test_context_limit_is_restored_only_where_changed_and_its_changer_named(context, actors):
    """The fake context is patched in before the watch is made (``context`` first): on a GPU host whose
    CUDA is initialised, a watch made earlier snapshots the real limit of device 0. Snapshot at the first call that can read it (after CUDA's initialisation), per device; a write
    only where the limit differs; the note goes to whoever ran since the last call."""
    watch, first, second = actors
    watch.enter(second.evidence.notes)  # not readable yet: nothing snapshotted, nothing written
    context.ready = True
    watch.enter(first.evidence.notes)  # snapshot: device 0 at 0 bytes
    context.limit[0] = 33 << 20  # the first variant sets a set-aside (its setup)
    watch.enter(second.evidence.notes)
    assert context.limit[0] == 0 and context.writes == [(0, 0)]
    assert first.evidence.notes == ["changed process-wide cudaLimitPersistingL2CacheSize; restored before each "
                                    "timed call"]
    watch.enter(first.evidence.notes)
    watch.enter(second.evidence.notes)
    assert context.writes == [(0, 0)] and not second.evidence.notes  # unchanged: read, never written
    context.device = 1  # another device: its own snapshot, its value then (4096)
    watch.enter(first.evidence.notes)
    assert context.writes == [(0, 0)]
    context.limit[1] = 0
    watch.enter(second.evidence.notes)
    assert context.limit == {0: 0, 1: 4096} and context.writes == [(0, 0), (1, 4096)]


def test_context_limit_unread_on_cpu(actors):
    """Here (no CUDA initialised, or a CPU build) the persisting-L2 limit is not watched: no read, no write."""
    if torch.cuda.is_initialized():
        pytest.skip("CUDA is initialised in this process")
    watch, first, second = actors
    assert settings.read_persisting_l2() is None
    watch.enter(second.evidence.notes)
    assert not watch.context and not first.evidence.notes


def test_cudart_found_among_mapped_libraries():
    maps = ["7f00-7f01 r-xp 00000000 08:01 1234 /venv/nvidia/cuda_runtime/lib/libcudart.so.12\n",
            "7f01-7f02 r--p 00001000 08:01 1234 /venv/nvidia/cuda_runtime/lib/libcudart.so.12\n",
            "7f02-7f03 r-xp 00000000 08:01 99 /venv/torch/lib/libtorch_cuda.so\n",
            "7f03-7f04 rw-p 00000000 00:00 0\n", "7f05-7f06 r-xp 00000000 08:01 7 /opt/libcudart_static_shim.so\n"]
    assert settings.mapped_cudart(maps) == ["/venv/nvidia/cuda_runtime/lib/libcudart.so.12"]

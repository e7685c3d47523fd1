"""Which pairs are timed from idle (``Workload.window = "idle"``) is a list this test holds, so a
pair cannot drop into or out of the window from idle by accident; every variant of a pair declares
the same window (a pair timed half from idle would compare two different things); and each pair
timed from idle says in its own header why: launches, graphs, overhead, syncs or host work.

Every variant file of ch01..ch20 is imported on the CPU through discovery and the loader. A file
that imports a package this machine lacks (Triton on a CPU-only host) is read from its source
instead (``_source_window``)."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest
from conftest import REPO

from aisp.harness.discovery import chapters, pairs_in
from aisp.harness.loader import load_benchmark

IDLE_PAIRS = frozenset({
    # fewer launches: graphs, batched or fused calls, persistent kernels, one vectorized call
    "ch01:batch_size", "ch01:cuda_graphs", "ch01:gemm", "ch03:gemm", "ch06:vectorized_ops",
    "ch10:cooperative_persistent", "ch12:graph_replay", "ch12:graph_update", "ch13:autograd_standard",
    "ch14:compile_modes", "ch14:custom_op_graph_break", "ch16:decode_cuda_graph", "ch17:vectorized_router",
    "ch18:cudagraph_bucketing", "ch18:fused_rope_kv_write",
    # fewer host-device round trips: host syncs, flag copies, host-driven hops
    "ch01:performance", "ch01:preallocated_buffers", "ch11:event_dependencies", "ch11:stream_ordered_allocator",
    "ch12:conditional_if", "ch12:conditional_while", "ch12:device_graph_launch", "ch12:dynamic_parallelism",
    "ch13:expert_parallel_multigpu", "ch15:guided_decoding", "ch16:async_scheduling", "ch16:gpu_sampling",
    "ch17:moe_grouped_gemm", "ch20:moe_layer_e2e",
    # small collectives: per-call latency, proxy thread and launch
    "ch04:device_initiated_put_multigpu", "ch04:small_allreduce_multigpu",
    # less host work: per-copy driver calls, CPU pipelines, file I/O, CPU decode, compile time
    "ch02:small_copies", "ch03:docker", "ch03:hugepages", "ch03:kubernetes", "ch03:numa_unaware",
    "ch05:async_checkpoint", "ch05:gds_read", "ch05:gpu_jpeg_decode", "ch05:mmap_loading",
    "ch05:packed_shards", "ch05:staged_pipeline", "ch05:uint8_transfer", "ch13:dataloader_default",
    "ch13:regional_compile", "ch20:vision_pipeline_e2e",
})
"""Pairs whose headline gain is fewer launches, fewer host-device syncs or less host work: timed
from an idle GPU, the host's path inside the window (README, "How a pair is run", step 3)."""

WHY_IDLE = re.compile(r"launch|graph|overhead|sync|host", re.IGNORECASE)
"""Words one of an idle pair's headers must use to say where its time goes."""


def _imported_names(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def _source_window(path: Path, seen: set[Path] | None = None) -> str:
    """The window of a file this machine cannot import (it needs Triton, say), read from source:
    "idle" when it, or a module of its own folder that it imports, passes ``window="idle"``."""
    seen = seen if seen is not None else set()
    seen.add(path)
    text = path.read_text()
    if 'window="idle"' in text:
        return "idle"
    for name in _imported_names(ast.parse(text)):
        local = path.parent / f"{name}.py"
        if local.exists() and local not in seen and _source_window(local, seen) == "idle":
            return "idle"
    return "device"


def _window(path: Path) -> str:
    """The window ``path``'s workload declares: imported, or read from source when the import
    needs a package this machine lacks."""
    try:
        return load_benchmark(path).workload.window
    except ModuleNotFoundError as missing:
        if importlib.util.find_spec(missing.name or "") is not None:
            raise
        return _source_window(path)


@pytest.fixture(scope="module")
def windows() -> dict[str, set[str]]:
    """By pair target, the windows its variants declare."""
    found: dict[str, set[str]] = {}
    for folder in chapters(REPO).values():
        for pair in pairs_in(folder):
            found[pair.target] = {_window(path) for path in [pair.baseline, *pair.optimized]}
    return found


def _header(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def test_every_variant_of_a_pair_declares_the_same_window(windows):
    mixed = {target: sorted(w) for target, w in windows.items() if len(w) != 1}
    assert not mixed, f"variants of one pair declare different windows: {mixed}"


def test_the_pairs_timed_from_idle_are_the_listed_ones(windows):
    idle = {target for target, w in windows.items() if w == {"idle"}}
    assert not IDLE_PAIRS - set(windows), f"listed pairs that do not exist: {sorted(IDLE_PAIRS - set(windows))}"
    assert sorted(idle - IDLE_PAIRS) == [], "timed from idle but not listed"
    assert sorted(IDLE_PAIRS - idle) == [], "listed but timed on the device window"


@pytest.mark.parametrize("target", sorted(IDLE_PAIRS))
def test_an_idle_pair_says_why_in_its_header(target):
    chapter, name = target.split(":")
    pair = next(p for p in pairs_in(chapters(REPO)[chapter]) if p.name == name)
    headers = [_header(path) for path in [pair.baseline, *pair.optimized]]
    assert any(WHY_IDLE.search(text) for text in headers), f"{target}: no header names launches, graphs, " \
                                                           "overhead, syncs or host work"


def test_the_header_check_fires_on_a_header_about_bytes():
    assert not WHY_IDLE.search("Optimized coalescing: each warp access is one 128-byte line.")


def test_a_file_that_cannot_be_imported_is_read_from_its_source(tmp_path):
    (tmp_path / "baseline_x.py").write_text('import triton\nWORKLOAD = aisp.Workload(items=1,\n    window="idle")\n')
    (tmp_path / "optimized_x.py").write_text("import triton\nfrom baseline_x import WORKLOAD\n")
    (tmp_path / "baseline_y.py").write_text("import triton\nWORKLOAD = aisp.Workload(items=1)\n")
    (tmp_path / "optimized_y.py").write_text("import triton\nfrom baseline_y import WORKLOAD\n")
    assert [_source_window(tmp_path / f"{side}_x.py") for side in ("baseline", "optimized")] == ["idle", "idle"]
    assert [_source_window(tmp_path / f"{side}_y.py") for side in ("baseline", "optimized")] == ["device", "device"]


def test_a_chapter_field_named_window_is_refused():
    """A workload subclass whose own ``window`` (an attention span, say) shadows the timing window
    would be timed from idle without anyone choosing it: constructing it is an error."""
    from dataclasses import dataclass

    import aisp

    @dataclass(frozen=True, kw_only=True)
    class Shadowing(aisp.Workload):
        window: int = 1024

    with pytest.raises(ValueError, match="timing window must be 'device' or 'idle'"):
        Shadowing()
    assert aisp.Workload(window="idle").window == "idle"

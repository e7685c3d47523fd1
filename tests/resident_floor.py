"""Shared by the chapter tests of memory-headline pairs (their declared ``resident_bytes``): a variant
set up and run on the meta device (the real sizes, no memory, no arithmetic), the bytes a set of
tensors holds, and the peak bytes measured for a pair, stored (the chapter's H200 expectations) or in
the whole-book H200 run committed under books/."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

import aisp
from aisp.harness.execute import workload_dict
from aisp.harness.names import PEAK_METHOD
from aisp.harness.verify import tensor_attributes
from aisp.report.ceilings import ceiling

BOOK_RUN = Path(__file__).resolve().parents[1] / "books" / "h200_20261129" / "summary.json"
"""The whole-book H200 run (one GPU, 2026-11-29; its multi-GPU pairs skipped) whose peaks the chapter
READMEs' capacity figures are judged against."""


def set_up_on_meta(bench: aisp.Benchmark) -> aisp.Benchmark:
    """``bench`` set up on the meta device. A meta tensor draws no numbers, so the variant's factories
    get no generator there."""
    bench.device, bench.seed = torch.device("meta"), 0
    bench.generator = lambda: None
    bench.setup()
    return bench


def run_on_meta(bench: aisp.Benchmark) -> Any:
    """``bench`` set up and run once on the meta device; returns run()'s output."""
    return set_up_on_meta(bench).run()


def held_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """The bytes ``tensors`` hold: numel x element size each."""
    return sum(t.numel() * t.element_size() for t in tensors)


def stored_peaks(chapter: Path, pair: str) -> dict[str, int]:
    """The pair's peak bytes per side as the chapter's H200 expectations store them."""
    memory = json.loads((chapter / "expectations_h200.json").read_text())["entries"][pair]["memory"]
    return {side: int(v) for side, v in memory.items() if side.endswith("peak_bytes") and v is not None}


def book_run_memory(target: str, key: str = "peak_bytes") -> dict[str, int] | None:
    """Each variant's ``memory[key]`` in the whole-book run (variants that measured none left out);
    None where the run lacks the pair or measured no memory for it (a multi-GPU pair on one GPU)."""
    if not BOOK_RUN.exists():
        return None
    result = next((r for r in json.loads(BOOK_RUN.read_text())["results"] if r["target"] == target), None)
    if result is None:
        return None
    sides = [v for v in [result.get("baseline"), *(result.get("variants") or [])] if v]
    peaks = {v["name"]: int(v["memory"][key]) for v in sides if (v.get("memory") or {}).get(key)}
    return peaks or None


def setup_held_bytes(bench: aisp.Benchmark) -> int:
    """The bytes of the distinct tensors ``bench`` holds after its setup, gradients included: what the
    harness's ``setup_bytes`` measures on a GPU where every size is a multiple of the allocator's 512."""
    tensors = {id(t): t for t in tensor_attributes(bench).values()}
    grads = {id(t.grad): t.grad for t in tensors.values() if t.grad is not None}
    return held_bytes({**tensors, **grads}.values())


def capacity_percent(workload: aisp.Workload, peak_bytes: int) -> float:
    """The capacity ceiling ``aisp report ceilings`` gives a variant of ``workload`` that peaked at
    ``peak_bytes``; fails where the report would not judge the pair by capacity."""
    variant = {"summary": {"median": 1.0}, "memory": {"peak_bytes": peak_bytes, "peak_method": PEAK_METHOD}}
    found = ceiling(variant, workload_dict(workload), None)
    assert found is not None and found["kind"] == "capacity", f"not a capacity ceiling: {found}"
    return found["percent"]

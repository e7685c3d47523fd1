"""The latency counts ch16 and ch18 declare (issue 30) are the kernels their code really dispatches.

Each count is recounted on a CPU: the non-view aten ops the pair's own step dispatches (a view
launches no kernel; every other op launches at least one on a GPU, so the count is a lower bound),
and the declared ``LatencyCounts`` must equal the counts derived from that and the workload's own
size fields. Then the ceiling computed from a synthetic peaks dict must be those counts times
their floors, one after another (``aisp.report.ceilings.ceiling``), and with the committed H200
peaks the launch-, dispatch- and graph-bound pairs are held to their latency bound, the tightest
(``aisp report ceilings`` picked their roofline bound, a fraction of it, before). Declared launches
and dispatches are held to the ops the variants dispatch in tests/test_declared_launches.py.
Host-issued graph launches overlap the GPU's work, so a chapter file that declares more than one
graph launch a call must say in a comment why each is serial (ch12:graph_update, ch16:async_scheduling
and ch18:cudagraph_bucketing summed theirs until 2026-11-30).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import json
import re
import sys
import tokenize
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from conftest import REPO
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import aisp
from aisp.harness.discovery import chapters
from aisp.harness.loader import load_benchmark
from aisp.kits import llm
from aisp.kits.llm import DenseKVCache, build_decoder
from aisp.report.ceilings import bounds, ceiling, rows

CPU = torch.device("cpu")
FLOORS_US = {"launch_eager": 5.0, "launch_graph": 3.0, "launch_graph_node": 0.5, "launch_graph_node_dependent": 0.8,
             "sync_roundtrip": 11.0, "copy_h2d_small": 7.0, "copy_d2h_small": 6.0, "copy_d2d_small": 9.0,
             "dispatch_torch_op": 2.0}
"""Synthetic latency floors, distinct so a count priced at the wrong floor shows."""
PRICES = {"launches": "launch_eager", "graph_launches": "launch_graph", "graph_nodes": "launch_graph_node",
          "dependent_graph_nodes": "launch_graph_node_dependent",
          "syncs": "sync_roundtrip", "device_copies": "copy_d2d_small", "dispatches": "dispatch_torch_op"}
"""Each count the pairs here declare and its floor (``copies``/``messages`` are not declared here)."""


class _Kernels(TorchDispatchMode):
    """Counts the non-view aten ops dispatched inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view:
            self.count += 1
        return func(*args, **(kwargs or {}))


def kernels(fn: Callable[[], object]) -> int:
    """Kernels ``fn()`` launches at the least on a GPU: the non-view aten ops it dispatches."""
    with _Kernels() as counter:
        fn()
    return counter.count


class _Chain(_Kernels):
    """Counts them, and those of them that read a tensor the op before them wrote (its storage)."""

    def __init__(self) -> None:
        super().__init__()
        self.dependent, self.last = 0, set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if not func.is_view:
            read = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
            self.dependent += bool(read & self.last)
            self.last = {t.untyped_storage().data_ptr() for t in tree_leaves(out) if isinstance(t, torch.Tensor)}
        return out


def dependent_kernels(fn: Callable[[], object]) -> tuple[int, int]:
    """(kernels, dependent): the non-view aten ops ``fn()`` dispatches, and how many of them read the
    output of the op dispatched just before (graph nodes priced as ``dependent_graph_nodes``)."""
    with _Chain() as chain:
        fn()
    return chain.count, chain.dependent


def _bench(chapter: str, name: str) -> aisp.Benchmark:
    bench = load_benchmark(REPO / chapter / name)
    bench.device, bench.seed = CPU, 0
    return bench


def _module(bench: aisp.Benchmark, name: str):
    """A chapter module the pair imported (its folder is on sys.path once loaded)."""
    assert inspect.getmodule(type(bench)) is not None
    return sys.modules[name]


def test_the_counter_counts_kernels_not_views():
    x = torch.ones(4, 4)
    assert kernels(lambda: x.view(16)[:3].t()) == 0
    assert kernels(lambda: (x + 1).sum()) == 2


def test_the_chain_counter_counts_ops_on_their_predecessors_output():
    x, y = torch.ones(4), torch.ones(4)
    assert dependent_kernels(lambda: (x + 1).mul_(2).sum()) == (3, 2)
    assert dependent_kernels(lambda: (x + 1, y + 1, y * 2)) == (3, 0)  # each reads an input, not the last op's output


def test_cuda_graphs_counts_every_layer_kernel_but_the_first_as_dependent():
    bench = _bench("ch01", "baseline_cuda_graphs.py")
    bench.setup()
    total, dependent = dependent_kernels(bench.layers)
    assert (total, dependent) == (2 * bench.workload.layers, 2 * bench.workload.layers - 1)
    assert bench.workload.latency == aisp.LatencyCounts(graph_launches=1, graph_nodes=total - dependent,
                                                        dependent_graph_nodes=dependent)


def test_decode_cuda_graph_counts_one_graph_of_its_steps():
    bench = _bench("ch16", "optimized_decode_cuda_graph.py")
    w, decode = bench.workload, _module(bench, "ch16_decode")
    model = build_decoder(w.model, 0, CPU, torch.float32)
    cache = DenseKVCache(w.model, 2, 8, CPU, torch.float32)
    per_step = kernels(decode.GraphedDecode(model, cache, 2, 8).step.fn)
    assert per_step == decode.STEP_KERNELS
    # the ceiling counts the kernels a replay ran on an H200, never more than the CPU's op count
    assert decode.STEP_KERNELS_H200 <= per_step
    assert w.latency == aisp.LatencyCounts(graph_launches=1, graph_nodes=(w.steps - 1) * decode.STEP_KERNELS_H200)


def test_gpu_sampling_counts_the_fused_run_as_one_launch(monkeypatch: pytest.MonkeyPatch):
    """The _fused variant's call is one kernel: the Triton wrapper called once (its kernel launched at one
    place in ch16_top_p) and no aten op besides; the workload's ceiling is that launch, at its cheapest
    (the _fused_graph variant replays it as a one-node graph)."""
    bench = _bench("ch16", "optimized_gpu_sampling_fused.py")
    module = sys.modules[type(bench).__module__]
    calls = []
    monkeypatch.setattr(module, "top_p_race_rows", lambda *args: calls.append(args))
    bench.setup()
    assert kernels(bench.run) == 0 and len(calls) == 1
    assert len(re.findall(r"_top_p_race\[", (REPO / "ch16" / "ch16_top_p.py").read_text())) == 1
    assert bench.workload.latency == aisp.LatencyCounts(graph_launches=1)


def test_cudagraph_bucketing_counts_a_replay_a_step_and_the_first_launch_and_copy():
    bench = _bench("ch18", "optimized_cudagraph_bucketing.py")
    w, graphs = bench.workload, _module(bench, "ch18_graphs")
    model = build_decoder(w.model, 0, CPU, torch.float32)
    per_step = kernels(graphs.StepGraph(model, DenseKVCache(w.model, 2, 8, CPU, torch.float32), 2, 8, None)._step)
    assert per_step == graphs.STEP_KERNELS
    assert graphs.STEP_KERNELS_H200 <= per_step  # the kernels a step ran on an H200
    # one launch and one copy: the first step's, from idle; the host issues the others while the GPU runs
    assert w.latency == aisp.LatencyCounts(graph_launches=1, graph_nodes=w.steps * graphs.STEP_KERNELS_H200,
                                           device_copies=1)


def test_fused_rope_kv_write_counts_its_gemm_kernel_and_read_back():
    bench = _bench("ch18", "baseline_fused_rope_kv_write.py")
    small = dataclasses.replace(bench.workload, tokens=3, heads=4, kv_heads=2, head_dim=8, max_len=16)
    bench.workload = small
    bench.setup()
    w_qkv = torch.cat(bench.weights)
    torch_kernels = kernels(lambda: (torch.nn.functional.linear(bench.x, w_qkv), bench.written()))
    rope = (REPO / "ch18" / "ch18_rope.py").read_text()
    triton_launches = len(re.findall(r"_rope_write\[", rope))
    expected = torch_kernels + triton_launches
    assert expected == _module(bench, "baseline_fused_rope_kv_write").FUSED_KERNELS
    dependent = _module(bench, "baseline_fused_rope_kv_write").FUSED_DEPENDENT
    assert load_benchmark(REPO / "ch18" / "baseline_fused_rope_kv_write.py").workload.latency == \
        aisp.LatencyCounts(graph_launches=1, graph_nodes=expected - dependent, dependent_graph_nodes=dependent)


def test_async_scheduling_counts_a_replay_of_its_paged_step_a_step():
    bench = _bench("ch16", "optimized_async_scheduling.py")
    w = bench.workload
    model = build_decoder(w.model, 0, CPU, torch.float32)
    layout = llm.PageLayout(pages=9, page_size=4, rows=2, max_pages=4)
    step = _module(bench, "ch16_decode").GraphedDecode(model, llm.PagedKVCache(w.model, layout, CPU, torch.float32), 2, 16)
    per_step = kernels(step.step.fn)
    assert per_step == _module(bench, "ch16_decode").PAGED_STEP_KERNELS
    # one launch: the call's first, from idle; the pipelined variant issues the others while the GPU runs
    assert w.latency == aisp.LatencyCounts(graph_launches=1, graph_nodes=w.steps * per_step)


LAUNCH_BOUND = [("ch01", "baseline_gemm.py"), ("ch01", "baseline_preallocated_buffers.py"),
                ("ch12", "baseline_conditional_if.py"), ("ch14", "baseline_custom_op_graph_break.py"),
                ("ch16", "baseline_async_scheduling.py"), ("ch17", "baseline_vectorized_router.py")]
"""Pairs whose LatencyCounts (issue 30) are their tightest bound at the committed H200 peaks."""
PAIRS = [("ch16", "baseline_decode_cuda_graph.py"), ("ch16", "baseline_gpu_sampling.py"),
         ("ch18", "baseline_cudagraph_bucketing.py"), ("ch18", "baseline_fused_rope_kv_write.py"), *LAUNCH_BOUND]


@pytest.mark.parametrize(("chapter", "name"), PAIRS)
def test_the_latency_ceiling_is_the_counts_at_their_floors(chapter: str, name: str):
    workload = dataclasses.asdict(load_benchmark(Path(REPO / chapter / name)).workload)
    huge = {"value": 1e12, "unit": "x", "detail": "synthetic: so FLOPs and bytes bound nothing"}
    peaks = {"measurements": {k: huge for k in ("matmul_fp32", "matmul_bf16", "memory_copy", "l2_bandwidth", "d2h_pinned")},
             "latency": {k: {"value": v, "unit": "us", "detail": "synthetic"} for k, v in FLOORS_US.items()}}
    expected_us = sum(n * FLOORS_US[PRICES[k]] for k, n in workload["latency"].items() if n)
    found = ceiling({"summary": {"median": 2 * expected_us * 1e-3}}, workload, peaks)
    assert found is not None and found["kind"] == "latency"
    assert found["time_ms"] == pytest.approx(expected_us * 1e-3)
    assert found["percent"] == pytest.approx(50.0)


@pytest.mark.parametrize(("chapter", "name"), LAUNCH_BOUND)
def test_the_report_holds_a_launch_bound_pair_to_its_latency_ceiling(chapter: str, name: str):
    """At the committed H200 peaks the declared latency chain is the longest bound, so the ceilings
    report (``rows``) gives the pair the latency kind and the % of that bound."""
    workload = dataclasses.asdict(load_benchmark(REPO / chapter / name).workload)
    peaks = json.loads((REPO / "peaks" / "peak_h200.json").read_text())
    found = {b.kind: b.seconds for b in bounds(workload, peaks)}
    assert max(found, key=found.__getitem__) == "latency", found
    median_ms = 4 * found["latency"] * 1e3
    result = {"target": f"{chapter}:{name}", "workload": workload, "best": "optimized_x",
              "baseline": {"name": "baseline_x", "summary": {"median": 2 * median_ms}},
              "variants": [{"name": "optimized_x", "summary": {"median": median_ms}}]}
    row = rows([result], peaks)[0]
    assert (row.kind, row.variant) == ("latency", "optimized_x") and row.percent == pytest.approx(25.0)
    assert row.reason == workload["ceiling_note"] != ""


def unjustified_graph_launches(source: str) -> list[int]:
    """Lines of ``source`` that declare ``graph_launches=`` other than 0 or 1 with no comment saying what is
    serial above it in the same function (the whole file before it, at module level). Host-issued graph
    launches overlap the GPU's work on the graph before, so only a launch that must wait (a sync, a token
    read back) adds to the chain; ``graph_launches=1`` is the call's first, from idle."""
    tree = ast.parse(source)
    comments = {tok.start[0]: tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT}
    functions = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)]
    bad = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.keyword) and node.arg == "graph_launches"):
            continue
        if isinstance(node.value, ast.Constant) and node.value.value in (0, 1):
            continue
        line = node.value.lineno
        first = max((f.lineno for f in functions if f.lineno <= line <= (f.end_lineno or f.lineno)), default=1)
        if not any("serial" in text for n, text in comments.items() if first <= n <= line):
            bad.append(line)
    return bad


def test_the_justification_check_wants_a_serial_comment_beside_many_launches():
    plain = "def w(steps):\n    return LatencyCounts(graph_launches=steps)\n"
    said = "def w(steps):\n    # each launch is serial: the token is read back first\n    return LatencyCounts(graph_launches=steps)\n"
    elsewhere = "# serial\n" + plain
    assert unjustified_graph_launches(plain) == [2]
    assert unjustified_graph_launches(said) == []
    assert unjustified_graph_launches(elsewhere) == [3]  # a comment outside the function does not count
    assert unjustified_graph_launches("x = LatencyCounts(graph_launches=1, graph_nodes=9)\n") == []


def test_every_declaration_of_many_graph_launches_says_why_they_are_serial():
    """A chapter file that declares more than one graph launch a call says, in a comment in the same function,
    why each is serial (ch12:graph_update, ch16:async_scheduling and ch18:cudagraph_bucketing summed theirs)."""
    files = [path for folder in chapters(REPO).values() for path in sorted(folder.rglob("*.py"))]
    bad = {str(path.relative_to(REPO)): lines for path in files if (lines := unjustified_graph_launches(path.read_text()))}
    assert not bad, f"graph_launches > 1 with no comment saying why each launch is serial: {bad}"

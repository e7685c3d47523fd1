"""Chapter 12 on a CUDA GPU: every pair's setup() check against its PyTorch or closed-form reference
passes, the optimized variants match their baselines on refilled inputs, and the device-side
control flow runs the same number of passes, branches and levels as the host-driven baseline."""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import ModuleType

import pytest
import torch
from refill_check import check_refilled_pair
from test_ch12_pairs import variant_files

import aisp
from aisp.harness.loader import import_module_at
from aisp.kits import native

pytestmark = pytest.mark.gpu
CH12 = Path(__file__).resolve().parents[1] / "ch12"


def load(module: str) -> ModuleType:
    return import_module_at(CH12 / f"{module}.py")


def built(module: str, seed: int = 0) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cuda"), seed
    bench.setup()
    return bench


@pytest.mark.parametrize(("baseline", "optimized"), variant_files())
def test_pair_matches_on_refilled_inputs(baseline: str, optimized: str) -> None:
    base, opt = (load(m).get_benchmark() for m in (baseline, optimized))
    for bench in (base, opt):
        bench.device = torch.device("cuda")
    check_refilled_pair(base, opt, load(baseline).WORKLOAD)


@pytest.mark.parametrize(("baseline", "optimized", "metric"),
                         [("baseline_conditional_while", "optimized_conditional_while", "passes"),
                          ("baseline_conditional_while", "optimized_conditional_while_in_graph", "passes"),
                          ("baseline_dynamic_parallelism", "optimized_dynamic_parallelism", "levels"),
                          ("baseline_dynamic_parallelism", "optimized_dynamic_parallelism_lean", "levels")])
def test_device_control_flow_runs_as_many_passes_as_the_host(baseline: str, optimized: str, metric: str) -> None:
    base, opt = built(baseline), built(optimized)
    base.run()
    opt.run()
    torch.cuda.synchronize()
    assert base.metrics()[metric] == opt.metrics()[metric] > 5
    opt.teardown()


def test_if_nodes_take_the_branches_the_reference_takes() -> None:
    mod = load("baseline_conditional_if")
    opt = built("optimized_conditional_if")
    opt.flags.zero_()
    opt.run()
    torch.cuda.synchronize()
    _, clipped = mod.clip_stages_reference(opt.x, opt.workload.thresholds(), opt.workload.grow)
    assert opt.flags.bool().tolist() == clipped
    opt.teardown()


@pytest.mark.parametrize("module", ["optimized_graph_replay", "optimized_graph_replay_pdl", "optimized_graph_update",
                                    "optimized_graph_update_exec_update", "optimized_graph_update_ring",
                                    "optimized_graph_update_template", "optimized_graph_update_indirect",
                                    "optimized_graph_update_indirect_pdl"])
def test_graph_replays_give_the_same_answer(module: str) -> None:
    bench = built(module)
    first = bench.run().clone()
    for _ in range(3):
        bench.run()
    torch.testing.assert_close(bench.run(), first, rtol=0, atol=0)
    bench.teardown()


@pytest.mark.parametrize("trigger_first", [True, False])
def test_pdl_chain_gives_the_plain_chains_bits(trigger_first: bool) -> None:
    """Both trigger placements of the PDL graph keep the chain's order: after several back-to-back
    replays on fresh inputs, out holds exactly what the eager baseline computes (the same fmaf per
    step), not a value a node read before the node before it had stored."""
    base = built("baseline_graph_replay", seed=5)
    opt = built("optimized_graph_replay_pdl", seed=5)
    other = opt.build(trigger_first)
    try:
        for seed in range(3):
            x = torch.randn(opt.x.shape, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
            base.x.copy_(x)
            opt.x.copy_(x)
            opt.out.fill_(float("nan"))
            for _ in range(4):
                native.check(opt.lib.graph_launch(other, native.stream(opt.device)), "graph_launch")
            torch.testing.assert_close(opt.out, base.run(), rtol=0, atol=0)
    finally:
        torch.cuda.synchronize()
        opt.lib.graph_destroy(other)
        opt.teardown()


@pytest.mark.parametrize("module", ["optimized_dynamic_parallelism", "optimized_dynamic_parallelism_lean"])
def test_refinement_never_overflows_its_lists_on_another_seed(module: str) -> None:
    bench = built(module, seed=3)
    bench.run()
    torch.cuda.synchronize()
    assert int(bench.count[bench.workload.max_levels]) == 0


def test_lean_levels_split_what_the_host_levels_split_from_garbage_scratch() -> None:
    """dp_lean on scratch full of garbage (as the harness poisons it) gives the baseline's integrals and
    the same interval count at every level from 2 on (level 1 holds 2 slots a cell, holes included),
    twice in a row: the first grid resets everything a call reads."""
    base, lean = built("baseline_dynamic_parallelism", seed=7), built("optimized_dynamic_parallelism_lean", seed=7)
    levels = lean.workload.max_levels
    base.run()
    for _ in range(2):
        lean.count.fill_(-5)
        for t in (lean.lists, lean.out, lean.shape):
            t.fill_(float("nan"))
        lean.run()
        torch.cuda.synchronize()
        assert torch.equal(lean.count[2:], base.count[2:]) and int(lean.count[levels]) == 0
        torch.testing.assert_close(lean.out, base.out, rtol=0, atol=3e-10)


@pytest.mark.parametrize(("module", "metric"), [("optimized_graph_replay", "us_per_kernel"),
                                                ("optimized_graph_replay_pdl", "us_per_kernel"),
                                                ("optimized_graph_replay_pdl", "us_per_kernel_trigger_after_wait"),
                                                ("optimized_graph_update", "us_per_kernel"),
                                                ("optimized_graph_update_ring", "us_per_kernel"),
                                                ("optimized_graph_update_template", "us_per_kernel"),
                                                ("optimized_conditional_while", "us_per_pass"),
                                                ("optimized_conditional_while_in_graph", "us_per_pass"),
                                                ("optimized_conditional_if", "us_per_stage"),
                                                ("optimized_device_graph_launch", "us_per_request"),
                                                ("optimized_device_graph_launch_fire_and_forget",
                                                 "us_per_request")])
def test_per_node_figures_are_positive_and_below_a_millisecond(module: str, metric: str) -> None:
    bench = built(module)
    assert 0 < bench.metrics()[metric] < 1000
    bench.teardown()


def test_device_graph_launches_take_the_host_loops_paths() -> None:
    """Both launch modes run every request (no device launch failed) on the paths the host loop took,
    and repeated calls reset the loop (same bits)."""
    base = built("baseline_device_graph_launch", seed=2)
    base_out, base_routes = (t.clone() for t in base.run())
    for module in ("optimized_device_graph_launch", "optimized_device_graph_launch_fire_and_forget"):
        opt = built(module, seed=2)
        for _ in range(3):
            out, routes = opt.run()
        torch.cuda.synchronize()
        assert opt.ctl.tolist()[0::3] == [opt.workload.requests, 0]
        assert torch.equal(routes, base_routes) and 0 < int(routes.sum()) < opt.workload.requests
        assert torch.equal(out, base_out)
        assert opt.metrics()["reestimates"] == base.metrics()["reestimates"]
        opt.teardown()
    base.teardown()


def test_scheduler_refuses_without_relocatable_device_code(tmp_path, monkeypatch) -> None:
    """Built without -rdc=true (as the plain compile check builds it), dgl_scheduler returns
    cudaErrorNotSupported instead of a scheduler that would run one request."""
    monkeypatch.setenv("AISP_NATIVE_CACHE", str(tmp_path))
    mod = load("baseline_device_graph_launch")
    plain = native.Library(mod.LIBRARY.sources).load(torch.device("cuda"), mod.SIGNATURES)
    exec_ = mod.PTR()
    status = plain.dgl_scheduler(mod.Requests(), (mod.PTR * 2)(), mod.TAIL, ctypes.byref(exec_), None)
    assert status == 801  # cudaErrorNotSupported


def test_in_graph_copy_reads_the_input_of_each_call() -> None:
    """The graph copies x itself (at the address it was built with): a call after x changes in place
    computes from the new x, with the host loop's bits and passes (counted from 0 again)."""
    base, opt = built("baseline_conditional_while"), built("optimized_conditional_while_in_graph")
    gen = torch.Generator("cuda").manual_seed(7)
    for scale in (1.0, 3.0):
        new = torch.randn(opt.workload.n, device="cuda", generator=gen) * scale
        base.x.copy_(new)
        opt.x.copy_(new)
        torch.testing.assert_close(opt.run().clone(), base.run().clone(), rtol=0, atol=0)
        assert opt.passes_run() == base.passes_run() > 5
    opt.teardown()


@pytest.mark.parametrize("module", ["optimized_graph_update_ring", "optimized_graph_update_template",
                                    "optimized_graph_update_indirect", "optimized_graph_update_indirect_pdl"])
def test_ring_update_applies_each_calls_coefficients_and_input(module: str) -> None:
    """Five calls (40 launches: every exec of the ring at several steps; the template variant's one
    exec updated while its earlier launches may still be queued), each with new c_t and a new x, out
    poisoned before each: the result is the chain from that call's x and c_t (the root node reads x,
    every launch got its step's values), matching the re-capturing baseline's bits."""
    mod = load("baseline_graph_update")
    base, opt = built("baseline_graph_update"), built(module)
    w, gen = opt.workload, torch.Generator("cuda").manual_seed(3)
    for call in range(5):
        coefs = [0.02 * (t + 1) * (call + 1) - 0.05 for t in range(w.steps)]
        new = torch.randn(w.n, device="cuda", generator=gen)
        for bench in (base, opt):
            bench.coefs = mod.floats(coefs)
            bench.x.copy_(new)
        opt.out.fill_(float("nan"))
        got = opt.run().clone()
        ref = mod.affine_chain_reference(new, [(w.a, c) for c in coefs for _ in range(w.nodes)])
        torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(got, base.run().clone(), rtol=0, atol=0)
    opt.teardown()
    base.teardown()

"""Chapter 12 on a CUDA GPU: every pair's setup() check against its PyTorch or closed-form reference
passes, the optimized variants match their baselines on refilled inputs, and the device-side
control flow runs the same number of passes, branches and levels as the host-driven baseline."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch
from refill_check import check_refilled_pair
from test_ch12_pairs import variant_files

import aisp
from aisp.harness.loader import import_module_at

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
                          ("baseline_dynamic_parallelism", "optimized_dynamic_parallelism", "levels")])
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


@pytest.mark.parametrize("module", ["optimized_graph_replay", "optimized_graph_update",
                                    "optimized_graph_update_exec_update"])
def test_graph_replays_give_the_same_answer(module: str) -> None:
    bench = built(module)
    first = bench.run().clone()
    for _ in range(3):
        bench.run()
    torch.testing.assert_close(bench.run(), first, rtol=0, atol=0)
    bench.teardown()


def test_refinement_never_overflows_its_lists_on_another_seed() -> None:
    bench = built("optimized_dynamic_parallelism", seed=3)
    bench.run()
    torch.cuda.synchronize()
    assert int(bench.count[bench.workload.max_levels]) == 0


@pytest.mark.parametrize(("module", "metric"), [("optimized_graph_replay", "us_per_kernel"),
                                                ("optimized_graph_update", "us_per_kernel"),
                                                ("optimized_conditional_while", "us_per_pass"),
                                                ("optimized_conditional_if", "us_per_stage")])
def test_per_node_figures_are_positive_and_below_a_millisecond(module: str, metric: str) -> None:
    bench = built(module)
    assert 0 < bench.metrics()[metric] < 1000
    bench.teardown()

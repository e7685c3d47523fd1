"""Every pair against its ceiling: the three bounds, the tightest winning, the latency counts priced
at the measured floors (and files without them), tokens/s of serving loops, the post step, the
ceilings report and its CLI."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from aisp import LatencyCounts, Workload, suite
from aisp.cli.main import app
from aisp.harness.artifacts import atomic_write_json
from aisp.harness.names import PEAK_METHOD
from aisp.report.ceilings import COUNT_FLOORS, REACHED_PCT, add_ceiling, ceiling, profiled, rows, tally
from aisp.report.roofline import add_roofline, annotate
from tests.synthetic_runs import pair, samples, variant, write_run

PEAKS = {"measurements": {"matmul_fp32": {"value": 50.0}, "matmul_bf16": {"value": 800.0},
                          "memory_copy": {"value": 4000.0}},
         "latency": {"launch_eager": {"value": 5.0}, "launch_graph": {"value": 2.0},
                     "launch_graph_node": {"value": 1.0}, "sync_roundtrip": {"value": 10.0},
                     "copy_h2d_small": {"value": 3.0}, "copy_d2h_small": {"value": 4.0}},
         "provenance": {"hardware_key": "cpu"}}
OLD_H200 = Path(__file__).parent / "fixtures" / "peaks" / "peak_h200_before_latency.json"  # the H200 file as written before the latency section


def timed(ms: float, name: str = "optimized_x") -> dict:
    return {"name": name, "summary": {"median": ms}}


def test_flops_and_bytes_give_the_roofline_bound() -> None:
    workload = {"flops": 1e9, "bytes": 1e6, "precision": "fp32"}  # compute-bound: 0.02 ms at 50 TFLOP/s
    found = ceiling(timed(0.04), workload, PEAKS)
    assert found["kind"] == "compute" and found["value"] == 50.0 and found["unit"] == "TFLOP/s"
    assert found["percent"] == pytest.approx(annotate(timed(0.04), workload, PEAKS)["pct_of_bound"]) == pytest.approx(50)


def test_bytes_alone_are_judged_against_the_link() -> None:
    found = ceiling(timed(1.0), {"bytes": 2e9}, PEAKS)  # 2 GB at 4000 GB/s: 0.5 ms
    assert (found["kind"], found["unit"]) == ("memory", "GB/s") and found["percent"] == pytest.approx(50)


def test_latency_counts_are_priced_at_their_floors_one_after_another() -> None:
    counts = asdict(LatencyCounts(graph_launches=1, graph_nodes=1000, syncs=1, copies=2))
    found = ceiling(timed(1.0), {"latency": counts}, PEAKS)
    # 1 x 2 us + 1000 x 1 us + 1 x 10 us + 2 x max(3, 4) us = 1020 us; measured 1 ms.
    assert found["kind"] == "latency" and found["value"] == pytest.approx(1020)
    assert found["percent"] == pytest.approx(102)
    assert "1000 graph_nodes x 1.00 us" in found["detail"]


def test_the_tightest_declared_bound_is_the_ceiling() -> None:
    workload = {"bytes": 4e3, "latency": {"launches": 100}}  # 1 ns of memory, 500 us of launches
    assert ceiling(timed(1.0), workload, PEAKS)["kind"] == "latency"
    workload = {"bytes": 4e9, "latency": {"launches": 100}}  # 1 ms of memory wins
    assert ceiling(timed(2.0), workload, PEAKS)["kind"] == "memory"


def test_tokens_per_second_ceiling_of_a_decode_loop() -> None:
    # 64 decode steps streaming 2 GB of weights each: 32 ms at 4000 GB/s for 64 tokens.
    workload = {"bytes": 64 * 2e9, "items": 64, "item_unit": "tokens"}
    found = ceiling(timed(40.0), workload, PEAKS)
    assert found["kind"] == "memory" and found["item_unit"] == "tokens"
    assert found["items_per_s"] == pytest.approx(64 / 0.032) and found["percent"] == pytest.approx(80)


def test_a_real_workload_declaration_reaches_the_ceiling() -> None:
    workload = Workload(latency=LatencyCounts(launches=10), ceiling_note="host-bound by design")
    found = ceiling(timed(0.1), asdict(workload), PEAKS)
    assert found["kind"] == "latency" and found["percent"] == pytest.approx(50)


def _result(latency: dict | None = None, **workload) -> dict:
    result = pair("ch01:x", variant("baseline", samples(2.0, 0.01)), [variant("optimized", samples(1.0, 0.01))])
    result["workload"] = {**workload, "latency": latency}
    return result


def test_the_post_step_gives_the_best_variant_its_ceiling() -> None:
    out = add_ceiling(_result({"graph_nodes": 500}), PEAKS)  # 0.5 ms floor
    assert out["ceiling"]["percent"] == pytest.approx(50, rel=0.05)
    assert out["baseline"]["ceiling"]["percent"] == pytest.approx(25, rel=0.05)


def test_no_declared_bound_or_no_peaks_is_said() -> None:
    assert "declares no FLOPs" in add_ceiling(_result(), PEAKS)["no_ceiling"]
    assert "aisp peak" in add_ceiling(_result({"launches": 1}), None)["no_ceiling"]
    stated = _result()
    stated["workload"]["ceiling_note"] = "no ceiling: host-side compile"  # a pair that says why it has none
    assert add_ceiling(stated, PEAKS)["no_ceiling"] == "no ceiling: host-side compile"


def test_a_missing_floor_names_it() -> None:
    old = json.loads(OLD_H200.read_text())  # before the latency section: launches priced, syncs not
    assert add_ceiling(_result({"launches": 10, "graph_nodes": 10}), old)["ceiling"]["kind"] == "latency"
    out = add_ceiling(_result({"syncs": 3}), old)
    assert "no sync_roundtrip latency floor" in out["no_ceiling"] and "aisp peak --refresh" in out["no_ceiling"]


def _memory_pair(resident: float, peaks_bytes: tuple[int, int] = (4_000_000_000, 1_000_000_000)) -> dict:
    """A memory-headline pair: the baseline peaked at 4 GB, the optimized at 1 GB."""
    result = _result(headline="memory", resident_bytes=resident, bytes=1e9)
    for var, peak in zip([result["baseline"], *result["variants"]], peaks_bytes, strict=True):
        var["memory"] = {"peak_bytes": peak, "peak_method": PEAK_METHOD}
    return result


def test_a_memory_headline_pair_is_held_to_the_bytes_it_must_hold() -> None:
    """Capacity, not time: 0.85 GB that must be resident against the 1 GB the optimized peaked at."""
    out = add_ceiling(_memory_pair(0.85e9), PEAKS)
    assert out["ceiling"]["kind"] == "capacity" and out["ceiling"]["percent"] == pytest.approx(85)
    assert out["baseline"]["ceiling"]["percent"] == pytest.approx(21.25)
    assert rows([_memory_pair(0.85e9)], PEAKS)[0].kind == "capacity"
    # declaring more bytes than the variant held is a wrong declaration, said as such
    assert any("150% of its capacity ceiling: check the declared resident bytes" in n
               for n in add_ceiling(_memory_pair(1.5e9), PEAKS)["notes"])
    # without resident bytes the memory-headline pair keeps its time ceiling (its bytes over HBM)
    assert add_ceiling(_memory_pair(0.0), PEAKS)["ceiling"]["kind"] == "memory"
    # so does a run whose peaks left out the state earlier calls left (before peak_method was stored)
    older = _memory_pair(0.85e9)
    for var in [older["baseline"], *older["variants"]]:
        del var["memory"]["peak_method"]
    assert add_ceiling(older, PEAKS)["ceiling"]["kind"] == "memory"


def test_faster_than_the_latency_ceiling_is_flagged() -> None:
    out = add_ceiling(_result({"launches": 400}), PEAKS)  # 2 ms floor, optimized at 1 ms
    assert any("200% of its latency ceiling" in n for n in out["notes"])


def test_a_pair_the_run_failed_is_judged_on_its_baseline_and_says_so() -> None:
    """An error or a failed check leaves a pair no best variant: its row is the baseline's %, marked with
    the verdict and counted apart, not passed off as the pair's best."""
    failed = {**_result({"graph_nodes": 300}, ceiling_note="n"), "verdict": "error", "best": None}
    slow = {**_result({"graph_nodes": 300}, ceiling_note="n"), "verdict": "regressed", "best": None}
    found = rows([failed, slow], PEAKS)
    assert [r.variant for r in found] == ["baseline (optimized: error)", "baseline"]
    assert found[0].percent == pytest.approx(15, rel=0.05)  # the baseline's 2 ms against a 0.3 ms floor
    assert tally(found)["below_failed"] == 1


def test_a_pair_the_run_did_not_time_is_not_called_one_without_a_ceiling() -> None:
    """A skipped pair with a declared bound (its optimized variant unavailable, its baseline never timed)
    is 'untimed' with the run's reason, even where the run stored 'no measured peaks' for it."""
    skipped = _result({"graph_nodes": 300}, ceiling_note="n")
    skipped |= {"verdict": "skipped", "best": None, "reason": "optimized: needs the Python package 'kvikio'",
                "no_ceiling": "no measured peaks for this machine; run 'aisp peak'"}
    skipped["baseline"] = {**skipped["baseline"], "summary": None}
    found = rows([skipped], PEAKS)
    assert (found[0].kind, found[0].reason) == ("untimed", "optimized: needs the Python package 'kvikio'")
    assert tally(found)["untimed"] == 1 and tally(found)["no_ceiling"] == 0


def test_rows_give_the_reason_only_below_the_mark() -> None:
    reached = _result({"graph_nodes": 900}, ceiling_note="unused")  # 90%
    below = _result({"graph_nodes": 300}, ceiling_note="two syncs per step the lesson keeps")  # 30%
    silent = _result({"graph_nodes": 300})
    none = _result()
    skipped = pair("ch02:y", None, [], verdict="skipped", reason="needs a CUDA GPU")
    found = rows([reached, below, silent, none, skipped], PEAKS)
    assert [r.kind for r in found] == ["latency"] * 3 + ["none", "untimed"]
    assert found[0].percent >= REACHED_PCT and found[0].reason == ""
    assert found[1].reason == "two syncs per step the lesson keeps"
    assert found[2].reason.startswith("no reason given")
    assert "declares no" in found[3].reason and found[4].reason == "needs a CUDA GPU"
    assert tally(found) == {"pairs": 5, "reached": 1, "below": 2, "below_without_reason": 1, "below_unprofiled": 2,
                            "below_failed": 0, "no_ceiling": 1, "untimed": 1}
    cited = _result({"graph_nodes": 300}, ceiling_note="ncu: DRAM 57%, L2 78% its busiest unit")
    split = _result({"graph_nodes": 300}, ceiling_note="profiled (ncu timed out): GEMMs 52% of the kernel time")
    assert tally(rows([cited, split, below], PEAKS))["below_unprofiled"] == 1  # only the note that cites none
    later = _result({"graph_nodes": 300}, ceiling_note="timed 0.11 ms (62% of copy); ncu: DRAM 57%")
    plain = _result({"graph_nodes": 300}, ceiling_note="the attention kernel at head dim 64, not profiled")
    tagged = _result({"graph_nodes": 300}, ceiling_note="L2 at 80%, tensor pipe 59% (Nsight Compute)")
    assert [profiled(r.reason) for r in rows([later, plain, tagged], PEAKS)] == [True, False, True]
    negated = _result({"graph_nodes": 300}, ceiling_note="_fused 0.144 ms; _fused not profiled: the cache read once")
    unyet = _result({"graph_nodes": 300}, ceiling_note="the merge (not yet profiled: torch trace pending)")
    assert [profiled(r.reason) for r in rows([negated, unyet], PEAKS)] == [False, True]  # the second names a trace
    assert not profiled("bubble 11%; never profiled: sends beside GEMMs")


def test_rows_use_the_stored_ceiling_without_peaks() -> None:
    stored = add_ceiling(_result({"graph_nodes": 900}), PEAKS)
    assert rows([stored], None)[0].percent == pytest.approx(stored["ceiling"]["percent"])


def test_a_stored_ceiling_never_stands_in_for_one_the_peaks_cannot_price() -> None:
    """A run judged against today's declarations (--current-workloads): its pair stored an HBM ceiling,
    and now names a link these peaks lack. The row is "none" with the missing peak, not the stored %;
    the run's own result is left as it was."""
    stored = add_ceiling(_result(bytes=4e9), PEAKS)
    assert stored["ceiling"]["kind"] == "memory"
    now = {**stored, "workload": {**stored["workload"], "link": "l2"}}
    out = add_ceiling(now, PEAKS)
    assert "ceiling" not in out and "l2_bandwidth" in out["no_ceiling"]
    assert all("ceiling" not in var for var in [out["baseline"], *out["variants"]])
    assert [(r.kind, r.percent) for r in rows([now], PEAKS)] == [("none", None)]
    assert stored["ceiling"]["kind"] == "memory" and "ceiling" in stored["variants"][0]


def test_cli_report_ceilings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISP_PEAK_DIR", str(tmp_path / "peaks"))
    atomic_write_json(tmp_path / "peaks" / "peak_cpu.json", PEAKS)
    run = write_run(tmp_path, "run1", [_result({"graph_nodes": 300}, ceiling_note="a reason"), _result()])
    out = CliRunner().invoke(app, ["report", "ceilings", str(run)])
    assert out.exit_code == 0, out.output
    assert "latency" in out.output and "a reason" in out.output and "declares no" in out.output
    assert ("2 pairs: 0 at >= 80% of their ceiling, 1 below (0 without a reason, 1 whose reason cites no profile), "
            "1 without a ceiling") in " ".join(out.output.split())
    (run / "summary.json").unlink()
    missing = CliRunner().invoke(app, ["report", "ceilings", str(run)])
    assert missing.exit_code == 2 and "no summary.json" in missing.stderr


def test_the_ceilings_table_fits_a_narrow_console() -> None:
    """At 80 columns the variant goes first and the reason wraps; pair names and figures stay whole."""
    from rich.console import Console

    from aisp.report.ceilings import Row, table

    found = [Row("ch18:flash_attention_triton", "compute", 77.0, "optimized_flash_attention_triton_cudnn",
                 "cuDNN's wgmma + TMA kernel; ours: the softmax between the two products, no warp specialization")]
    for width, variant_shown in ((80, False), (200, True)):
        console = Console(width=width, record=True)
        console.print(table(found, "Ceilings", width))
        text = console.export_text()
        assert "ch18:flash_attention_triton" in text and "77%" in text and "…" not in text, text
        assert ("optimized_flash_attention_triton_cudnn" in text) is variant_shown
        assert max(len(line) for line in text.splitlines()) <= width


def test_a_run_adds_the_ceiling_beside_the_roofline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(suite, "load_peaks", lambda key: PEAKS)
    step = suite._roofline_step()
    out = step(_result({"graph_nodes": 500}, bytes=1e6), SimpleNamespace(manifest={"hardware_key": "cpu"}))
    assert out["ceiling"]["kind"] == "latency" and "roofline" in out["variants"][0]


def test_every_latency_count_has_a_floor() -> None:
    assert set(COUNT_FLOORS) == {f.name for f in fields(LatencyCounts)}


def _dependent_chain(floor: float | None) -> dict:
    """PEAKS with ``launch_graph_node_dependent`` at ``floor`` (None: not measured, as in the H200 file)."""
    extra = {} if floor is None else {"launch_graph_node_dependent": {"value": floor}}
    return {**PEAKS, "latency": {**PEAKS["latency"], **extra}}


def test_dependent_graph_nodes_are_priced_as_graph_nodes_until_their_floor_is_measured() -> None:
    plain = ceiling(timed(1.0), {"latency": {"graph_launches": 1, "graph_nodes": 200}}, PEAKS)
    chain = ceiling(timed(1.0), {"latency": {"graph_launches": 1, "dependent_graph_nodes": 200}}, _dependent_chain(None))
    assert chain["kind"] == "latency" and chain["time_ms"] == plain["time_ms"] == pytest.approx(0.202)
    assert chain["percent"] == plain["percent"] and "unpriced" not in chain
    assert "200 dependent_graph_nodes x 1.00 us (no launch_graph_node_dependent measured)" in chain["detail"]
    # the H200 file as committed has the floor (measured 2026-11-29): a dependent node costs more than an empty one
    h200 = json.loads((Path(__file__).parents[1] / "peaks" / "peak_h200.json").read_text())["latency"]
    lat = {k: v["value"] for k, v in h200.items()}
    counts = {"graph_launches": 1, "graph_nodes": 1, "dependent_graph_nodes": 199}
    assert lat["launch_graph_node_dependent"] > lat["launch_graph_node"]
    expected = lat["launch_graph"] + lat["launch_graph_node"] + 199 * lat["launch_graph_node_dependent"]
    found = ceiling(timed(1.0), {"latency": counts}, {"latency": h200})
    assert found["value"] == pytest.approx(expected)


def test_dependent_graph_nodes_are_priced_at_the_slower_of_their_floors() -> None:
    counts = {"latency": {"graph_launches": 1, "graph_nodes": 1, "dependent_graph_nodes": 199}}
    found = ceiling(timed(1.0), counts, _dependent_chain(1.6))  # 2 + 1 x 1.0 + 199 x 1.6 us
    assert found["value"] == pytest.approx(321.4) and found["percent"] == pytest.approx(32.14)
    assert "199 dependent_graph_nodes x 1.60 us" in found["detail"] and "measured)" not in found["detail"]
    assert ceiling(timed(1.0), counts, _dependent_chain(0.7))["value"] == pytest.approx(202)  # never below an empty node


def test_dependent_graph_nodes_without_either_floor_are_unpriced() -> None:
    bare = {**PEAKS, "latency": {k: v for k, v in PEAKS["latency"].items() if k != "launch_graph_node"}}
    out = add_ceiling(_result({"dependent_graph_nodes": 300}), bare)
    assert "no launch_graph_node, launch_graph_node_dependent latency floor" in out["no_ceiling"]
    kept = ceiling(timed(1.0), {"bytes": 2e9, "latency": {"dependent_graph_nodes": 300}}, bare)
    assert kept["kind"] == "memory" and kept["unpriced"] == ["dependent_graph_nodes"]


def test_a_one_gpu_pair_of_a_four_gpu_run_takes_the_one_gpu_peaks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run on a 4 x H200 host has the key 4x_h200; its one-GPU pairs are held to peak_h200.json (no
    peaks were found for all 159 pairs of such a run before)."""
    asked: list[str] = []
    monkeypatch.setattr(suite, "load_peaks", lambda key: asked.append(key) or PEAKS)
    step = suite._roofline_step()
    manifest = {"hardware_key": "4x_h200", "gpu_name": "NVIDIA H200"}
    out = step(_result({"graph_nodes": 500}), SimpleNamespace(manifest=manifest))
    assert asked == ["h200"] and out["ceiling"]["kind"] == "latency"


GPU_PEAKS = {"measurements": {**PEAKS["measurements"], "h2d_pinned": {"value": 50.0}, "d2h_pinned": {"value": 40.0},
                              "p2p_copy": {"value": 400.0}},
             "latency": PEAKS["latency"], "provenance": {"hardware_key": "2x_h200"}}
"""One GPU's peaks, as ``aisp peak`` measures them (matmul and copies on GPU 0, p2p_copy GPU0 -> GPU1)."""


def on(ranks: int, key: str = "gpus", **workload) -> dict:
    """A workload dict as a result stores it, run as ``ranks`` ranks (``requires.gpus`` or ``.ranks``)."""
    return {**workload, "requires": {"gpus": 1, "ranks": 1, key: ranks}}


def test_a_two_rank_pairs_compute_bound_is_half_a_one_rank_ones() -> None:
    one = ceiling(timed(4.0), on(1, flops=1.6e12, precision="bf16"), GPU_PEAKS)  # 2 ms at 800 TFLOP/s
    for key in ("gpus", "ranks"):
        two = ceiling(timed(4.0), on(2, key, flops=1.6e12, precision="bf16"), GPU_PEAKS)
        assert two["time_ms"] == pytest.approx(one["time_ms"] / 2) == pytest.approx(1.0)
        assert two["value"] == pytest.approx(2 * one["value"]) and two["percent"] == pytest.approx(one["percent"] / 2)


def test_the_detail_names_how_many_gpus_peaks() -> None:
    assert ceiling(timed(4.0), on(2, flops=1.6e12, precision="bf16"), GPU_PEAKS)["detail"] == \
        "1.6e+12 FLOP at 2 x the bf16 peak"
    assert ceiling(timed(4.0), on(1, flops=1.6e12, precision="bf16"), GPU_PEAKS)["detail"] == \
        "1.6e+12 FLOP at the bf16 peak"
    assert ceiling(timed(4.0), on(4, bytes=8e9), GPU_PEAKS)["detail"] == "8e+09 B at 4 x the hbm peak"


def test_nvlink_bytes_are_held_to_every_gpu_sending_at_once() -> None:
    # Each of 2 ranks sends 400 MB to the other, both at once: 800 MB at 2 x 400 GB/s is 1 ms.
    found = ceiling(timed(1.25), on(2, bytes=8e8, link="nvlink"), GPU_PEAKS)
    assert found["kind"] == "memory" and found["value"] == pytest.approx(800)
    assert found["time_ms"] == pytest.approx(1.0) and found["percent"] == pytest.approx(80)
    assert found["detail"] == "8e+08 B at 2 x the nvlink peak"


@pytest.mark.parametrize("link, gbps", [("h2d", 50.0), ("d2h", 40.0)])
def test_host_copies_are_held_to_one_pcie_link_a_gpu(link: str, gbps: float) -> None:
    found = ceiling(timed(10.0), on(4, bytes=1e9, link=link), GPU_PEAKS)  # 4 GPUs, a link each
    assert found["value"] == pytest.approx(4 * gbps) and found["time_ms"] == pytest.approx(1e9 / (4 * gbps * 1e9) * 1e3)


def test_latency_counts_are_one_ranks_chain_and_not_scaled() -> None:
    counts = {"launches": 100}  # 500 us at 5 us a launch, on one GPU or on eight
    assert ceiling(timed(1.0), on(8, latency=counts), GPU_PEAKS)["value"] == pytest.approx(500)
    assert ceiling(timed(1.0), on(1, latency=counts), GPU_PEAKS)["value"] == pytest.approx(500)


def test_a_cpus_peaks_are_the_hosts_and_are_shared_by_its_ranks() -> None:
    """gloo ranks on a CPU share the one host whose fp32 peak was measured on all its cores."""
    one = ceiling(timed(1.0), on(1, flops=1e10, precision="fp32"), PEAKS)
    two = ceiling(timed(1.0), on(2, "ranks", flops=1e10, precision="fp32"), PEAKS)
    assert two["time_ms"] == pytest.approx(one["time_ms"]) and two["detail"] == "1e+10 FLOP at the fp32 peak"


def test_the_roofline_holds_a_pair_to_the_same_n_gpu_bound() -> None:
    workload = on(2, flops=1.6e12, bytes=1e9, precision="bf16")
    roof = annotate(timed(4.0), workload, GPU_PEAKS)
    assert roof["gpus"] == 2 and roof["peak_tflops"] == pytest.approx(1600) and roof["peak_gbps"] == pytest.approx(8000)
    assert roof["ridge_intensity"] == pytest.approx(200)  # N cancels: the ridge of one GPU
    assert roof["pct_of_bound"] == pytest.approx(ceiling(timed(4.0), workload, GPU_PEAKS)["percent"]) == pytest.approx(25)


def test_a_whole_call_declaration_no_longer_passes_one_gpus_ceiling() -> None:
    """ch04:ddp_overlap_multigpu in the 2026-11-28 run: 6.597e12 FLOP over both ranks in 7.210 ms read
    116% of one H200's bf16 peak (787.6 TFLOP/s) and was not flagged; against both GPUs it is 58%."""
    peaks = {**GPU_PEAKS, "measurements": {**GPU_PEAKS["measurements"], "matmul_bf16": {"value": 787.6}}}
    result = _result(None, flops=6.597e12, precision="bf16", requires={"gpus": 1, "ranks": 2})
    result["baseline"]["summary"]["median"], result["variants"][0]["summary"]["median"] = 7.710, 7.210
    out = add_roofline(add_ceiling(result, peaks), peaks)
    assert out["ceiling"]["percent"] == pytest.approx(58.1, abs=0.1)
    assert out["variants"][0]["roofline"]["pct_of_bound"] == pytest.approx(58.1, abs=0.1)
    assert not any("of the measured roofline bound" in n for n in out["notes"])


def test_cli_report_ceilings_with_the_notes_written_since_the_run(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A run stores each pair's note as it was; --current-notes reads the pairs' files as they are now
    (a pair no longer found keeps its stored note)."""
    from aisp.harness.discovery import repo_root, resolve_targets
    from aisp.harness.loader import load_benchmark

    monkeypatch.setenv("AISP_PEAK_DIR", str(tmp_path / "peaks"))
    atomic_write_json(tmp_path / "peaks" / "peak_cpu.json", PEAKS)
    real, gone = _result({"graph_nodes": 300}, ceiling_note="stale"), _result({"graph_nodes": 300}, ceiling_note="kept")
    real["target"], gone["target"] = "ch01:batch_size", "ch99:gone"
    run = write_run(tmp_path, "run1", [real, gone])
    now = load_benchmark(resolve_targets(["ch01:batch_size"], repo_root())[0].baseline).workload.ceiling_note
    stored = CliRunner().invoke(app, ["report", "ceilings", str(run)], terminal_width=300)
    current = CliRunner().invoke(app, ["report", "ceilings", str(run), "--current-notes"], terminal_width=300)
    assert stored.exit_code == current.exit_code == 0, current.output
    assert "stale" in stored.output and "stale" not in current.output
    assert now.split()[0] in current.output and "kept" in current.output  # the cell wraps later words


def test_cli_report_ceilings_with_the_workloads_declared_since_the_run(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """--current-workloads judges the run's times against what the pair's file declares now: a stored
    latency-only workload (300 graph nodes) becomes ch01:batch_size's FLOPs and bytes today, so its
    ceiling kind changes; without the option the stored declaration holds."""
    from aisp.harness.discovery import repo_root, resolve_targets
    from aisp.harness.loader import load_benchmark

    monkeypatch.setenv("AISP_PEAK_DIR", str(tmp_path / "peaks"))
    atomic_write_json(tmp_path / "peaks" / "peak_cpu.json", PEAKS)
    old = _result({"graph_nodes": 300}, ceiling_note="stale")
    old["target"] = "ch01:batch_size"
    run = write_run(tmp_path, "run1", [old])
    now = load_benchmark(resolve_targets(["ch01:batch_size"], repo_root())[0].baseline).workload
    assert now.flops > 0 and now.latency is None  # what the test relies on: the file declares compute now
    stored = CliRunner().invoke(app, ["report", "ceilings", str(run)], terminal_width=300)
    current = CliRunner().invoke(app, ["report", "ceilings", str(run), "--current-workloads"], terminal_width=300)
    assert stored.exit_code == current.exit_code == 0, current.output
    assert "latency" in stored.output and "latency" not in current.output
    assert ("compute" in current.output) or ("memory" in current.output)


def test_the_pairs_are_counted_by_band_of_percent_reached() -> None:
    from aisp.report.ceilings import Row, bands

    found = [Row(f"ch01:p{i}", "memory", pct, "optimized_p", "") for i, pct in enumerate([95, 80, 79.9, 70, 55, 20, 19.9, 0])]
    found.append(Row("ch01:none", "none", None, None, "declares no bound"))
    assert bands(found) == [(">= 80%", 2), ("70-80%", 2), ("50-70%", 1), ("20-50%", 1), ("< 20%", 2)]

"""``aisp.check`` and ``aisp check`` on a CPU: a correct kernel passes over edge, random and declared
sizes and dtypes; each check fires on a kernel planted to trip it (tile-tail bug, cached answer,
an answer that goes stale after warmup, bf16 output, bf16 math cast back, aliasing, overwritten
input, NaN, raising); the unjoined-stream check and the speedup on synthetic clocks; the result is
frozen and its JSON carries a schema version; the CLI's exit codes."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import aisp
from aisp.check import CheckOptions, Usage
from aisp.check.calls import Fired
from aisp.check.clock import time_pair
from aisp.check.result import CaseResult, summarize
from aisp.cli.main import app
from aisp.harness.benchmark import Workload
from aisp.harness.stats import Ratio
from aisp.harness.timing import Timed

CH20 = Path(__file__).resolve().parents[1] / "ch20"
sys.path.insert(0, str(CH20))
import kernel_check_examples as ex  # noqa: E402

FAST = CheckOptions(iterations=4, warmup=1)
VERIFY = CheckOptions(time=False)


def one(fn, options: CheckOptions = FAST, ref=ex.softmax_reference) -> CaseResult:
    result = aisp.check(fn, ref, inputs=torch.randn(8, 100), options=options)
    assert len(result.cases) == 1
    return result.cases[0]


def test_a_correct_kernel_passes_every_size_and_dtype() -> None:
    result = aisp.check(ex.softmax_two_pass, ex.softmax_reference, shapes="RxC", dims={"R": 8, "C": 256},
                        dtypes=["float32", "bf16"], options=CheckOptions(random=2, edges=True, iterations=4, warmup=1))
    labels = [c.label for c in result.cases]
    assert labels[:4] == ["8x256 float32", "8x256 bfloat16", "1x1 float32", "1x1 bfloat16"]
    assert "9x257 float32" in labels and len(labels) >= 8
    assert result.verdict == "ok" and result.exit_code == 0 and not result.errors
    assert all(c.speedup is not None and c.speedup.low <= c.speedup.value <= c.speedup.high for c in result.cases)
    assert result.speedup == result.cases[0].speedup
    assert "refilled-inputs" in result.cases[0].checks


def test_the_result_is_frozen_and_its_json_has_a_schema() -> None:
    result = aisp.check(ex.softmax_two_pass, ex.softmax_reference, inputs=(torch.randn(4, 8),), options=VERIFY)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.verdict = "error"
    doc = json.loads(result.to_json())
    assert doc["schema_version"] == 1 and doc["exit_code"] == 0 and doc["cases"][0]["label"] == "4x8 float32"
    assert doc["speedup"] is None  # not timed


def test_the_callers_inputs_are_left_alone() -> None:
    x = torch.randn(4, 8)
    kept = x.clone()
    aisp.check(ex.softmax_two_pass, ex.softmax_reference, inputs=x, options=FAST)
    assert torch.equal(x, kept)


def test_a_tile_tail_bug_fails_at_the_edge_size() -> None:
    options = CheckOptions(edges=True, time=False)
    result = aisp.check(ex.softmax_tail_bug, ex.softmax_reference, shapes="RxC", dims={"R": 4, "C": 256},
                        options=options)
    by_label = {c.label: c for c in result.cases}
    assert by_label["4x256 float32"].verdict == "ok"
    assert by_label["5x257 float32"].check == "mismatch" and "outside tolerance" in by_label["5x257 float32"].reason
    assert result.verdict == "verify-failed" and result.exit_code == 4
    assert any(e.startswith("5x257 float32:") for e in result.errors)


def test_a_cached_answer_fails() -> None:
    case = one(ex.softmax_cached, VERIFY)
    assert case.verdict == "verify-failed" and case.check == "cached-answer"
    assert "did not change when the inputs did" in case.reason


def test_an_answer_that_goes_stale_after_warmup_is_caught_at_a_timed_call() -> None:
    calls, kept = [0], []

    def stale_after_three(x: torch.Tensor) -> torch.Tensor:
        calls[0] += 1
        if calls[0] <= 3:  # the three verification calls see a real answer
            kept[:] = [ex.softmax_reference(x)]
        return kept[0].clone()

    case = one(stale_after_three)
    assert case.check == "cached-answer" and "at a timed call after the inputs were refilled" in case.reason


def test_a_lower_precision_output_dtype_fails() -> None:
    case = one(ex.softmax_bf16, VERIFY)
    assert case.check == "precision" and "torch.bfloat16 is below the reference's torch.float32" in case.reason


def test_bf16_math_cast_back_to_fp32_fails() -> None:
    case = one(lambda x: torch.softmax(x.bfloat16(), -1).float(), VERIFY)
    assert case.check == "precision" and "every value is a bfloat16 value" in case.reason


def test_an_output_that_is_an_input_fails() -> None:
    case = one(lambda x: x.copy_(torch.softmax(x, -1)), VERIFY)
    assert case.check == "aliasing" and "shares storage with input 0" in case.reason


def test_a_kernel_that_overwrites_its_input_fails() -> None:
    def in_place(x: torch.Tensor) -> torch.Tensor:
        out = torch.softmax(x, -1)
        x.zero_()
        return out

    assert one(in_place, VERIFY).check == "mutated-input"


def test_nan_in_the_output_fails() -> None:
    def with_nan(x: torch.Tensor) -> torch.Tensor:
        out = ex.softmax_reference(x)
        out[0, 0] = float("nan")
        return out

    case = one(with_nan, VERIFY)
    assert case.check == "nan" and "1 NaN/Inf" in case.reason


def test_a_raise_is_an_error_with_exit_5() -> None:
    result = aisp.check(ex.softmax_raises, ex.softmax_reference, inputs=torch.randn(2, 3), options=VERIFY)
    assert result.verdict == "error" and result.exit_code == 5
    assert "kernel raised RuntimeError: invalid configuration argument" in result.errors[0]
    result = aisp.check(ex.softmax_two_pass, ex.softmax_raises, inputs=torch.randn(2, 3), options=VERIFY)
    assert result.cases[0].reason.startswith("reference raised RuntimeError")


def fake_clock(ms: dict[str, tuple[float, float | None, float]]):
    """A clock that runs the call and reports fixed (host, device, sync tail) times, told apart by output
    (an empty call, whose output is None, reads ``ms["empty"]``, or the reference's where absent)."""
    def clock(call, device, calls=1, spacer=0.0):
        out = call()
        kind = "fn" if getattr(out, "is_kernel", False) else "empty" if out is None and "empty" in ms else "ref"
        host, events, tail = ms[kind]
        return Timed(out, host, events, host, tail)
    return clock


def marked(x: torch.Tensor) -> torch.Tensor:
    out = ex.softmax_reference(x)
    out.is_kernel = True
    return out


def test_work_outside_the_timed_stream_fails() -> None:
    clock = fake_clock({"fn": (1.0, 0.1, 0.9), "ref": (1.0, 0.95, 0.01)})  # a sync waits 0.9 ms after the kernel's end event
    with pytest.raises(Fired) as fired:
        time_pair(marked, ex.softmax_reference, [torch.randn(4, 8)], Workload(), torch.device("cpu"), 1, 6, clock)
    assert fired.value.check == "unjoined-stream" and "wait_stream" in fired.value.reason


def test_the_tail_is_read_past_what_the_sync_takes_after_an_empty_call() -> None:
    # Seen on an H200 that three other processes shared: a correct 0.027 ms kernel read a 0.012 ms tail,
    # over the 0.01 ms bar, and an empty call the same; subtracted, it passes. A tail past the empty
    # call's still fires.
    args = [torch.randn(4, 8)]
    shared = fake_clock({"fn": (0.1, 0.027, 0.012), "ref": (0.1, 0.03, 0.012), "empty": (0.01, 0.001, 0.012)})
    assert time_pair(marked, ex.softmax_reference, args, Workload(), torch.device("cpu"), 1, 6, shared).fn_ms == 0.027
    left = fake_clock({"fn": (0.1, 0.027, 0.05), "ref": (0.1, 0.03, 0.012), "empty": (0.01, 0.001, 0.012)})
    with pytest.raises(Fired) as fired:
        time_pair(marked, ex.softmax_reference, args, Workload(), torch.device("cpu"), 1, 6, left)
    assert fired.value.check == "unjoined-stream" and "more than after an empty call (0.012 ms)" in fired.value.reason


def test_the_speedup_is_the_paired_ratio_of_the_clocks() -> None:
    clock = fake_clock({"fn": (0.5, 0.5, 0.005), "ref": (2.0, 2.0, 0.005)})
    timing = time_pair(marked, ex.softmax_reference, [torch.randn(4, 8)], Workload(), torch.device("cpu"), 1, 6, clock)
    assert timing.ref_ms == 2.0 and timing.fn_ms == 0.5 and timing.speedup.value == pytest.approx(4.0)


def test_a_speedup_under_the_bar_is_slower_with_exit_1() -> None:
    case = CaseResult(((4,),), "float32", "ok", speedup=Ratio(1.2, 1.05, 1.4))
    assert summarize([case], "cpu", min_speedup=1.1).exit_code == 1
    assert summarize([case], "cpu", min_speedup=1.0).exit_code == 0
    failed = dataclasses.replace(case, verdict="verify-failed", reason="x")
    assert summarize([case, failed], "cpu", min_speedup=1.0).verdict == "verify-failed"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "give either inputs or shapes"),
    ({"inputs": torch.ones(2), "shapes": "4"}, "give either inputs or shapes"),
    ({"shapes": "MxK"}, "does not bind"),
    ({"shapes": "4", "dtypes": ["int4"]}, "unknown dtype"),
])
def test_bad_arguments_raise_usage(kwargs: dict, message: str) -> None:
    with pytest.raises(Usage, match=message):
        aisp.check(ex.softmax_two_pass, ex.softmax_reference, **kwargs)


def test_bad_options_raise_usage() -> None:
    with pytest.raises(Usage, match="iterations >= 2"):
        CheckOptions(iterations=1)
    with pytest.raises(Usage, match="unknown precision"):
        CheckOptions(precision="fp4")


def test_aisp_check_is_the_package_and_the_function() -> None:
    from aisp import check

    assert check is sys.modules["aisp.check"] and callable(check) and check.CheckOptions is CheckOptions


EX = str(CH20 / "kernel_check_examples.py")


@pytest.mark.parametrize(("kernel", "code", "text"), [
    ("softmax_two_pass", 0, "all cases match (cpu)"),
    ("softmax_tail_bug", 4, "FAIL [mismatch]"),
    ("softmax_cached", 4, "FAIL [cached-answer]"),
    ("softmax_bf16", 4, "FAIL [precision]"),
    ("softmax_raises", 5, "ERROR kernel raised"),
])
def test_the_cli_exit_codes(kernel: str, code: int, text: str, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    result = CliRunner().invoke(app, ["check", f"{EX}:{kernel}", "-r", f"{EX}:softmax_reference", "-s", "RxC",
                                      "-d", "R=4", "-d", "C=256", "--random", "1", "--no-time", "--json", str(out)])
    assert result.exit_code == code and text in result.output
    assert json.loads(out.read_text())["exit_code"] == code


def test_the_cli_min_speedup_and_bad_usage() -> None:
    runner = CliRunner()
    args = ["check", f"{EX}:softmax_two_pass", "-r", f"{EX}:softmax_reference", "-s", "4x8", "--iterations", "3",
            "--warmup", "0"]
    assert runner.invoke(app, [*args, "--min-speedup", "1e6"]).exit_code == 1
    bad = runner.invoke(app, ["check", "nomodule_xyz:f", "-r", f"{EX}:softmax_reference", "-s", "4"])
    assert bad.exit_code == 2 and "cannot import 'nomodule_xyz'" in bad.output


def test_aisp_mcp_without_the_sdk_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in sys.modules if n.startswith("mcp.") or n == "aisp.mcp.server"]:
        monkeypatch.delitem(sys.modules, name)  # put back after the test
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` now raises ModuleNotFoundError
    result = CliRunner().invoke(app, ["mcp"])
    assert result.exit_code == 2 and "aisp mcp needs the MCP SDK: pip install 'aisp[mcp]'" in result.output

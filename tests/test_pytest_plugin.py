"""The ``aisp`` pytest plugin, run with pytester: a matching kernel passes and returns a result with
a speedup interval; a cheating kernel (cached answer) and a wrong one fail their test with the
check's reason; a speedup bar is assertable; ``--aisp-json`` writes every check; a CUDA check is
skipped with its reason on a CPU; the example test file runs; the entry point is declared."""

from __future__ import annotations

import json
import shutil
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import scipy.special  # noqa: F401  # see below
import torch

# pytester's in-process runs drop the modules imported inside them, and numpy's FFT extension
# (under scipy, which the speedup interval imports) cannot load twice: imported here, it stays.

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
CPU_ONLY = pytest.mark.skipif(torch.cuda.is_available(), reason="tests the skip that happens without CUDA")

KERNELS = '''
import torch

def ref(x):
    return torch.softmax(x.float(), -1).to(x.dtype)

def good(x):
    return torch.softmax(x, -1)

_cache = {}
def cached(x):
    if x.data_ptr() not in _cache:
        _cache[x.data_ptr()] = ref(x)
    return _cache[x.data_ptr()].clone()

def test_good(aisp_check):
    result = aisp_check(good, ref, inputs=torch.randn(8, 64), iterations=3, warmup=0)
    assert result.ok and result.speedup.low <= result.speedup.value <= result.speedup.high

def test_cached(aisp_check):
    aisp_check(cached, ref, shapes="RxC", dims={"R": 4, "C": 16}, time=False)

def test_wrong(aisp_check):
    aisp_check(lambda x: ref(x) * 1.01, ref, inputs=torch.randn(8, 64), time=False)

def test_bar(aisp_check):
    result = aisp_check(good, ref, inputs=torch.randn(8, 64), iterations=3, warmup=0)
    assert result.speedup.low >= 1e9, "under the bar"

def test_on_gpu(aisp_check):
    aisp_check(good, ref, inputs=torch.randn(8, 64), device="cuda")
'''


def plugin_args() -> list[str]:
    """``-p aisp.pytest_plugin`` unless the installed entry point already loads it."""
    loaded = any(ep.value == "aisp.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if loaded else ["-p", "aisp.pytest_plugin"]


@pytest.fixture
def outcome(pytester: pytest.Pytester):
    pytester.makepyfile(test_kernels=KERNELS)
    json_path = pytester.path / "checks.json"
    result = pytester.runpytest(*plugin_args(), "-rs", "--aisp-json", str(json_path))
    return result, json.loads(json_path.read_text())


@CPU_ONLY
def test_verdicts_fail_the_cheats_and_skip_cuda(outcome) -> None:
    result, _ = outcome
    result.assert_outcomes(passed=1, failed=3, skipped=1)
    result.stdout.fnmatch_lines(["*_ test_cached _*", "aisp_check: *the output did not change when the inputs did*"])
    result.stdout.fnmatch_lines(["*_ test_wrong _*", "aisp_check: *outside tolerance*"])
    result.stdout.fnmatch_lines(["*AssertionError: under the bar*"])
    result.stdout.fnmatch_lines(["*SKIPPED*aisp_check(device='cuda'): torch sees no CUDA GPU*"])
    result.stdout.fnmatch_lines(["*aisp checks*", "ok *test_kernels.py::test_good (1 cases, cpu)*"])


@CPU_ONLY
def test_the_json_lists_every_check(outcome) -> None:
    _, doc = outcome
    assert doc["schema_version"] == 1 and doc["machine"]["torch"] == torch.__version__
    verdicts = {c["test"].split("::")[1]: c["verdict"] for c in doc["checks"]}
    assert verdicts == {"test_good": "ok", "test_cached": "verify-failed", "test_wrong": "verify-failed",
                        "test_bar": "ok"}
    cached = next(c for c in doc["checks"] if c["test"].endswith("test_cached"))
    assert cached["cases"][0]["check"] == "cached-answer"


@CPU_ONLY
def test_the_marker_skips_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.aisp_cuda
        def test_needs_gpu():
            raise AssertionError("not reached")
    """)
    result = pytester.runpytest(*plugin_args(), "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*aisp_cuda: needs a CUDA GPU; torch sees none*"])


@CPU_ONLY
def test_the_example_file_runs(pytester: pytest.Pytester) -> None:
    shutil.copy(REPO / "examples" / "test_my_kernel.py", pytester.path / "test_my_kernel.py")
    result = pytester.runpytest(*plugin_args(), "-rs")
    result.assert_outcomes(passed=1, skipped=1)


def test_the_entry_point_is_declared() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert '[project.entry-points.pytest11]\naisp = "aisp.pytest_plugin"\n' in text


def test_a_min_speedup_under_the_interval_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import torch

        def test_bar(aisp_check):
            aisp_check(torch.relu, torch.relu, inputs=torch.randn(64), iterations=3, warmup=0, min_speedup=1e9)
    """)
    result = pytester.runpytest(*plugin_args())
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["aisp_check: speedup *: its interval's low end is under 1e+09"])

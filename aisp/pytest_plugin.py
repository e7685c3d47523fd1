"""The ``aisp`` pytest plugin (entry point ``pytest11``), in the manner of pytest-benchmark: the
``aisp_check`` fixture runs your kernel against a reference through ``aisp.check`` (the harness's
verifier, then its timer) and fails the test when a case does not match or a call raises; it
returns the frozen result, so a test states its own bar::

    def test_my_softmax(aisp_check):
        result = aisp_check(my_softmax, torch_softmax, shapes="RxC", dims={"R": 4096, "C": 4096})
        assert result.speedup.low >= 1.1

``device="cuda"`` (or the ``aisp_cuda`` marker) skips the test, with the reason, where torch sees no
GPU. ``--aisp-json PATH`` writes every check of the session as one JSON file; the terminal summary
lists each check's verdict and speedup. Heavy imports (torch) wait for the first check."""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

RESULTS = pytest.StashKey[list[tuple[str, Any]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aisp", "aisp kernel checks")
    group.addoption("--aisp-json", metavar="PATH", default=None,
                    help="Write every aisp_check result of the session to this JSON file.")
    group.addoption("--aisp-iterations", type=int, default=None,
                    help="Timed calls per function in every aisp_check (default: aisp's, 20).")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "aisp_cuda: needs a CUDA GPU; skipped with the reason without one")
    config.stash[RESULTS] = []


def _no_cuda() -> bool:
    import torch

    return not torch.cuda.is_available()


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("aisp_cuda") and _no_cuda():
        pytest.skip("aisp_cuda: needs a CUDA GPU; torch sees none")


@pytest.fixture
def aisp_check(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``aisp_check(fn, ref, inputs=... | shapes=..., dims=..., dtypes=..., **options)`` -> the
    ``CheckResult``; the test fails on a mismatch or a raise (and under ``min_speedup`` when given).
    ``options`` are ``CheckOptions`` fields (device, seed, random, edges, iterations, warmup, time,
    precision, element_tol, rtol, min_speedup)."""
    def run(fn: Callable, ref: Callable, inputs: Any = None, **kwargs: Any) -> Any:
        from aisp.check import CheckOptions, check

        names = {f.name for f in fields(CheckOptions)}
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
        if options.get("device") == "cuda" and _no_cuda():
            pytest.skip("aisp_check(device='cuda'): torch sees no CUDA GPU")
        if request.config.getoption("aisp_iterations") and "iterations" not in options:
            options["iterations"] = request.config.getoption("aisp_iterations")
        result = check(fn, ref, inputs, options=CheckOptions(**options), **kwargs)
        request.config.stash[RESULTS].append((request.node.nodeid, result))
        if not result.ok:  # a mismatch, a raise, or a speedup under a min_speedup the test gave
            pytest.fail("aisp_check: " + "; ".join(result.errors), pytrace=False)
        return result
    return run


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("aisp_json")
    results = session.config.stash.get(RESULTS, [])
    if not path:
        return
    from aisp.harness.artifacts import atomic_write_text

    doc = {"schema_version": 1, "machine": _machine(),
           "checks": [{"test": test, **result.to_dict()} for test, result in results]}
    atomic_write_text(Path(path), json.dumps(doc, indent=2))


def _machine() -> dict[str, Any]:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"python": platform.python_version(), "torch": torch.__version__, "gpu": gpu,
            "cpu": platform.processor() or platform.machine()}


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    results = config.stash.get(RESULTS, [])
    if not results:
        return
    terminalreporter.section("aisp checks")
    for test, result in results:
        s = result.speedup
        shown = f"{s.value:.2f}x [{s.low:.2f}, {s.high:.2f}]" if s else "not timed"
        terminalreporter.write_line(f"{result.verdict:<14} {shown:<24} {test} ({len(result.cases)} cases, "
                                    f"{result.device})")

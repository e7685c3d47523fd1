"""The CLI follows common conventions: help imports no torch, real metavars and Choice options,
--version, every option described, and one error style (``error: ...`` on stderr, exit 2) whether
the error comes from aisp or from the option parser."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO
from typer.main import get_command
from typer.testing import CliRunner

import aisp
from aisp.cli.conventions import conventional_metavars
from aisp.cli.main import app

runner = CliRunner(env={"COLUMNS": "120"})

IMPORTS_AFTER = """import sys
sys.argv = ["aisp", *sys.argv[1:]]
try:
    import aisp.__main__  # runs main()
except SystemExit:
    pass
heavy = [m for m in ("torch", "scipy", "numpy", "matplotlib") if m in sys.modules]
print("HEAVY=" + ",".join(heavy))
"""


def heavy_modules_after(*args: str) -> list[str]:
    """The heavy libraries loaded by ``aisp ARGS`` in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", IMPORTS_AFTER, *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120, check=False)
    line = next(x for x in done.stdout.splitlines() if x.startswith("HEAVY="))
    return [m for m in line[len("HEAVY="):].split(",") if m]


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("bench", "--help"), ("bench", "run", "--help"),
                                  ("bench", "compare", "--help"), ("report", "--help"), ("check", "--help"),
                                  ("profile", "--help"), ("peak", "--help"), ("system", "--help")])
def test_help_imports_no_torch(args):
    assert "torch" not in heavy_modules_after(*args)


def test_importing_the_cli_app_imports_no_torch_nor_scipy():
    code = ("import sys, aisp.cli.main; "
            "print([m for m in ('torch', 'scipy', 'numpy') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_a_run_and_the_serving_kit_leave_scipy_stats_and_dynamo_to_those_that_use_them():
    """``aisp bench run`` loads aisp.suite (the judge with it) before any worker starts, and every
    serving rank and worker loads aisp.kits.llm: scipy.stats (~2 s of CPU) and torch._dynamo (~3 s,
    through torch.nn.attention.bias) load where they are called, not at import (2026-11-30)."""
    code = ("import sys, aisp.suite; a = 'scipy.stats' in sys.modules; import aisp.kits.llm; "
            "print(a, 'torch._dynamo' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_package_names_stay_importable_lazily():
    from aisp import Benchmark, Workload  # the chapters' imports

    assert aisp.Benchmark is Benchmark and aisp.Workload is Workload
    assert {"Benchmark", "Workload", "run_standalone", "default_device"} <= set(dir(aisp))
    assert set(aisp.__all__) == set(aisp.LAZY)
    with pytest.raises(AttributeError, match="no attribute 'Benchmrk'"):
        _ = aisp.Benchmrk


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"aisp {aisp.__version__}"


def _commands(command, path=("aisp",)):
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def _root():
    root = get_command(app)
    conventional_metavars(root)
    return root


def test_every_help_page_has_real_metavars():
    """No Typer ``<str>``/``<bool>``/``<list[str]>`` placeholder on any help page."""
    for path, _ in _commands(_root()):
        result = runner.invoke(app, [*path[1:], "--help"])
        assert result.exit_code == 0, (path, result.output)
        for placeholder in ("<str>", "<bool>", "<int>", "<float>", "<list[", "<Path>", "<path>"):
            assert placeholder not in result.output, (path, placeholder)


def test_choice_options_are_checked_by_the_parser_and_listed():
    shown = runner.invoke(app, ["bench", "run", "--help"]).output
    for choice in ("[per-call|sustained|graph]", "[auto|cpu|cuda]", "[none|minimal|full]"):
        assert choice in shown
    assert "[exact|int8|fp64|fp32|tf32|fp16|bf16|fp8]" in runner.invoke(app, ["check", "--help"]).output


def test_every_option_is_described():
    for path, command in _commands(_root()):
        for param in command.params:
            if getattr(param, "param_type_name", "") == "option" and not param.hidden:
                assert param.help, f"{' '.join(path)} {param.opts[0]} has no help"


@pytest.mark.parametrize(("args", "words"), [
    (["bench", "run", "-t", "ch01", "--timing", "loud"], ["--timing", "loud"]),
    (["bench", "run", "-t", "ch01", "--tmie", "3"], ["--tmie"]),
    (["bench", "run", "-t", "ch01", "--iterations", "many"], ["--iterations"]),
    (["bench", "compare"], ["RUN_A"]),
    (["system", "audit", "--profile", "loud"], ["--profile", "training", "inference"]),
    (["mcp", "--device", "tpu"], ["--device", "auto", "cpu", "cuda"]),
    (["bench", "run", "-t", "ch01:batch_sise"], ["ch01:batch_size"]),  # aisp's own check
])
def test_one_error_style(args, words):
    """A parser error and aisp's own usage error look the same: one line on stderr, exit 2."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert "╭" not in result.output and "Traceback" not in result.output


def test_parser_errors_from_the_console_script_are_one_line_too():
    done = subprocess.run([sys.executable, "-m", "aisp", "bench", "run", "--device", "tpu"], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                          timeout=120, check=False)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "--device" in lines[0], done.stderr


def test_cli_copies_of_core_defaults_match_the_core():
    """Defaults and choices the CLI writes out (so that --help imports no torch) equal the core's."""
    from dataclasses import fields

    from aisp.check import CheckOptions
    from aisp.cli.bench_compare import DEFAULT_THRESHOLD
    from aisp.cli.check import DEFAULTS, Precision
    from aisp.harness.verify import TOLERANCES
    from aisp.judge.compare_runs import run_to_run_threshold

    core = {f.name: f.default for f in fields(CheckOptions)}
    assert DEFAULTS == {name: core[name] for name in DEFAULTS}
    assert list(Precision.__args__) == list(TOLERANCES)
    assert f"{DEFAULT_THRESHOLD:.1%}" == f"{run_to_run_threshold([]):.1%}"


def test_an_option_without_a_type_descriptor_keeps_its_own_metavar():
    """The Typer on the GPU machines has no ``TyperOption.type_descriptor`` (every ``aisp`` command
    failed there on 2026-11-28): such an option keeps Typer's metavar, a flag still gets none."""
    from types import SimpleNamespace

    from aisp.cli.conventions import _metavar

    assert _metavar(SimpleNamespace(is_flag=False)) is None
    assert _metavar(SimpleNamespace(is_flag=True)) == ""

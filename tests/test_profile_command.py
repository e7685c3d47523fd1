"""``aisp profile run -- COMMAND``: any program under ncu or nsys (stub profilers on PATH record what
they were asked to run), a Python script under torch.profiler (for real, on the CPU), and the
one-line usage errors."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.profile.command import command_name, torch_wrapped
from aisp.profile.script import main as script_main

STUB = """#!{python}
import pathlib, sys
args = sys.argv[1:]
pathlib.Path({log!r}).open("a").write(" ".join(args) + "\\n")
if "--import" in args:
    print(pathlib.Path({csv!r}).read_text())
elif "-o" in args:
    pathlib.Path(args[args.index("-o") + 1] + {suffix!r}).write_text("report")
"""
CSV = Path(__file__).parent / "fixtures" / "ncu" / "w4a16_gemm_optimized.raw.csv"
SCRIPT = """import sys
import torch
x = torch.randn(64, 64)
for _ in range(3):
    x = torch.tanh(x @ x)
print("ran with", sys.argv[1:])
"""


def _stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str, suffix: str) -> Path:
    bin_dir, log = tmp_path / "bin", tmp_path / f"{tool}.calls"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / tool
    exe.write_text(STUB.format(python=sys.executable, log=str(log), csv=str(CSV), suffix=suffix))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_ncu_wraps_the_command_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _stub(tmp_path, monkeypatch, "ncu", ".ncu-rep")
    out = CliRunner().invoke(app, ["profile", "run", "--tool", "ncu", "--output-dir", str(tmp_path / "p"),
                                   "--", "python", "my_script.py", "--size", "4096"])
    assert out.exit_code == 0, out.output
    profile_call = log.read_text().splitlines()[0]
    assert profile_call.endswith(f"-o {tmp_path / 'p' / 'my_script'} python my_script.py --size 4096")
    assert "--section MemoryWorkloadAnalysis" in profile_call
    assert "--metrics dram__bytes.sum.per_second,lts__t_bytes.sum.per_second," in profile_call
    saved = json.loads((tmp_path / "p" / "profile_ncu.json").read_text())
    assert saved["target"] == "python my_script.py --size 4096"
    assert list(saved["variants"]["my_script"]["kernels"]) == ["_w4a16_gemm_kernel <<<(64, 8, 1), (128, 1, 1)>>>"]


def test_nsys_wraps_any_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _stub(tmp_path, monkeypatch, "nsys", ".nsys-rep")
    out = CliRunner().invoke(app, ["profile", "run", "--tool", "nsys", "--output-dir", str(tmp_path / "p"),
                                   "--", "./serve", "--port", "80"])
    assert out.exit_code == 0, out.output
    assert log.read_text().splitlines()[0].endswith(f"-o {tmp_path / 'p' / 'serve'} ./serve --port 80")
    assert "serve.nsys-rep" in out.output


def test_torch_profiles_a_python_script(tmp_path: Path) -> None:
    script = tmp_path / "my_script.py"
    script.write_text(SCRIPT)
    out = CliRunner().invoke(app, ["profile", "run", "--tool", "torch", "--output-dir", str(tmp_path / "p"),
                                   "--", sys.executable, str(script), "--flag"])
    assert out.exit_code == 0, out.output
    trace = json.loads((tmp_path / "p" / "my_script.trace.json").read_text())
    assert any(ev.get("name") == "aten::mm" for ev in trace["traceEvents"])
    assert "ran with ['--flag']" in (tmp_path / "p" / "my_script.torch.log").read_text()
    assert "top CPU ops" in out.output


def test_the_script_runner_keeps_the_trace_and_the_exit_code(tmp_path: Path) -> None:
    script = tmp_path / "fails.py"
    script.write_text("import torch\ntorch.ones(3).sum()\nraise SystemExit(3)\n")
    assert script_main(["--trace", str(tmp_path / "t.json"), "--", str(script)]) == 3
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]


def test_usage_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    both = runner.invoke(app, ["profile", "run", "-t", "ch01:batch_size", "--", "python", "x.py"])
    neither = runner.invoke(app, ["profile", "run"])
    not_python = runner.invoke(app, ["profile", "run", "--tool", "torch", "--output-dir", str(tmp_path / "p"),
                                     "--", "./serve"])
    for out in (both, neither, not_python):
        assert out.exit_code == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "python my_script.py" in not_python.stderr and not (tmp_path / "p").exists()


def test_command_names_and_the_torch_wrapper() -> None:
    assert command_name(["python3.12", "-u", "bench/my_script.py", "x"]) == "my_script"
    assert command_name(["python", "-m", "pkg.serve"]) == "pkg.serve"
    assert command_name(["/opt/bin/serve", "--port"]) == "serve"
    wrapped = torch_wrapped(["python", "a.py", "--n", "3"], Path("t.json"))
    assert wrapped == ["python", "-m", "aisp.profile.script", "--trace", "t.json", "--", "a.py", "--n", "3"]

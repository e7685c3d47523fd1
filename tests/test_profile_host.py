"""``aisp profile run --tool py-spy``: py-spy's folded stacks summarized, a command and a pair's run()
window sampled (with a stub py-spy that writes a fixed sample file), and py-spy missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from pair_variants import variant_names
from rich.console import Console
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.profile import host
from aisp.profile.host import MISSING, record_command, recording, summarize

FOLDED = """process 11:"python train.py";<module> (train.py:9);epoch (train.py:5);_next_data (dataloader.py:1327) 30
process 11:"python train.py";<module> (train.py:9);epoch (train.py:6);step (train.py:2) 10
process 11:"python train.py";process 12:"python train.py";_worker_loop (worker.py:300);decode (imgs.py:41) 50
process 11:"python train.py";process 12:"python train.py";_worker_loop (worker.py:300);decode (imgs.py:44) 10
not a stack line
"""

STUB = """#!{python}
import os, pathlib, signal, sys, time
args = sys.argv[1:]
out = pathlib.Path(args[args.index("-o") + 1])
folded = pathlib.Path({folded!r}).read_text()
if "--pid" in args:  # attached: sample until SIGINT, then write, as py-spy does
    signal.signal(signal.SIGINT, lambda *_: (out.write_text(folded), sys.exit(0)))
    with open({attached!r}, "a") as said:  # the tests' attach wait: its handler is set
        print(os.getpid(), file=said)
    while True:
        time.sleep(0.05)
out.write_text(folded)
"""


def test_folded_stacks_give_each_frame_and_process_its_share() -> None:
    found = summarize(FOLDED)
    assert found["samples"] == 100
    assert found["top_self"][0] == ["decode (imgs.py)", 0.6]  # two lines of one function merged
    assert dict(map(tuple, found["top_self"]))["_next_data (dataloader.py)"] == 0.3
    assert found["processes"] == [["process 12", 0.6], ["process 11", 0.4]]  # the worker's samples are its own
    assert summarize("") == {"samples": 0, "top_self": [], "processes": []}


def attach_until_ready(monkeypatch: pytest.MonkeyPatch, attached: Path) -> None:
    """recording()'s attach wait (ATTACH_S, time a real py-spy needs to attach) made a wait on the stub
    py-spy it started: until the stub has set its SIGINT handler (its pid in ``attached``) or has
    exited. The stub is a Python: a busy host can take longer than any fixed wait to start it, and
    a SIGINT before its handler killed it, with no samples written."""
    started: list[subprocess.Popen] = []

    class Tracked(subprocess.Popen):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

    def attach(_seconds: float) -> None:
        spy, deadline = started[-1], time.monotonic() + 60  # a bound for a broken test only
        while time.monotonic() < deadline and spy.poll() is None:
            if attached.exists() and str(spy.pid) in attached.read_text().split():
                return
            time.sleep(0.01)

    monkeypatch.setattr(host, "subprocess", SimpleNamespace(Popen=Tracked, STDOUT=subprocess.STDOUT,
                                                            TimeoutExpired=subprocess.TimeoutExpired))
    monkeypatch.setattr(host, "time", SimpleNamespace(sleep=attach))


@pytest.fixture
def stub_pyspy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "folded.txt").write_text(FOLDED)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    spy = bin_dir / "py-spy"
    spy.write_text(STUB.format(python=sys.executable, folded=str(tmp_path / "folded.txt"),
                               attached=str(tmp_path / "attached.txt")))
    spy.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    attach_until_ready(monkeypatch, tmp_path / "attached.txt")
    return spy


def test_a_command_is_sampled_from_start_to_end(stub_pyspy: Path, tmp_path: Path) -> None:
    found = record_command([sys.executable, "-c", "pass"], tmp_path / "cmd", 30)
    assert found["samples"] == 100 and Path(found["samples_file"]).exists()


def test_a_window_of_this_process_is_sampled_until_the_block_ends(stub_pyspy: Path, tmp_path: Path) -> None:
    with recording(tmp_path / "window") as found:
        assert found == {}  # filled once the block has ended
    assert found["samples"] == 100 and found["top_self"][0][0] == "decode (imgs.py)"


def test_without_pyspy_the_variant_is_skipped_with_the_install_line(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert record_command(["true"], tmp_path / "cmd", 5) == {"skipped": MISSING}
    with recording(tmp_path / "w") as found:
        pass
    assert found == {"skipped": MISSING}


def test_cli_profile_run_pyspy_on_a_pair(stub_pyspy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("aisp.cli.profile.console", Console(width=200))
    out = CliRunner().invoke(app, ["profile", "run", "-t", "ch01:batch_size", "--tool", "py-spy", "--iterations", "1",
                                   "--warmup", "0", "--output-dir", str(tmp_path / "p")])
    assert out.exit_code == 0, out.output
    assert "baseline: 100 samples (py-spy)" in out.output and "decode (imgs.py)" in out.output
    saved = json.loads((tmp_path / "p" / "profile_py-spy.json").read_text())
    assert set(saved["variants"]) == variant_names("ch01:batch_size") and saved["tool"] == "py-spy"


def test_a_pyspy_that_cannot_attach_is_an_error_with_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """py-spy without ptrace rights (a container without SYS_PTRACE) exits at once: the variant's
    entry says so with py-spy's own words, and the profiled calls still ran."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "py-spy").write_text(f"#!{sys.executable}\nimport sys\nprint('Permission denied (os error 13)')\nsys.exit(1)\n")
    (bin_dir / "py-spy").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    attach_until_ready(monkeypatch, tmp_path / "attached.txt")  # this py-spy never attaches: until it exits
    ran = []
    with recording(tmp_path / "w") as found:
        ran.append(True)
    assert ran and found["error"] == "py-spy exited with 1" and "Permission denied" in found["log_tail"]

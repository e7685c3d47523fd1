"""Every option of every chapter script (and of the chapter and standalone runners) has a help text,
so ``python chNN/tool.py --help`` describes each one."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

RUNNERS = ("aisp/chapter.py", "aisp/standalone.py", "aisp/peak/allreduce.py")


def undescribed(path: Path) -> list[str]:
    """``add_argument`` calls in ``path`` without ``help=`` (nor ``**kwargs`` that may carry one)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            if not {k.arg for k in node.keywords} & {"help", None}:
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_check_finds_an_option_without_help(tmp_path):
    script = tmp_path / "tool.py"
    script.write_text("import argparse\np = argparse.ArgumentParser()\np.add_argument('--n', type=int)\n"
                      "p.add_argument('--m', help='described')\n")
    assert undescribed(script) == ["tool.py:3: p.add_argument('--n', type=int)"]


def test_every_chapter_script_option_has_help():
    scripts = [p for p in sorted(REPO.glob("ch*/**/*.py")) if "argparse" in p.read_text(errors="replace")]
    assert scripts, "no chapter script found"
    missing = [line for path in [*scripts, *(REPO / r for r in RUNNERS)] for line in undescribed(path)]
    assert missing == []


def test_a_chapter_tool_help_lists_descriptions():
    done = subprocess.run([sys.executable, "ch16/serve_bench.py", "--help"], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120, check=True)
    assert "requests decoded together" in done.stdout and "time-per-output-token objective" in done.stdout

"""kill_tree (aisp/harness/proctree.py): a tool's whole tree is killed, including what it starts while
being killed and, with a marker, an orphan in a session of its own. Waits are on conditions, with
generous deadlines; nothing is timed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from aisp.harness.proctree import kill_tree

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process sessions and signals: Linux")


def _marked(marker: str) -> list[psutil.Process]:
    """Living (not zombie) processes whose command line holds ``marker``."""
    found = []
    for each in psutil.process_iter(["cmdline", "status"]):
        if marker in " ".join(each.info["cmdline"] or []) and each.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(each)
    return found


def _wait_for(condition, what: str, deadline_s: float = 60.0) -> None:
    give_up = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < give_up, what
        time.sleep(0.05)


def _cleanup(marker: str) -> None:
    for each in _marked(marker):
        each.kill()


SLEEPER = "import time; time.sleep(600)"
"""A child's program; the marker follows it in its argv (from the environment: no parent's command line holds it)."""


def _env(marker: str) -> dict[str, str]:
    return {**os.environ, "AISP_TEST_MARK": marker}


def test_children_started_while_the_tree_is_killed_are_killed_too() -> None:
    """A tool that starts a child in a session of its own every few milliseconds, without end: once it
    is killed, no child of it is left (one started between a listing and the kill would be)."""
    marker = f"aisp-proctree-{uuid.uuid4().hex}"
    spawner = ("import os, subprocess, sys\n"
               f"while True: subprocess.Popen([sys.executable, '-c', {SLEEPER!r}, os.environ['AISP_TEST_MARK']], "
               "start_new_session=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", spawner], start_new_session=True, env=_env(marker))
    try:
        _wait_for(lambda: len(_marked(marker)) >= 3, "the tool started its children")
        killed = kill_tree(proc)
        assert proc.poll() is not None and len(killed) >= 3
        time.sleep(0.5)  # anything that escaped would still be running now (no timing is asserted)
        assert _marked(marker) == []
    finally:
        proc.kill()
        _cleanup(marker)


def test_an_orphan_in_its_own_session_is_found_by_its_marker() -> None:
    """A child whose parent exited is no descendant of the tool any more: only the marker finds it."""
    marker = f"aisp-proctree-{uuid.uuid4().hex}"
    middle = (f"import os, subprocess, sys; subprocess.Popen([sys.executable, '-c', {SLEEPER!r}, "
              "os.environ['AISP_TEST_MARK']], start_new_session=True)")
    tool = (f"import subprocess, sys, time; subprocess.run([sys.executable, '-c', {middle!r}]); "
            "print('ready', flush=True); time.sleep(600)")

    def start() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", tool], stdout=subprocess.PIPE, text=True,
                                start_new_session=True, env=_env(marker))
        assert proc.stdout.readline().strip() == "ready"
        return proc

    try:
        proc = start()
        _wait_for(lambda: len(_marked(marker)) == 1, "the orphan runs")
        assert kill_tree(proc) == []  # without the marker it is not in the tree...
        assert len(_marked(marker)) == 1
        proc = start()
        _wait_for(lambda: len(_marked(marker)) == 2, "the second orphan runs")
        assert len(kill_tree(proc, marker)) == 2  # ...with it, both orphans go
        _wait_for(lambda: _marked(marker) == [], "the orphans are gone", 10)
    finally:
        _cleanup(marker)

"""``aisp``: the top-level Typer app; each group is registered here from its own module.

:func:`main` is the console script: Ctrl-C and SIGTERM end a run cleanly (exit 128 + the signal's
number, one line on stderr), and however the command ends, no process it started outlives it.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from typing import Annotated

import psutil
import typer

import aisp
from aisp.cli.conventions import ConventionalGroup

LEFTOVER_GRACE_S = 5.0
"""Seconds a leftover process has to exit after SIGTERM before SIGKILL (the runner's grace too)."""


def _version(value: bool) -> None:
    if value:
        typer.echo(f"aisp {aisp.__version__}")
        raise typer.Exit(0)


app = typer.Typer(
    cls=ConventionalGroup,
    rich_markup_mode=None,
    name="aisp",
    help="AI systems performance: verified benchmark pairs, expectations, peaks, profiling, host audit.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                              help="Print aisp's version and exit.")] = False) -> None:
    """The root: options that apply before any command (--version)."""


from aisp.cli.peak import peak  # noqa: E402

app.command(name="peak")(peak)

from aisp.cli.bench import app as bench_app  # noqa: E402

app.add_typer(bench_app, name="bench")

from aisp.cli.profile import app as profile_app  # noqa: E402

app.add_typer(profile_app, name="profile")

from aisp.cli.report import app as report_app  # noqa: E402

app.add_typer(report_app, name="report")

from aisp.cli.cleanup import cleanup  # noqa: E402

app.command(name="cleanup")(cleanup)
from aisp.cli.system import app as system_app  # noqa: E402

app.add_typer(system_app, name="system")
from aisp.cli.check import EXIT_HELP as CHECK_EXIT_HELP  # noqa: E402
from aisp.cli.check import check  # noqa: E402

app.command(name="check", epilog=CHECK_EXIT_HELP)(check)
from aisp.cli.mcp import mcp  # noqa: E402

app.command(name="mcp")(mcp)
import aisp.cli.bench_compare  # noqa: E402,F401
import aisp.cli.report_pob  # noqa: E402,F401


class Interrupted(BaseException):
    """SIGINT or SIGTERM, raised where the run is, so its ``finally`` blocks stop the workers; a
    BaseException that no ``except Exception`` (nor click's Ctrl-C handler) swallows."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum: int, frame: object) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # a second signal must not cut the cleanup short
    raise Interrupted(signum)


def end_leftovers() -> None:
    """SIGTERM, then SIGKILL after a grace period, every descendant still alive (adopted orphans too)."""
    procs = psutil.Process().children(recursive=True)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    for proc in psutil.wait_procs(procs, timeout=LEFTOVER_GRACE_S)[1]:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=LEFTOVER_GRACE_S)


def main() -> None:
    """Run the app; on SIGINT or SIGTERM exit 128 + signal with one line, no process left behind."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupt)
    try:
        app()
    except Interrupted as exc:
        end_leftovers()
        typer.echo(f"aisp: interrupted by {signal.Signals(exc.signum).name}; every process it started is stopped",
                   err=True)
        sys.exit(128 + exc.signum)
    finally:
        end_leftovers()

"""``aisp``: the top-level Typer app; each group is registered here from its own module."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="aisp",
    help="AI systems performance: verified benchmark pairs, expectations, peaks, profiling, host audit.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

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
import aisp.cli.bench_compare  # noqa: E402,F401
import aisp.cli.report_pob  # noqa: E402,F401

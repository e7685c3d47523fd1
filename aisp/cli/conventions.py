"""Help and error conventions shared by every ``aisp`` command.

- Metavars as Click and most CLIs write them: ``INTEGER``, ``FLOAT``, ``PATH``, ``TEXT``, a choice as
  ``[a|b|c]``, nothing after an on/off flag -- not Typer's ``<int>``, ``<bool>``, ``<list[str]>``.
  An argument is its name in capitals, without a type after it. An option that sets its own metavar (``TARGET``, ``I/N``) keeps it.
- One error style: a usage error (unknown option, bad choice, missing argument) is one line on
  stderr, ``error: ...``, exit 2, as aisp's own usage errors (:func:`aisp.cli.bench.fail_usage`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, get_args

import typer
from typer.core import TyperArgument, TyperGroup, TyperOption

try:  # Typer >= 0.2x carries its own copy of Click; older Typer uses Click itself
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - depends on the installed Typer
    from click import exceptions as click_errors

NO_ARGS_IS_HELP = getattr(click_errors, "NoArgsIsHelpError", ())
"""Raised for a group called without a command (Click >= 8.2): its help, not an error line."""
TYPE_METAVARS = {int: "INTEGER", float: "FLOAT", str: "TEXT", Path: "PATH"}


def _metavar(option: TyperOption) -> str | None:
    """The conventional metavar of a Typer option, or None to keep Typer's own."""
    if option.is_flag:
        return ""
    desc = getattr(option, "type_descriptor", None)
    if desc is None:  # a Typer release without it (the GPU machines): keep its own metavar
        return None
    if desc.is_choice and desc.choices:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices) + "]"
    annotation = desc.annotation
    if desc.is_list:
        annotation = next(iter(get_args(annotation)), str)
    return TYPE_METAVARS.get(annotation)


def _no_type(ctx: Any) -> None:
    return None


def conventional_metavars(command: Any) -> None:
    """Set the conventional metavar on every option of ``command`` and its subcommands (in place)."""
    for param in command.params:
        if isinstance(param, TyperArgument) and param.metavar is None:
            param.metavar = param.name.upper()
            param.display_type_rich = _no_type  # the name says what goes there; no "<str>" after it
        elif isinstance(param, TyperOption) and param.metavar is None:
            metavar = _metavar(param)
            if metavar is not None:
                param.metavar = metavar
    for sub in getattr(command, "commands", {}).values():
        conventional_metavars(sub)


def one_line(exc: Exception) -> str:
    """A Click error as aisp's one line: ``error: <message> (see 'aisp bench run --help')``."""
    ctx = getattr(exc, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if isinstance(exc, click_errors.UsageError) and ctx else ""
    message = " ".join(exc.format_message().split()).replace("Value error, ", "")  # Typer's validator prefix
    return f"error: {message}{where}"


class ConventionalGroup(TyperGroup):
    """The root group: conventional metavars in every help page, and Click's errors as one line."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        conventional_metavars(self)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else 0
        except NO_ARGS_IS_HELP as exc:
            typer.echo(exc.ctx.get_help() if exc.ctx else exc.format_message())
            code = exc.exit_code
        except click_errors.ClickException as exc:
            typer.secho(one_line(exc), err=True, fg="red")
            code = exc.exit_code
        except typer.Abort:
            typer.echo("Aborted.", err=True)
            code = 1
        if standalone_mode:
            sys.exit(code)
        return code

"""The ``aisp`` command line (Typer). Each command group lives in its own module."""

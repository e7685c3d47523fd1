"""``python -m aisp``."""

from aisp.cli.main import app

app()

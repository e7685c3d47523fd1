"""``python -m aisp``."""

from aisp.cli.main import main

main()

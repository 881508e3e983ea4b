"""``python -m fedprox_cli`` is ``fedrun``."""

from .cli.main import main

main()

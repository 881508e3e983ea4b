"""``python -m fedprox_cli`` is ``fedrun``."""

from .cli import main

main()

"""``python -m fedprox_cli`` is ``fedrun`` (through the gate every command starts with:
:mod:`cli.commands`)."""

from .cli.commands import fedrun

fedrun()

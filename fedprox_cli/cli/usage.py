"""A command's ``--help`` from its module docstring, as a terminal shows it: the one place the
commands' parsers take their description and epilog, without reStructuredText markup."""

from __future__ import annotations

import argparse
import re

_ROLE = re.compile(r":(?:mod|func|class|meth|data|attr|obj):`~?\.*([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")
_CODE = re.compile(r"`([^`]+)`")


def plain(text: str) -> str:
    """A docstring's text as a terminal shows it: reStructuredText's roles (``:mod:`x```), double
    backquotes and backquotes taken off, their text kept."""
    return _CODE.sub(r"\1", _LITERAL.sub(r"\1", _ROLE.sub(r"\1", text)))


def parser(prog: str, doc: str | None, epilog: bool = True) -> argparse.ArgumentParser:
    """A command's parser from its module docstring ``doc`` (:func:`plain`): the first
    paragraph's text after ``prog: `` is the description, the rest (``epilog``) the epilog,
    printed as written. Without docstrings (``python -OO``, ``PYTHONOPTIMIZE=2``) the parser
    has no description; the options' help is the same."""
    head, _, rest = (doc or "").partition("\n\n")
    return argparse.ArgumentParser(
        prog=prog,
        description=plain(head.split(": ", 1)[-1]) or None,
        epilog=plain(rest) if epilog and rest else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )

"""OmegaConf resolvers used by the configs (registered before Hydra composes anything).

``${calc:EXPR}`` evaluates an arithmetic expression of numbers with + - * / ** and
parentheses, e.g. FedNMap's local step rules ``eta_a: ${calc:1/${K}}`` and
``${calc:${K}**-0.5}``. Nothing else (names, calls, attributes) is accepted, and ``**`` is
bounded (:data:`MAX_BASE`, :data:`MAX_EXPONENT`) so that no expression takes long to compute; a
division by zero or an overflow is a ``ValueError`` (the run refuses the config in one line).
``${fedrun.pid:}`` is the launching process's id (in run and sweep folder names);
``${fedrun.under:NAME}`` is ``NAME/`` (or nothing for null): a preset's sweeps go into a
folder of the preset's name; ``${fedrun.job_dir:}`` is a sweep job's folder name, from its
config (:func:`jobdir.job_dir`).
"""

from __future__ import annotations

import ast
import operator
import os
from collections.abc import Callable
from typing import cast

from omegaconf import OmegaConf

MAX_BASE = 2**64  # |a| of a ** b
MAX_EXPONENT = 1024  # |b| of a ** b


def _pow(a: float, b: float) -> float:
    if abs(a) > MAX_BASE or abs(b) > MAX_EXPONENT:
        raise ValueError(
            f"calc: {a!r} ** {b!r} is outside |base| <= 2**64, |exponent| <= {MAX_EXPONENT}"
        )
    return cast(float, operator.pow(a, b))


def _apply(op: Callable[..., float], *args: float) -> float:
    try:
        return op(*args)
    except ZeroDivisionError:
        raise ValueError("calc: division by zero") from None
    except ArithmeticError:  # 10.0 ** 400
        raise ValueError("calc: the result is too large") from None


_OPS: dict[type[ast.AST], Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: _pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _eval(node: ast.AST) -> float:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _apply(_OPS[type(node.op)], _eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _apply(_OPS[type(node.op)], _eval(node.operand))
    raise ValueError(
        f"calc: only numbers and + - * / ** ( ) are allowed, got {ast.unparse(node)!r}"
    )


def calc(expr: str | int | float) -> float:
    """The value of an arithmetic expression such as ``'0.05*20'`` or ``'20**-0.5'``."""
    if isinstance(expr, (int, float)):
        return expr
    try:
        tree = ast.parse(str(expr), mode="eval")
    except SyntaxError as e:
        raise ValueError(f"calc: cannot parse {expr!r}") from e
    value = _eval(tree.body)
    if isinstance(value, complex):  # (-8) ** 0.5
        raise ValueError(f"calc: {expr!r} is not a real number")
    if isinstance(value, int) and abs(value) >= 2**63:  # beyond int64: a float, if one holds it
        value = _apply(float, value)
    return value


def register() -> None:
    if not OmegaConf.has_resolver("calc"):
        OmegaConf.register_new_resolver("calc", calc)
    # Run folders of two fedrun processes started in the same microsecond differ by process id.
    # Cached, so that joblib workers see the sweep folder the launching process chose.
    if not OmegaConf.has_resolver("fedrun.pid"):
        OmegaConf.register_new_resolver("fedrun.pid", os.getpid, use_cache=True)
    if not OmegaConf.has_resolver("fedrun.under"):
        OmegaConf.register_new_resolver("fedrun.under", lambda name: f"{name}/" if name else "")
    if not OmegaConf.has_resolver("fedrun.job_dir"):
        from .jobdir import job_dir

        OmegaConf.register_new_resolver("fedrun.job_dir", job_dir)

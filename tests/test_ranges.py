"""Declared parameter ranges (fedprox_cli.common.ranges): one declaration gives validation's
line, the defaults by kind and type, and ``fedrun GROUP=OPTION --help``."""

from dataclasses import dataclass
from typing import ClassVar

import pytest

from fedprox_cli import algorithms
from fedprox_cli.algorithms import Algorithm
from fedprox_cli.cli.help import option_page
from fedprox_cli.common import ranges
from fedprox_cli.common.errors import UserError
from fedprox_cli.common.ranges import Range, param
from fedprox_cli.operators import compressors, regularizers


@pytest.mark.parametrize(
    "r,text,good,bad",
    [
        (Range(gt=0), "> 0", [1e-30, 3], [0, -1, float("nan"), float("inf"), True, "1"]),
        (Range(ge=0), ">= 0", [0, 0.0, 2.5], [-1e-30, None]),
        (Range(gt=0, le=1), "in (0, 1]", [1, 0.5], [0, 1.0000001]),
        (Range(gt=0, lt=2, none=True), "in (0, 2) or null", [None, 1.95], [2, 0]),
        (Range(ge=1, integer=True), "an integer >= 1", [1, 7], [0, 1.0, True]),
        (Range(), "a finite number", [-5, 0.1], [float("nan"), None]),
        (Range(boolean=True), "true or false", [True, False], [0, 1, "yes"]),
    ],
)
def test_a_range_says_what_it_takes(r, text, good, bad):
    assert str(r) == text
    assert all(r.ok(v) for v in good) and not any(r.ok(v) for v in bad)


@dataclass(kw_only=True)
class Declared(Algorithm):
    name: ClassVar[str] = "declared"
    beta: float = 0.1  # a step size: > 0 by default
    mu: float = param(0.0, ge=0)  # declared: >= 0
    steps: int = 3  # a count: an integer >= 1 by default
    p: float | None = None  # optional: > 0 or null
    warm: bool = False


def test_declarations_and_defaults_by_kind_and_type():
    got = {k: str(v) for k, v in ranges.declared(Declared, "algorithm").items()}
    assert got == {
        "beta": "> 0",
        "mu": ">= 0",
        "steps": "an integer >= 1",
        "p": "> 0 or null",
        "warm": "true or false",
    }
    assert (
        str(ranges.declared(regularizers.lookup("l1"), "regularizer")["lam"]) == ">= 0"
    )  # a coefficient


@pytest.mark.parametrize(
    "build,params,line",
    [
        (
            algorithms.build,
            ("fedavg", dict(alpha=0)),
            "algorithm.alpha must be > 0, got 0 (as declared by algorithm fedavg)",
        ),
        (
            algorithms.build,
            ("feddr", dict(alpha_dr=2.0)),
            "algorithm.alpha_dr must be in (0, 2), got 2.0 (as declared by algorithm feddr)",
        ),
        (
            algorithms.build,
            ("scaffnew", dict(p=0)),
            "algorithm.p must be in (0, 1] or null, got 0 (as declared by algorithm scaffnew)",
        ),
        (
            regularizers.build,
            ("scad", dict(a=2)),
            "regularizer.a must be > 2, got 2 (as declared by regularizer scad)",
        ),
        (
            compressors.build,
            ("qsgd", dict(levels=2.5)),
            "compressor.levels must be an integer >= 1, got 2.5 (as declared by compressor qsgd)",
        ),
    ],
)
def test_a_value_outside_its_declared_range_is_one_line(build, params, line):
    with pytest.raises(UserError) as e:
        build(params[0], **params[1])
    assert str(e.value) == line


def test_help_of_an_option_shows_its_declared_ranges_and_declarations():
    page = option_page("algorithm", "feddr").splitlines()
    assert page[0] == "algorithm feddr (fedprox_cli.algorithms.feddr.FedDR)"
    assert ["algorithm.alpha_dr", "in", "(0,", "2)", "default", "1.95"] in [
        line.split()[:6] for line in page
    ]
    assert ["partial_participation", "yes"] == [
        line.split()[:2] for line in page if line.strip().startswith("partial_participation")
    ][0]
    assert ["compressor.ratio", "in", "(0,", "1]", "default", "0.1"] in [
        line.split()[:6] for line in option_page("compressor", "topk").splitlines()
    ]

"""setuptools: the repository's top-level conf/ (Hydra configs) ships inside the package as
fedprox_cli/conf, so a wheel runs without the checkout; with the figure style sheets
(fedprox_cli/analysis/styles). Everything else is in pyproject.toml."""

from pathlib import Path

from setuptools import find_namespace_packages, setup

CONF = [
    "fedprox_cli.conf",
    *sorted(
        "fedprox_cli.conf." + ".".join(d.relative_to("conf").parts)
        for d in Path("conf").rglob("*")
        if d.is_dir()
    ),
]

setup(
    packages=[
        *find_namespace_packages(
            include=["fedprox_cli*", "hydra_plugins*"], exclude=["*__pycache__*"]
        ),
        *CONF,
    ],
    package_dir={"fedprox_cli.conf": "conf"},
    package_data={
        "fedprox_cli": ["analysis/styles/*.mplstyle", "claims/*.yaml", "engine/*.json"],
        **{p: ["*.yaml"] for p in CONF},
    },
)

"""setuptools: the repository's top-level conf/ (Hydra configs) and scripts/ (fedrun-plot,
fedrun-table) ship inside the package as fedprox_cli/conf and fedprox_cli/scripts, so a wheel
runs without the checkout; everything else is in pyproject.toml."""

from pathlib import Path

from setuptools import find_namespace_packages, setup

CONF = ["fedprox_cli.conf", *sorted("fedprox_cli.conf." + ".".join(d.relative_to("conf").parts)
                                    for d in Path("conf").rglob("*") if d.is_dir())]

setup(packages=[*find_namespace_packages(include=["fedprox_cli*", "hydra_plugins*"],
                                         exclude=["*__pycache__*"]), *CONF, "fedprox_cli.scripts"],
      package_dir={"fedprox_cli.conf": "conf", "fedprox_cli.scripts": "scripts"},
      package_data={p: ["*.yaml"] for p in CONF})

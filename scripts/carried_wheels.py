"""What scripts/gpu_prep.sh carries to the device machine: fedprox_cli's dependency closure as
pip's resolver found it (``pip install --dry-run --report REPORT``, for the device's Python and
platform) minus the packages the device image already has, and minus what only those need.

Walks the requirements from fedprox_cli (with its requested extras) through the report's
metadata; a requirement the image satisfies by name is not followed. Prints ``name==version``
per package to carry.

    python scripts/carried_wheels.py REPORT IMAGE_LIST PYTHON_VERSION
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def image_packages(path: Path) -> set[str]:
    """Package names, one a line (``#`` starts a comment)."""
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return {canonicalize_name(line) for line in lines if line}


def carried(report: dict, image: set[str], python: str) -> list[str]:
    items = {canonicalize_name(i["metadata"]["name"]): i for i in report["install"]}
    env = {**default_environment(), "python_version": python, "python_full_version": f"{python}.0"}
    root = canonicalize_name("fedprox_cli")
    todo, seen = [(root, set(items[root].get("requested_extras") or ()))], {root}
    while todo:
        name, extras = todo.pop()
        for spec in items[name]["metadata"].get("requires_dist", []):
            req = Requirement(spec)
            dep = canonicalize_name(req.name)
            wanted = req.marker is None or any(
                req.marker.evaluate({**env, "extra": e}) for e in ("", *extras)
            )
            if wanted and dep not in image and dep not in seen:
                seen.add(dep)
                todo.append((dep, set(req.extras)))
    return sorted(
        f"{items[n]['metadata']['name']}=={items[n]['metadata']['version']}" for n in seen - {root}
    )


if __name__ == "__main__":
    report, image, python = sys.argv[1:4]
    print(
        "\n".join(
            carried(json.loads(Path(report).read_text()), image_packages(Path(image)), python)
        )
    )

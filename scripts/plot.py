#!/usr/bin/env python
"""``fedrun-plot`` (fedprox_cli/cli/plot.py) for a checkout without the installed command."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fedprox_cli.cli.plot import main  # noqa: E402
from fedprox_cli.common import streams  # noqa: E402

if __name__ == "__main__":
    streams.guard()
    sys.exit(main())

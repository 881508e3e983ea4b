"""Draw a run's partition (clients x classes sample counts) as a heatmap.

python scripts/plot_partition.py RUN [--out FILE]     # default FILE: RUN/partition.png
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fedprox_cli.analysis.run_plots import plot_partition  # noqa: E402
from fedprox_cli.common.errors import UserError  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="a run folder (with config.yaml and partition.npz)")
    p.add_argument("--out", help="PNG to write (default RUN/partition.png)")
    a = p.parse_args()
    if not (Path(a.run) / "partition.npz").is_file():
        print(
            f"plot_partition: error: {a.run} has no partition.npz (not a run folder?)",
            file=sys.stderr,
        )
        return 2
    try:
        print(plot_partition(a.run, a.out))
    except UserError as e:
        print(f"plot_partition: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

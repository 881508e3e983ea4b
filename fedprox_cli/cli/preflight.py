"""What ``fedrun`` settles before Hydra starts (:func:`preflight`): ``--help`` (:mod:`help`;
Hydra's page stays at ``--hydra-help``), dry runs and ``-m ... --cfg job`` (:mod:`dryrun`: Hydra's
multirun would create the sweep folder first), so that nothing is written for them; and the
edge cases of a command line Hydra would take wrongly: a deleted working folder
(:func:`deleted_cwd`), an empty run or sweep folder (:data:`EMPTY_DIR`), a folder with
characters its grammar rejects unquoted (:func:`quote_paths`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
from typing import Any, cast

from ..common import streams
from ..common.errors import EXIT, UserError, squeeze
from ..config import plugin_defaults

NO_RUN = {"--cfg", "-c", "--info", "-i", "--shell-completion", "-sc"}  # Hydra's, nothing drawn
EMPTY_DIR = re.compile(r"^\+{0,2}hydra\.(run|sweep)\.dir=(''|\"\"|\s*)$")
PATH_KEY = re.compile(
    r"^(\+{0,2}(?:hydra\.(?:run|sweep)\.dir|hydra\.sweep\.subdir|data\.root))=(.+)$"
)


def quote_paths(args: list[str]) -> list[str]:
    """Folder overrides with characters Hydra's override grammar rejects unquoted (non-ASCII:
    ``hydra.run.dir=results/résultats``) in Hydra's quotes, so such paths work as typed."""
    out = []
    for a in args:
        m = PATH_KEY.match(a)
        if m and m.group(2)[0] not in "'\"" and not m.group(2).isascii():
            a = f"{m.group(1)}='" + m.group(2).replace("\\", "\\\\").replace("'", "\\'") + "'"
        out.append(a)
    return out


def parsed(argv: list[str]) -> argparse.Namespace | None:
    """The command line as Hydra's argument parser reads it, or None where it does not parse
    (silent here: Hydra's own parsing then says what is wrong)."""
    from ..config.hydra_private import get_args_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return get_args_parser().parse_intermixed_args(argv)
    except (ValueError, TypeError, SystemExit):
        return None


def _composed_group(group: str, chosen: list[list[str]]) -> dict[str, Any]:
    """The config group ``group`` as a run of the ``chosen`` options composes it (their YAMLs
    over the classes' defaults): the values ``--help`` shows as defaults."""
    from omegaconf import OmegaConf

    from ..config.compose import compose

    composed = compose([f"{g}={n}" for g, n in chosen])
    values = OmegaConf.to_container(composed[group], resolve=True)
    return cast(dict[str, Any], values) if isinstance(values, dict) else {}  # keys: strings


def preflight(argv: list[str]) -> int | None:
    """What fedrun does before Hydra starts: ``--help`` (:mod:`help`; Hydra's page stays at
    ``--hydra-help``), a dry run and ``-m ... --cfg job`` (:mod:`dryrun`: Hydra's multirun would
    create the sweep folder first); ``--cfg job`` of one run gets ``--resolve``. Returns an
    exit code, or None to go on with Hydra. An installed plugin named without a YAML gets its
    defaults as its config first (:mod:`config.plugin_defaults`)."""
    if "--help" in argv or "-h" in argv:
        from hydra.errors import HydraException
        from omegaconf.errors import OmegaConfBaseException

        from .faults import one_line
        from .help import option_page, text

        chosen = [
            a.split("=", 1)
            for a in argv
            if re.match(r"^(algorithm|regularizer|compressor)=[\w.]+(/[\w.]+)*$", a)
        ]
        try:
            streams.out(
                (
                    "\n\n".join(option_page(g, n, _composed_group(g, chosen)) for g, n in chosen)
                    if chosen
                    else text()
                ).rstrip("\n")
            )
        except (UserError, HydraException, OmegaConfBaseException) as e:  # an unknown option
            streams.err(f"fedrun: error: {one_line(e)}")
            return EXIT["error"]
        return EXIT["finished"]
    args = parsed(argv)
    if args is None:
        return None
    try:
        plugin_defaults.store(args.overrides, args.config_dir)
    except UserError as e:
        streams.err(f"fedrun: error: {e}")
        return EXIT["error"]
    if (
        args.config_name
        or args.config_path
        or args.config_dir
        or args.info
        or args.shell_completion
    ):
        return None
    from .dryrun import dry_run, requested

    if args.cfg == "job" and args.multirun:
        return dry_run(args.overrides, multirun=True, show_cfg=True)
    if args.cfg == "job" and not args.resolve:
        sys.argv.append("--resolve")
    if args.cfg is None and requested(args.overrides):
        return dry_run(args.overrides, multirun=args.multirun)
    return None


def deleted_cwd(args: list[str]) -> str | None:
    """When the working folder was deleted (``os.getcwd`` fails; torch's libraries then fail to
    load): with an absolute run or sweep folder given, the process moves to ``/`` and goes on
    (None); otherwise the line naming the deleted folder."""
    try:
        os.getcwd()
        return None
    except FileNotFoundError:
        pass
    try:
        where = os.readlink("/proc/self/cwd").removesuffix(" (deleted)")
    except OSError:
        where = os.environ.get("PWD", "(unknown)")
    folders = [
        a.split("=", 1)[1] for a in args if PATH_KEY.match(a) and "hydra." in a.split("=", 1)[0]
    ]
    if folders and all(os.path.isabs(f.strip("'\"")) for f in folders):
        os.chdir("/")
        return None
    return (
        f"the working folder {squeeze(where, 200)} was deleted; cd to an existing folder, or give "
        f"an "
        f"absolute hydra.run.dir (hydra.sweep.dir with -m)"
    )

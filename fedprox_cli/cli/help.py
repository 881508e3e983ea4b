"""``fedrun --help``: built at help time from the config files themselves, so it cannot drift
from them -- the top-level keys with their defaults and meanings from the comments of
``conf/config.yaml``, each group option's first comment line, each preset's first comment line
and its ``# time:`` line, and the exit codes of :data:`errors.EXIT`. Hydra's own page stays
at ``fedrun --hydra-help``."""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..common.errors import EXIT
from ..common.package import CONF_DIR
from ..config.plugin_defaults import GROUPS as PLUGIN_GROUPS  # config group -> entry-point plural

ABOUT = """\
fedrun trains a model over n simulated clients with a composite federated learning method
(FedCanon, FedCEF, FedNMap and their baselines) on f + h (a loss plus a regularizer), evaluates
it every eval_every rounds and writes one run folder: metrics.csv, config.yaml, summary.json,
metrics.png, fedrun.log. A sweep (-m) runs every combination of the values given, one folder
per job. Configuration is Hydra's: KEY=VALUE for a key, GROUP=OPTION for a config group."""

USAGE = """\
  fedrun [GROUP=OPTION | KEY=VALUE]...       one run into results/runs/<time>_<pid>_<alg>_<data>/
  fedrun -m KEY=V1,V2 GROUP=A,B ...          a sweep of every combination into results/sweeps/<time>_<pid>/<job>/
  fedrun -m experiment=PRESET                a paper's figure or table (presets below)
  ... dry_run=true                           list the jobs, their folders and the work, validate, write nothing
  ... --cfg job                              print the resolved config (with -m: every job's)
  fedrun GROUP=OPTION --help                 an algorithm's, regularizer's or compressor's parameters
                                             with their declared ranges and defaults
  fedrun --hydra-help                        Hydra's own options"""

EXIT_MEANING = {
    "finished": "finished (or had already finished)",
    "diverged": "diverged (NaN or infinite objective; the rows so far are kept)",
    "error": "bad input, or a fault of data or files (one line on stderr)",
    "internal": "internal error, a bug (the traceback goes to the run folder's error.log)",
    "interrupted": "interrupted (Ctrl-C, SIGTERM, SIGHUP, ...; re-run the same command to resume)",
}

EXAMPLES = """\
  fedrun dataset=digits model=linear T=50                    # a first run (offline data, seconds)
  fedrun -m algorithm=fedcanon,fedmid K=10,20 seed=0,1,2     # a 12-job sweep
  fedrun -m experiment=fedcanon_fig2_quick dry_run=true      # what a preset would run, without running it
  fedrun-plot results/sweeps/fedcanon_fig2_quick --y test_acc --panels partition   # its figure
  fedrun-table results/sweeps/fedcanon_fig2_quick --out table.tex                    # its table (LaTeX)"""

_KEY = re.compile(
    r"^(?P<indent>\s*)(?P<key>[A-Za-z_]\w*):\s*(?P<value>[^#]*?)\s*(?:#\s?(?P<doc>.*))?$"
)
_MAX_COLUMN = 26  # a wider first column puts its description on the next line
_SENTENCE_END = re.compile(r"\.\s+(?=[A-Z])")
_COMMENT = re.compile(r"^\s+#\s?(?P<doc>.*)$")


def config_keys(path: Path = CONF_DIR / "config.yaml") -> list[tuple[str, str, str]]:
    """``(dotted key, default, meaning)`` of every key of ``config.yaml`` but the defaults list
    and ``hydra``, the meaning from its end-of-line comment and the indented comment lines
    under it."""
    keys: list[list[str]] = []
    parents: list[tuple[int, str]] = []
    skip = None  # indentation of a section left out (defaults, hydra)
    for line in path.read_text().splitlines():
        m = _KEY.match(line)
        if m is None:
            c = _COMMENT.match(line)
            if c and keys and skip is None and keys[-1][2]:
                keys[-1][2] += " " + c["doc"].strip()
            continue
        indent = len(m["indent"])
        if skip is not None and indent > skip:
            continue
        skip = None
        if m["key"] in ("defaults", "hydra") and indent == 0:
            skip = 0
            continue
        parents = [(i, k) for i, k in parents if i < indent]
        dotted = ".".join([k for _, k in parents] + [m["key"]])
        if m["value"] == "" and not m["doc"]:
            parents.append((indent, m["key"]))
            continue
        keys.append([dotted, m["value"], (m["doc"] or "").strip()])
    return [(key, value, doc) for key, value, doc in keys]


def _comments(path: Path) -> list[str]:
    """The leading comment lines of a yaml file (without ``# @package``)."""
    out = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("#").strip()
        if not text.startswith("@package"):
            out.append(text)
    return out


def describe(path: Path) -> str:
    """A config file's description: its first comment line (not ``time:``), joined with the
    next ones while the sentence goes on (a line not ending in ``.``, ``)`` or ``:``)."""
    lines = [c for c in _comments(path) if c and not c.startswith("time:")]
    text = lines[0] if lines else ""
    for c in lines[1:4]:
        if text.endswith((".", ")", ":")):
            break
        text += c if text.endswith("-") else " " + c
    return first_sentence(text)


_ABBREVIATIONS = re.compile(
    r"(?:\b(?:Sec|Secs|Fig|Figs|Eq|Eqs|Alg|Thm|Tab|Ref|cf|vs|al|etc|approx|resp)|\be\.g|\bi\.e)$"
)


def first_sentence(text: str, at_least: int = 60) -> str:
    """``text`` up to the end of its first sentence past ``at_least`` characters: a period
    before a capital letter, outside parentheses and not closing an abbreviation (``Sec.``,
    ``e.g.``), so that a description is never cut at "(FedCanon Sec."."""
    for end in _SENTENCE_END.finditer(text, at_least):
        head = text[: end.start()]
        if head.count("(") == head.count(")") and not _ABBREVIATIONS.search(head):
            return head + "."
    return text


def preset_time(path: Path) -> str:
    """A preset's ``# time:`` comment, with the comment lines that continue it."""
    lines = _comments(path)
    start = next((i for i, c in enumerate(lines) if c.startswith("time:")), None)
    if start is None:
        return "not given"
    text = lines[start][len("time:") :].strip()
    for c in lines[start + 1 :]:
        if not c or re.match(r"^\w+:", c):
            break
        text += " " + c
    return text


def group_options(group: str) -> list[tuple[str, str]]:
    """``(option, description)`` of a config group; a subfolder of options is one entry,
    ``sub/{a,b,c}``, described by its preset (``conf/algorithm/<preset>/``) or first file."""
    root = CONF_DIR / group
    presets = {p.stem for p in (CONF_DIR / "experiment").glob("*.yaml")}
    out = [(p.stem, describe(p)) for p in sorted(root.glob("*.yaml"))]
    for sub in sorted(d for d in root.iterdir() if d.is_dir()):
        files = sorted(sub.glob("*.yaml"))
        if not files:
            continue
        name = f"{sub.name}/{{{','.join(f.stem for f in files)}}}"
        what = (
            f"the methods and step sizes of preset {sub.name}"
            if sub.name in presets
            else f"e.g. {sub.name}/{files[0].stem}: {describe(files[0])}"
        )
        out.append((name, what))
    return out


def plugin_options(group: str) -> list[tuple[str, str]]:
    """``(name, description)`` of each installed plugin of a config group (an entry point of
    ``fedprox_cli.<plural>``, :mod:`common.registry`); listed without importing it."""
    from importlib.metadata import entry_points

    if group not in PLUGIN_GROUPS:
        return []
    eps = entry_points(group=f"fedprox_cli.{PLUGIN_GROUPS[group]}")
    return [
        (ep.name, f"installed plugin ({ep.value})") for ep in sorted(eps, key=lambda ep: ep.name)
    ]


def _defaults() -> dict[str, str]:
    text = (CONF_DIR / "config.yaml").read_text()
    return dict(re.findall(r"^\s+- (\w+): (\w+)", text, re.M))


def _rows(rows: Sequence[tuple[str, ...]], indent: int = 2, width: int | None = None) -> list[str]:
    """Aligned columns; the last one wrapped to the terminal's width."""
    width = width or min(shutil.get_terminal_size((120, 24)).columns, 140)
    cols = len(rows[0])
    w = [min(max(len(r[i]) for r in rows), _MAX_COLUMN) for i in range(cols - 1)]
    lead = indent + sum(x + 2 for x in w)
    lines = []
    for r in rows:
        head = " " * indent + "".join(c.ljust(x + 2) for c, x in zip(r[:-1], w))
        body = textwrap.wrap(r[-1], max(30, width - lead), break_on_hyphens=False) or [""]
        if len(head.rstrip()) > lead - 2:  # a long name: its description on the next lines
            lines.append(head.rstrip())
            lines += [" " * lead + b for b in body if b]
        else:
            lines.append((head + body[0]).rstrip())
            lines += [" " * lead + b for b in body[1:]]
    return lines


HYDRA_LAUNCHERS = {  # launchers whose configs come with Hydra's plugins, not conf/hydra/launcher/
    "basic": "The jobs one after another in this process (the default).",
    "joblib": "The jobs in parallel worker processes on this machine (hydra.launcher.n_jobs=N); "
    "Ctrl-C stops them all within seconds.",
}


def launchers() -> list[tuple[str, str]]:
    """``(name, description)`` of every launcher: Hydra's basic and joblib ones and fedrun's
    (conf/hydra/launcher/), each with the extra it needs (:data:`extras.NEEDS`)."""
    from ..config.extras import NEEDS

    named = dict(HYDRA_LAUNCHERS)
    named |= {p.stem: describe(p) for p in sorted((CONF_DIR / "hydra" / "launcher").glob("*.yaml"))}
    return [
        (
            name,
            what
            + (
                f" Needs the [{NEEDS[key][1]}] extra."
                if (key := f"hydra/launcher/{name}") in NEEDS
                else ""
            ),
        )
        for name, what in named.items()
    ]


def text() -> str:
    defaults = _defaults()
    out = [ABOUT, "", "Usage:", USAGE, "", "Top-level keys (conf/config.yaml; KEY=VALUE):"]
    out += _rows([(k, v, d) for k, v, d in config_keys()])
    out += ["", "Config groups (GROUP=OPTION; * = default):"]
    for g in (g for g in defaults if g != "experiment"):  # config.yaml's defaults list
        out.append(f"  {g}:")
        options = group_options(g)
        options += [(o, d) for o, d in plugin_options(g) if o not in {name for name, _ in options}]
        out += _rows([(("*" if defaults.get(g) == o else " ") + o, d) for o, d in options], 4)
    out += ["", "Launchers of a sweep's jobs (fedrun -m hydra/launcher=NAME ...; docs/cluster.md):"]
    out += _rows(launchers())
    out += [
        "",
        "Presets (fedrun -m experiment=NAME; each has a _quick variant that runs on 2 CPU "
        "cores; docs/reproducing.md):",
    ]
    out += _rows(
        [
            (p.stem, f"{describe(p)} Time: {preset_time(p)}.")
            for p in sorted((CONF_DIR / "experiment").glob("*.yaml"))
        ]
    )
    out += ["", "Exit codes (a sweep exits with its worst job's):"]
    out += _rows([(str(code), EXIT_MEANING.get(name, name)) for name, code in EXIT.items()])
    out += ["", "Examples:", EXAMPLES, ""]
    out += textwrap.wrap(
        "Progress: a bar on a terminal, otherwise a line at the first evaluation, "
        "then 5 s later and at doubling intervals up to every progress_every_s "
        "seconds (stderr and the run's fedrun.log; round T's is left to the closing "
        "line); every run ends with a summary "
        "line (status, test accuracy, objective, stationarity, training time, "
        "folder). A sweep's jobs, under any launcher: the launching process prints "
        "each job's start, progress and summary lines, and whatever else a job says "
        "carries its number (\"fedrun: job 3: ...\"), "
        "then its report and a table of its jobs. Words the help and the docs use "
        "(vmap, lockstep, [I], F_nat^gamma, Hoyer, TF32/bf16): docs/glossary.md.",
        100,
        break_on_hyphens=False,
    )
    return "\n".join(out) + "\n"


DECLARATIONS = {
    "partial_participation": "runs on a subset of clients (participation < 1)",
    "takes_compressor": "takes a compressed uplink (compressor=...)",
    "smooth_only": "is defined for h = 0 only (regularizer=none)",
}


def field_meanings(cls: type) -> dict[str, str]:
    """Each dataclass field's meaning: the comment ending its declaration in the class's source
    (``alpha: float = 0.1  # global step size alpha (eq. 7e)``, or after the ``)`` closing a
    declaration over several lines), the subclass's first; a field without one is left out."""
    import ast
    import inspect

    out: dict[str, str] = {}
    for c in cls.__mro__:
        try:
            lines = textwrap.dedent(inspect.getsource(c)).splitlines()
        except (OSError, TypeError):  # a builtin, a class made at run time
            continue
        body = ast.parse("\n".join(lines)).body
        for stmt in body[0].body if body and isinstance(body[0], ast.ClassDef) else []:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                _, hash_, doc = lines[(stmt.end_lineno or stmt.lineno) - 1].partition("  # ")
                if hash_:
                    out.setdefault(stmt.target.id, doc.strip())
    return out


def option_page(group: str, name: str, values: Mapping[str, object] | None = None) -> str:
    """``fedrun algorithm=NAME --help``: the option's class, its parameters with their declared
    ranges (:mod:`common.ranges`), their defaults -- ``values``, the composed config's group
    (what a run of ``GROUP=NAME`` takes: the option's YAML over the class's defaults), else the
    class's -- and their meanings (:func:`field_meanings`), and, for an algorithm, what it
    declares. A preset's option (``fedcanon_fig2/fedavg``) is its method's class with the
    preset's values: the class the composed group names."""
    from dataclasses import MISSING, fields

    from ..common import ranges
    from ..common.dotted import dotted, located
    from ..common.plugin_calls import origin
    from ..config.plugin_defaults import lookup

    plain = str((values or {}).get("name", name)) if "/" in name else name
    target = dotted(plain)
    cls = lookup(group)(located(target).name, target) if target else lookup(group)(plain)
    doc = (
        (cls.__doc__ or "").split("\n\n")[0]
        if not (cls.__doc__ or "").startswith(cls.__name__ + "(")
        else ""
    )
    out = [
        f"{group} {name} ({origin(cls)})",
        *textwrap.wrap(" ".join(doc.split()), 100, initial_indent="  ", subsequent_indent="  "),
        "",
        "Parameters (KEY=VALUE):",
    ]
    declared, meanings = ranges.declared(cls, group), field_meanings(cls)
    rows = []
    for f in fields(cls):
        if not f.init:
            continue
        default = (values or {}).get(f.name, f.default)
        given = "" if default is MISSING else f"default {default!r}"
        rows.append(
            (
                f"{group}.{f.name}",
                str(declared.get(f.name, "any value")),
                given,
                meanings.get(f.name, ""),
            )
        )
    out += _rows(rows) if rows else ["  none"]
    if group == "algorithm":
        out += ["", "Declares (class attributes):"]
        out += _rows(
            [(k, "yes" if getattr(cls, k) else "no", what) for k, what in DECLARATIONS.items()]
        )
    return "\n".join(out) + "\n"

"""Where claims come from: a source is a claims file, a folder of them, or a package that ships
them, named on the command line by ``--claims FILE|DIR|NAME`` (:func:`resolve`). A NAME is an
entry point of the group ``fedprox_cli.claims`` (``name = "package.module"``: the ``*.yaml`` files
of that package's folder); the three papers' claims are the source ``papers``
(``fedprox_cli.claims``), found the same way and loaded by the same path, the default when no
``--claims`` is given.

Every file of a source is read by :func:`read`: validated where it comes in (:mod:`.schema`:
one line naming the file, the line and the key), then typed (:mod:`.declare`). A folder's
``stand_ins.yaml`` says what each stand-in dataset its claims run on is (the package's own file
describes fedrun's datasets for every source). Ids are unique across all sources loaded.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import cast

import yaml

from ..common import guarded
from ..common.errors import UserError, require
from . import declare, schema

GROUP = "fedprox_cli.claims"
PAPERS = "papers"
BUILT_IN = {PAPERS: "fedprox_cli.claims"}  # besides the installed entry points
STAND_INS = "stand_ins.yaml"
RUNS_HERE = {  # what the papers' report says of the machine their evidence ran on
    PAPERS: " Runs here: a 2-core CPU, one thread per job (device column);\n"
    "`fedrun-reproduce plan --device cuda` gives the papers' own settings."
}


@dataclass(frozen=True)
class Source:
    """One source: ``name`` as the report and errors call it, its claims files (path, the name
    errors give it), the stand-ins its folder describes, the report's sentence on where its runs
    ran, and whether its report writes the README/docs blocks under ``--root`` by default."""

    name: str
    files: tuple[tuple[Path, str], ...]
    stand_ins: dict[str, str]
    runs_here: str = ""
    blocks: bool = False
    stand_ins_file: tuple[tuple[Path, str], ...] = ()  # its folder's stand_ins.yaml, if any


def _folder(path: Path, shown: str, runs_here: str = "", blocks: bool = False) -> Source:
    """The source of a folder of claims files (and its stand_ins.yaml), named ``shown``."""
    shown = shown.rstrip("/")
    files = sorted(p for p in path.glob("*.yaml") if p.name != STAND_INS)
    require(bool(files), f"--claims {shown}: no claims file (*.yaml) in the folder")
    return Source(
        f"`{shown}/*.yaml`",
        tuple((p, f"{shown}/{p.name}") for p in files),
        _stand_ins(path / STAND_INS, f"{shown}/{STAND_INS}"),
        runs_here,
        blocks,
        stand_ins_file=_present(path / STAND_INS, f"{shown}/{STAND_INS}"),
    )


def _present(path: Path, shown: str) -> tuple[tuple[Path, str], ...]:
    return ((path, shown),) if path.is_file() else ()


def _stand_ins(path: Path, shown: str) -> dict[str, str]:
    if not path.is_file():
        return {}
    facts = guarded.read_yaml(path)
    require(
        isinstance(facts, dict) and all(isinstance(v, str) for v in facts.values()),
        f"{shown}: a mapping of stand-in dataset -> what it is (text)",
    )
    return cast(dict[str, str], facts)  # checked just above


def _package(name: str, module: str) -> Source:
    """The source of entry point ``name`` = ``module``: the claims files of its package folder."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as e:
        raise UserError(f"claims source {name!r}: cannot find {module} ({e})") from None
    require(
        spec is not None and bool(spec.submodule_search_locations),
        f"claims source {name!r}: {module} is not a package (its folder holds the claims files)",
    )
    assert spec is not None and spec.submodule_search_locations is not None
    folder = Path(next(iter(spec.submodule_search_locations)))
    return _folder(
        folder, module.replace(".", "/"), runs_here=RUNS_HERE.get(name, ""), blocks=name == PAPERS
    )


def installed() -> dict[str, str]:
    """Every named source: the built-in papers and the entry points of :data:`GROUP`."""
    return {**BUILT_IN, **{ep.name: ep.value for ep in entry_points(group=GROUP)}}


def resolve(given: list[str] | None) -> list[Source]:
    """The sources ``--claims`` names (an existing file or folder, else an installed source's
    name); none given: the papers."""
    out = []
    for g in given or [PAPERS]:
        path = Path(g)
        if path.is_dir():
            out.append(_folder(path, g))
        elif path.is_file():
            beside = (path.parent / STAND_INS, str(Path(g).with_name(STAND_INS)))
            out.append(
                Source(
                    f"`{g}`", ((path, g),), _stand_ins(*beside), stand_ins_file=_present(*beside)
                )
            )
        else:
            names = installed()
            if g not in names:
                raise UserError(
                    f"--claims {g}: no such file or folder, nor an installed claims source"
                    f" ({', '.join(sorted(names))}; a package adds one under the entry point"
                    f" group {GROUP})" + schema.suggest(g, list(names))
                )
            out.append(_package(g, names[g].split(":", 1)[0]))
    return out


def facts(sources: list[Source]) -> dict[str, str]:
    """What each stand-in dataset is: the package's descriptions, then each source's."""
    merged = dict(declare.stand_ins())
    for s in sources:
        merged.update(s.stand_ins)
    return merged


def written_from(sources: list[Source]) -> list[tuple[Path, str]]:
    """What a report of ``sources`` is written from beyond the runs (path, name): their claims
    files, the package's stand_ins.yaml and each source's own."""
    package = (Path(declare.__file__).with_name(STAND_INS), f"fedprox_cli/claims/{STAND_INS}")
    files = [f for s in sources for f in s.files]
    facts = [package, *(f for s in sources for f in s.stand_ins_file)]
    return list({p.resolve(): (p, n) for p, n in [*files, *facts]}.values())


def read(path: Path, shown: str) -> list[declare.Claim]:
    """The claims of one file, validated (:func:`.schema.check`) before they are typed."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{shown}: cannot be read ({e})") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        raise UserError(f"{shown}{at}: not YAML ({getattr(e, 'problem', None) or e})") from None
    finally:
        loader.dispose()
    schema.check(data, node, shown)
    assert isinstance(data, list)  # (checked)
    return [declare.claim(d, schema.at(shown, node, (i,)), str(path)) for i, d in enumerate(data)]


def load(sources: list[Source]) -> list[declare.Claim]:
    """Every claim of ``sources``, in their order; an id declared twice (in one source or two)
    is one error naming both places."""
    claims: list[declare.Claim] = []
    seen: dict[str, str] = {}
    known = facts(sources)
    for s in sources:
        for path, shown in s.files:
            for c in read(path, shown):
                require(
                    c.id not in seen,
                    f"{c.origin}: claim id {c.id!r} is declared twice (first at {seen.get(c.id)})",
                )
                seen[c.id] = c.origin
                for rs in c.ran:
                    require(
                        not rs.stands_for or rs.data in known,
                        f"{c.origin}: claim {c.id}: stand-in {rs.data!r} is described nowhere"
                        f" (add it to {STAND_INS} beside the claims file)",
                    )
                claims.append(c)
    return declare.shared(claims)


def claims(given: list[str] | None = None) -> list[declare.Claim]:
    """Every claim of the sources ``given`` as ``--claims`` takes them (none: the papers')."""
    return load(resolve(given))

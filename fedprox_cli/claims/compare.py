"""``check``'s comparison: a committed rendering against the recomputed one, one line per
difference naming the claim, the number (the table column, or the panel and column of a
per-unit table) and both values."""

from __future__ import annotations

import difflib
import re

ANCHOR = re.compile(r'^<a id="([^"]+)"></a>$')
ROW = re.compile(r"\(#([a-z0-9-]+)\)")


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def blocks(report: str) -> dict[str, list[str]]:
    """The report's lines by claim id (its summary row and its section); ``""`` for the rest."""
    out: dict[str, list[str]] = {}
    current = ""
    for line in report.splitlines():
        m = ANCHOR.match(line)
        if m:
            current = m.group(1)
        row = ROW.search(line) if line.startswith("| [") else None
        out.setdefault(row.group(1) if row else current, []).append(line)
    for lines_ in out.values():
        while lines_ and not lines_[-1].strip():  # the blank line between sections
            lines_.pop()
    return out


def _row_name(header: list[str], row: list[str]) -> tuple[str, int]:
    """How a table row is named in a difference, and its first cell holding a number."""
    if header[0] == "claim":
        return "summary row", 1
    if header[0] == "test":
        return f"test {row[0]}, {header[1]} {row[1]}", 2
    return row[0], 1


def _pair(claim: str, header: list[str] | None, old: str, new: str) -> list[str]:
    """The differences of one line: cell by cell for table rows of the same width."""
    if old.startswith("|") and new.startswith("|") and len(cells(old)) == len(cells(new)):
        a, b = cells(old), cells(new)
        names = (
            header
            if header and len(header) == len(a)
            else [f"column {i + 1}" for i in range(len(a))]
        )
        row, first = _row_name(names, a)
        diffs = [
            f"{claim}: {row}, {names[i]}: committed {a[i]!r}, recomputed {b[i]!r}"
            for i in range(first, len(a))
            if a[i] != b[i]
        ]
        if diffs or a[:first] == b[:first]:
            return diffs
    return [f"{claim}: text: committed {old!r}, recomputed {new!r}"]


def _headers(text: list[str]) -> list[list[str] | None]:
    """Per line: the header row of the table it is in (the line above a ``|---`` rule)."""
    out, current = [], None
    for k, line in enumerate(text):
        if not line.startswith("|"):
            current = None
        elif k + 1 < len(text) and text[k + 1].startswith("|---"):
            current = cells(line)
        out.append(current)
    return out


def lines(
    claim: str, committed: list[str], recomputed: list[str], header: list[str] | None = None
) -> list[str]:
    """The differences between two lists of lines of one claim (``header``: of a table whose
    header is not among the lines)."""
    out = []
    headers = _headers(recomputed)
    sm = difflib.SequenceMatcher(a=committed, b=recomputed, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            continue
        old, new = committed[i1:i2], recomputed[j1:j2]
        for k in range(max(len(old), len(new))):
            if k < len(old) and k < len(new):
                out += _pair(claim, header or headers[j1 + k], old[k], new[k])
            elif k < len(old):
                out.append(f"{claim}: committed line not recomputed: {old[k]!r}")
            else:
                out.append(f"{claim}: recomputed line not committed: {new[k]!r}")
    return out


def is_row(line: str) -> bool:
    """A claim's summary row of the report."""
    return line.startswith("| [")


def report(committed: str, recomputed: str, ids: list[str], whole: bool) -> list[str]:
    """Differences of the report, for the claims ``ids`` (and its shared text when ``whole``)."""
    old, new = blocks(committed), blocks(recomputed)
    header = next(
        (cells(line) for line in recomputed.splitlines() if line.startswith("| claim |")), None
    )
    out = lines("(report)", old.get("", []), new.get("", [])) if whole else []
    if whole:
        out += [f"{i}: in the committed report, not declared" for i in old if i and i not in ids]
    for i in ids:
        got = old.get(i, [])
        if not got:
            out.append(f"{i}: not in the committed report")
            continue
        out += lines(
            i, [l for l in got if is_row(l)], [l for l in new[i] if is_row(l)], header=header
        )
        out += lines(i, [l for l in got if not is_row(l)], [l for l in new[i] if not is_row(l)])
    return out


def block(name: str, committed: str | None, recomputed: str, titles: dict[str, str]) -> list[str]:
    """Differences of a generated README/docs block, by claim (``titles``: id -> the text
    that starts its row)."""
    if committed is None:
        return [f"(all): {name} has no generated block (markers missing)"]
    old, new = committed.splitlines(), recomputed.splitlines()
    out = []
    for i, title in titles.items():
        a = [l for l in old if l.startswith(f"| {title}")]
        b = [l for l in new if l.startswith(f"| {title}")]
        out += [f"{d} (in {name})" for d in lines(i, a, b, header=cells(new[1]))]
    return out

"""A built table (:class:`.table.Built`) as LaTeX: a booktabs tabular, its text escaped."""

from __future__ import annotations

from typing import Protocol

import pandas as pd

GREEK = {  # the letters captions and names print (analysis.plotting.SYMBOLS's), by LaTeX name
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "eta": "η",
    "theta": "θ",
    "lambda": "λ",
    "mu": "μ",
    "rho": "ρ",
    "sigma": "σ",
    "tau": "τ",
}


class Shown(Protocol):
    """What a table shows (:class:`.table.Built`): its rows, columns, cell texts, which are
    bold, and the note under it."""

    index: pd.Index
    columns: pd.Index
    text: pd.DataFrame
    bold: pd.DataFrame
    note: str


def tex(text: object) -> str:
    """Text escaped for LaTeX (a name, a header; cells are written by this module already)."""
    out = str(text)
    for a, b in (
        ("\\", r"\textbackslash{}"),
        ("&", r"\&"),
        ("%", r"\%"),
        ("$", r"\$"),
        ("#", r"\#"),
        ("_", r"\_"),
        ("{", r"\{"),
        ("}", r"\}"),
    ):
        out = out.replace(a, b)
    out = out.replace("±", r"$\pm$")
    for name, letter in GREEK.items():  # pdfLaTeX has no Greek letters in text: math mode
        out = out.replace(letter, f"$\\{name}$")
    return out.replace("²", "$^2$").replace("‖", r"$\|$")


def booktabs(b: Shown, label: str = "") -> str:
    """A booktabs table (``\\usepackage{booktabs}``): one header row naming the row keys and
    the columns (under a row of metrics spanning their columns when there are several), bold
    with ``\\textbf``, the caption saying what is shown (:func:`.table.caption`) and, given
    one, its ``label`` for ``\\ref``."""
    names = [n for n in b.index.names if n is not None]
    keys = len(names) if names else (0 if len(b.index) <= 1 else 1)
    cols = list(b.columns)
    spanning = isinstance(b.columns, pd.MultiIndex)
    lines = [
        "% needs \\usepackage{booktabs} in the preamble",
        "\\begin{table}",
        "\\centering",
        f"\\caption{{{tex(b.note)}}}",
        *([f"\\label{{{label}}}"] if label else []),
        f"\\begin{{tabular}}{{{'l' * keys}{'c' * len(cols)}}}",
        "\\toprule",
    ]
    if spanning:
        heads, rules, at = [""] * keys, [], keys + 1
        for metric in dict.fromkeys(c[0] for c in cols):
            width = sum(c[0] == metric for c in cols)
            heads.append(f"\\multicolumn{{{width}}}{{c}}{{{tex(metric)}}}")
            rules.append(f"\\cmidrule(lr){{{at}-{at + width - 1}}}")
            at += width
        lines += [" & ".join(heads) + " \\\\", " ".join(rules)]
    header = [tex(n) for n in names] + [""] * (keys - len(names))
    header += [tex(c[1] if spanning else c) for c in cols]
    lines += [" & ".join(header) + " \\\\", "\\midrule"]
    for i, key in enumerate(b.index):
        row = list(key) if isinstance(key, tuple) else ([key] if keys else [])
        cells = [
            f"\\textbf{{{t}}}" if bold and t else t
            for t, bold in zip(b.text.iloc[i].tolist(), b.bold.iloc[i].tolist())
        ]
        lines.append(" & ".join([*map(tex, row), *cells]) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(lines) + "\n"

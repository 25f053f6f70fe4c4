"""Render a :class:`~evaluate.reporting.tables.Table` as Markdown, CSV (wide: mean, lo, hi, n per column) and
LaTeX (booktabs; best in bold, second best underlined, as in the paper).

Markdown and LaTeX are for reading: they show the table's :attr:`~evaluate.reporting.tables.Table.shown_columns`
and one line per folded reason. The CSV is for machines: every column, with its reason in ``<col>:note``."""

from __future__ import annotations

import csv
import io

import numpy as np

from .cells import Cell, fixed, fmt, has_interval
from .tables import Table, Value


def cell_text(v: Value, note: dict[str, int]) -> str:
    if isinstance(v, Cell):
        if v.ok():
            return fmt(v)
        return f"n/c[{note[v.reason]}]" if v.reason in note else "n/c"
    if v is None:
        return ""
    if isinstance(v, float):
        return fixed(v) if np.isfinite(v) else "n/c"
    return str(v)


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|")


def folded_lines(t: Table) -> list[str]:
    """One sentence per reason of the folded columns: which columns, why, and so how to get them."""
    return [f"Not computed in any row: {', '.join(cols)}: {reason}" for reason, cols in t.folded()]


def markdown(t: Table, full: bool = False) -> str:
    """The table in Markdown; a collapsed table as its one-line summary unless ``full``."""
    note = t.footnotes()
    ranks = t.ranks()
    L = [f"### {t.title}", "", t.caption, ""]
    if t.collapsed and not full:
        return "\n".join(L + [f"> {t.collapsed} (the full table: tables/{t.id}.md)", ""])
    if t.notes:
        L += [f"> {n}" for n in t.notes] + [""]
    if not t.rows:
        return "\n".join(L + ["(no rows)", ""])
    cols = t.shown_columns
    L.append("| " + " | ".join(t.index + [c.label + c.arrow for c in cols]) + " |")
    L.append("|" + " --- |" * (len(t.index) + len(cols)))
    for i, (key, cells) in enumerate(t.rows):
        out = []
        for c in cols:
            s = _md_escape(cell_text(cells.get(c.key), note))
            r = ranks.get((i, c.key))
            out.append(f"**{s}**" if r == 1 else f"*{s}*" if r == 2 else s)
        L.append("| " + " | ".join([_md_escape(str(k)) for k in key] + out) + " |")
    L.append("")
    if ranks:
        L += [("Best per column in **bold** where its paired 95 % interval separates it from every other row (as "
               "in the verdict), second best in *italics* likewise."), ""]
    for reason, k in note.items():
        L.append(f"[{k}] {_md_escape(reason)}  ")
    L += [f"- {_md_escape(x)}" for x in folded_lines(t)]
    L.append("")
    return "\n".join(L)


def to_csv(t: Table) -> str:
    """One row per table row. A column holding intervals (Cells) comes with ``<col>:lo``, ``:hi``, ``:n`` and
    ``:note`` (the reason of an n/c cell); a column of plain values is one column (numbers as numbers, NaN as an
    empty field), so the file is tidy."""
    buf = io.StringIO()
    w = csv.writer(buf)
    head = list(t.index)
    with_ci = {c.key for c in t.columns if any(isinstance(cells.get(c.key), Cell) for _, cells in t.rows)}
    for c in t.columns:
        head += [c.key] + ([f"{c.key}:lo", f"{c.key}:hi", f"{c.key}:n", f"{c.key}:note"] if c.key in with_ci else [])
    w.writerow(head)
    for key, cells in t.rows:
        row: list[str | int | float | None] = list(key)
        for c in t.columns:

            v = cells.get(c.key)
            if isinstance(v, Cell):
                ok = v.ok()
                row += [f"{v.mean:.6g}" if ok else "", f"{v.lo:.6g}" if ok and np.isfinite(v.lo) else "",
                        f"{v.hi:.6g}" if ok and np.isfinite(v.hi) else "", v.n, "" if ok else (v.reason or "")]
            else:
                if isinstance(v, float) and not np.isfinite(v):
                    v = None
                row += ["" if v is None else v] + (["", "", "", ""] if c.key in with_ci else [])
        w.writerow(row)
    return buf.getvalue()


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
        "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "↑": r"$\uparrow$", "↓": r"$\downarrow$",
        "Δ": r"$\Delta$", "±": r"$\pm$", "≥": r"$\geq$", "≤": r"$\leq$", "x": "x"}


def tex_escape(s: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in s)


def latex(t: Table) -> str:
    note = t.footnotes()
    ranks = t.ranks()
    shown = t.shown_columns
    cols = "l" * len(t.index) + "c" * len(shown)
    L = [r"% requires \usepackage{booktabs}", r"\begin{table}[t]", r"\centering", r"\scriptsize",
         rf"\caption{{{tex_escape(t.title)}. {tex_escape(t.caption)}}}", rf"\label{{tab:{t.id}}}",
         rf"\begin{{tabular}}{{{cols}}}", r"\toprule",
         " & ".join(tex_escape(x) for x in t.index + [c.label + c.arrow for c in shown]) + r" \\", r"\midrule"]
    for i, (key, cells) in enumerate(t.rows):
        out = []
        for c in shown:
            v = cells.get(c.key)
            if isinstance(v, Cell) and v.ok() and v.kind == "mean":
                s = fixed(v.mean)
                r = ranks.get((i, c.key))
                s = rf"\textbf{{{s}}}" if r == 1 else rf"\underline{{{s}}}" if r == 2 else s
                s += rf"{{\tiny\,[{fixed(v.lo)}, {fixed(v.hi)}], n={v.n}}}" if has_interval(v) else \
                    rf"{{\tiny\,n={v.n}}}"
            elif isinstance(v, Cell) and not v.ok():
                s = rf"n/c$^{{{note[v.reason]}}}$" if v.reason in note else "n/c"
            else:
                s = tex_escape(cell_text(v, note))
            out.append(s)
        L.append(" & ".join([tex_escape(str(k)) for k in key] + out) + r" \\")
    L += [r"\bottomrule", r"\end{tabular}"]
    if note:
        L.append(r"\par\raggedright\tiny " + " ".join(rf"$^{{{k}}}${tex_escape(r)}" for r, k in note.items()))
    for line in folded_lines(t):
        L.append(r"\par\raggedright\tiny " + tex_escape(line))
    L += [r"\end{table}", ""]
    return "\n".join(L)

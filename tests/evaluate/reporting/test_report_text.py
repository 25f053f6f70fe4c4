"""The words and numbers of the report, in process: no signed zero (a difference of -0.0001 printed ``-0.000`` read
as a loss), counts with their noun's number ("1 row", "2 rows"), cells split into the value and its interval for
the page, and a wide table cut into parts that fit a laptop screen, its separating columns first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evaluate.reporting.cells import Cell, fixed, fmt, fmt_parts, plural

SIGNED_ZERO = re.compile(r"(?<![\w.])[-+]0\.0+(?![0-9])")


@pytest.mark.parametrize("x, digits, kw, want", [
    (-0.0001, 3, {}, "0.000"), (-0.0, 3, {}, "0.000"), (-0.0005, 3, {}, "-0.001"), (0.0004, 3, {"signed": True}, "0.000"),
    (0.0006, 3, {"signed": True}, "+0.001"), (-0.0004, 3, {"signed": True}, "0.000"), (-2.5, 1, {}, "-2.5"),
    (-0.00004, 1, {"percent": True}, "0.0%"), (-0.0004, 1, {"percent": True}, "0.0%"),
    (-0.002, 1, {"percent": True}, "-0.2%"), (-0.4, 0, {"signed": True}, "0"), (3.0, 0, {"signed": True}, "+3"),
])
def test_fixed_never_prints_a_signed_zero(x, digits, kw, want):
    # the expected strings: Python's own formatting, with the sign dropped exactly where every digit is 0
    assert fixed(x, digits, **kw) == want


def test_every_cell_kind_prints_without_a_signed_zero():
    tiny = dict(mean=-0.0001, lo=-0.0004, hi=-0.00001, n=5)
    cells = [Cell(**tiny), Cell(**tiny, kind="rate"), Cell(**tiny, kind="ratio"),
             Cell(**tiny, kind="spread", sd=0.0001), Cell(-0.0001, n=2)]
    for c in cells:
        text = fmt(c)
        assert not SIGNED_ZERO.search(text), (c.kind, text)
        assert not SIGNED_ZERO.search(fmt(c, signed=True)), (c.kind, text)
    assert fmt(Cell(0.0123, 0.01, 0.02, 4), signed=True) == "+0.012 [0.010, 0.020] n=4"
    assert fmt(Cell(-0.0123, -0.02, -0.01, 4), signed=True) == "-0.012 [-0.020, -0.010] n=4"


def test_fmt_is_its_parts_joined():
    for c, parts in [(Cell(0.5123, 0.49, 0.53, 12), ("0.512", "[0.490, 0.530] n=12")),
                     (Cell(0.008, n=2), ("0.008", "(n=2)")), (Cell(3.0, n=5, kind="count"), ("3", "(n=5)")),
                     (Cell(1.234, 1.1, 1.3, 5, kind="ratio"), ("1.23x", "[1.10, 1.30] n=5")),
                     (Cell(0.5, 0.4, 0.6, 3, kind="spread", sd=0.1), ("0.500 ± 0.100", "[0.400, 0.600] n=3")),
                     (Cell(reason="x"), ("n/c", ""))]:
        assert fmt_parts(c) == parts
        assert fmt(c) == " ".join(p for p in parts if p)


@pytest.mark.parametrize("n, want", [(0, "0 videos"), (1, "1 video"), (2, "2 videos")])
def test_plural(n, want):
    assert plural(n, "video") == want
    assert plural(n, "matrix", "matrices").endswith("matrix" if n == 1 else "matrices")


def test_a_page_of_one_row_one_video_says_so(tmp_path):
    """One evaluated video under one policy: "1 evaluated video", "(1 row)", never "(1 rows)" or "1 videos"."""
    from evaluate.reporting import build_report
    from tests.support.report_data import make_run

    run = make_run(tmp_path, models=("evoke",), contexts=("fullkv",), trajectories=("lrlr",), cases=0, seeds=(1,))
    out = build_report([run], strips=False, figures=False)
    page = Path(out["html"]).read_text()
    md = Path(out["markdown"]).read_text()
    assert out["items"] == 1
    assert "1 evaluated video;" in page and "(1 row)" in page and "(1 video)" in page
    for text in (page, md):
        assert not re.search(r"\b1 (rows|videos|footnotes|columns)\b|\(1 \w+s\)", text), text[:200]
        assert not SIGNED_ZERO.search(text)


def test_a_wide_table_is_cut_into_parts_that_fit(tmp_path):
    """The estimate that cuts a table: every part, row keys included, within the budget; the columns in order."""
    from evaluate.reporting.page import TABLE_BUDGET_PX, _cell, _header, column_parts
    from evaluate.reporting.tables import Column, Table

    cols = [Column(f"family{i // 4}.metric_{i}[backbone-{i}]", f"family{i // 4}.metric_{i}[backbone-{i}]", True)
            for i in range(24)]
    t = Table("wide", "Wide", "", ["model", "context"], cols)
    for m in ("model_a", "model_b"):
        t.rows.append(((m, "fullkv"), {c.key: Cell(0.512, 0.49, 0.53, 12) for c in cols}))
    parts = column_parts(t, cols)
    assert len(parts) > 1 and [c for p in parts for c in p] == cols

    def width(c: Column) -> float:
        return max([_header(c.label)[1]] + [_cell(cells[c.key], {})[1] for _, cells in t.rows])

    keys = sum(max(_header(h)[1], max(_cell(k[j], {})[1] for k, _ in t.rows)) for j, h in enumerate(t.index))
    for p in parts:
        assert keys + sum(width(c) for c in p) <= TABLE_BUDGET_PX
    assert column_parts(t, cols[:2]) == [cols[:2]]  # a narrow table stays whole

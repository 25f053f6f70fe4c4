"""The rules of the report's renderers, page, builder and revisit strips (evaluate/reporting/render.py, page.py,
build.py, strips.py), one at a time and in this process: each test builds a small table, a few items in memory or
a tiny run, and states the exact text (Markdown, CSV, LaTeX, HTML) or value a reader can check by hand. Slow
collaborators (matplotlib's file writer, the video decoder and transcoder, the figure drawers) are stubbed where a
rule does not depend on them."""

from __future__ import annotations

import csv
import io
import json
import logging
import os
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest

from evaluate.reporting import build, page, render, strips
from evaluate.reporting.analyses import Analyses, Comparison, MetricComparison
from evaluate.reporting.cells import Cell, Unit
from evaluate.reporting.collect import Item, ReportError
from evaluate.reporting.playable import PageVideo
from evaluate.reporting.plots import Palette
from evaluate.reporting.study import Study
from evaluate.reporting.tables import Column, Table
from evaluate.results import ItemResult, MetricEntry

NAN = float("nan")
PHASES = {"V": [0, 2], "D1": [2, 4], "R1": [4, 6], "D2": [6, 8], "R2": [8, 10], "H": [10, 12]}
PAPER = "environment.visible[dinov2]"  # a Table 2 metric, higher is better, no chance level
THUMB = "environment.visible[pixel-thumb16]"  # a variant with a chance level (0.10)
RPE = "camera.rpe_rot[classical-opencv]"  # a variant, lower is better
PSNR = "diagnostic.revisit_psnr[pixels]"


def ci(mean: float, lo: float, hi: float, n: int = 5, kind: str = "mean") -> Cell:
    return Cell(mean, lo, hi, n, kind=kind)


def make_item(root: Path, metrics: dict[str, dict] | None = None, *, model: str = "m", context: str = "fullkv",
              seed: int = 1, traj: str = "lrlr", case: str = "env_0", run: str = "run",
              family: str = "environment", settings: dict | None = None) -> Item:
    """An evaluated video in memory (its folder under ``root``, created; nothing else written)."""
    item = {"model": model, "context": context, "seed": seed, "trajectory": traj, "case_id": case}
    extra = {"timings_generation": {"generate_s": 1.0}}
    if settings is not None:
        extra["settings"] = settings
    res = ItemResult(item=item, case_family=family, num_revisits=2, phases=dict(PHASES),
                     metrics={k: MetricEntry.from_dict(v) for k, v in (metrics or {}).items()}, extra=extra)
    d = root / run / model / context / f"seed-{seed}" / traj / case
    d.mkdir(parents=True, exist_ok=True)
    return Item(run, root / run, d, res)


def entry(key: str, value: float = 0.5, **details) -> dict:
    metric, _, backbone = key.partition("[")
    return {"metric": metric, "backbone": backbone.rstrip("]"), "backbone_kind": "diagnostic", "status": "computed",
            "value": value, **details}


# -- shared tables ----------------------------------------------------------------------------------------------------
def rich_table() -> Table:
    """Three rows: a ranked column of each direction, plain values, a column of mixed cells and one folded column."""
    a, b, plain, mix, gone = (Column("env.a", "env.a", True), Column("cam.b", "cam.b", False),
                              Column("plain", "plain"), Column("mix", "mix"), Column("gone", "gone", True))
    folded = Cell(reason="gone: weights missing")
    rows = [(("x", "fullkv"), {"env.a": ci(0.9, 0.8, 1.0), "cam.b": ci(0.3, 0.25, 0.35), "plain": 3,
                               "mix": Cell(0.7, NAN, NAN, 2), "gone": folded}),
            (("y", "fullkv"), {"env.a": ci(0.5, 0.4, 0.6), "cam.b": ci(0.2, 0.1, 0.3, 4), "plain": 0.25,
                               "mix": NAN, "gone": folded}),
            (("z|w", "fullkv"), {"env.a": ci(0.1, 0.0, 0.2), "cam.b": Cell(reason="no pose"), "plain": "a|b",
                                 "mix": Cell(0.5, 0.4, 0.6, 0), "gone": folded})]
    return Table("tid", "Title", "Caption", ["model", "context"], [a, b, plain, mix, gone], rows, mark_best=True,
                 notes=["read me"], fold=True, separated=lambda *_: True)


# -- render.cell_text -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, note, want", [
    (ci(0.5123, 0.49, 0.53, 12), {}, "0.512 [0.490, 0.530] n=12"),
    (Cell(reason="r"), {"r": 2}, "n/c[2]"),
    (Cell(reason="r"), {"s": 1}, "n/c"),
    (None, {}, ""),
    (0.25, {}, "0.250"),
    (NAN, {}, "n/c"),
    (float("inf"), {}, "n/c"),
    (3, {}, "3"),
    ("s", {}, "s"),
])
def test_a_cell_is_written_as_its_value_its_footnote_or_nothing(value, note, want):
    assert render.cell_text(value, note) == want


# -- render.markdown --------------------------------------------------------------------------------------------------
def test_a_markdown_table_bolds_the_best_italicises_the_second_and_escapes_pipes():
    assert render.markdown(rich_table()) == "\n".join([
        "### Title", "", "Caption", "", "> read me", "",
        "| model | context | env.a ↑ | cam.b ↓ | plain | mix |",
        "| --- | --- | --- | --- | --- | --- |",
        "| x | fullkv | **0.900 [0.800, 1.000] n=5** | 0.300 [0.250, 0.350] n=5 | 3 | 0.700 (n=2) |",
        "| y | fullkv | *0.500 [0.400, 0.600] n=5* | **0.200 [0.100, 0.300] n=4** | 0.250 | n/c |",
        "| z\\|w | fullkv | 0.100 [0.000, 0.200] n=5 | n/c[1] | a\\|b | n/c |",
        "",
        "Best per column in **bold** where its paired 95 % interval separates it from every other row (as in the "
        "verdict), second best in *italics* likewise.",
        "",
        "[1] no pose  ",
        "- Not computed in any row: gone: weights missing",
        ""])


def test_a_markdown_table_without_emphasis_notes_or_footnotes_is_its_header_and_rows():
    t = Table("p", "Plain", "Cap", ["k"], [Column("v", "v")], [(("a",), {"v": 1}), (("b",), {"v": None})])
    assert render.markdown(t) == "### Plain\n\nCap\n\n| k | v |\n| --- | --- |\n| a | 1 |\n| b |  |\n\n"


def test_a_collapsed_table_is_one_line_unless_the_full_table_is_asked_for():
    t = Table("c", "Coll", "Cap", ["k"], [Column("v", "v")], [(("a",), {"v": 1})], collapsed="Nothing comparable.")
    assert render.markdown(t) == "### Coll\n\nCap\n\n> Nothing comparable. (the full table: tables/c.md)\n"
    assert render.markdown(t, full=True) == "### Coll\n\nCap\n\n| k | v |\n| --- | --- |\n| a | 1 |\n\n"


def test_a_table_without_rows_says_so():
    t = Table("e", "Empty", "Cap", ["k"], [Column("v", "v")], notes=["n"])
    assert render.markdown(t) == "### Empty\n\nCap\n\n> n\n\n(no rows)\n"


def test_folded_lines_name_the_columns_of_each_reason():
    assert render.folded_lines(rich_table()) == ["Not computed in any row: gone: weights missing"]


# -- render.to_csv ----------------------------------------------------------------------------------------------------
def test_the_csv_keeps_every_column_with_interval_n_and_reason_beside_cell_columns():
    rows = list(csv.reader(io.StringIO(render.to_csv(rich_table()))))
    assert rows == [
        ["model", "context", "env.a", "env.a:lo", "env.a:hi", "env.a:n", "env.a:note",
         "cam.b", "cam.b:lo", "cam.b:hi", "cam.b:n", "cam.b:note", "plain",
         "mix", "mix:lo", "mix:hi", "mix:n", "mix:note", "gone", "gone:lo", "gone:hi", "gone:n", "gone:note"],
        ["x", "fullkv", "0.9", "0.8", "1", "5", "", "0.3", "0.25", "0.35", "5", "", "3",
         "0.7", "", "", "2", "", "", "", "", "0", "gone: weights missing"],
        ["y", "fullkv", "0.5", "0.4", "0.6", "5", "", "0.2", "0.1", "0.3", "4", "", "0.25",
         "", "", "", "", "", "", "", "", "0", "gone: weights missing"],
        ["z|w", "fullkv", "0.1", "0", "0.2", "5", "", "", "", "", "0", "no pose", "a|b",
         "", "", "", "0", "", "", "", "", "0", "gone: weights missing"]]


def test_a_csv_column_of_plain_values_only_is_one_column():
    t = Table("p", "P", "", ["k"], [Column("v", "v")], [(("a",), {"v": 0.5}), (("b",), {"v": "s"})])
    assert render.to_csv(t) == "k,v\r\na,0.5\r\nb,s\r\n"


# -- render.latex -----------------------------------------------------------------------------------------------------
def test_a_latex_table_bolds_the_best_underlines_the_second_and_footnotes_n_c():
    assert render.latex(rich_table()) == "\n".join([
        r"% requires \usepackage{booktabs}", r"\begin{table}[t]", r"\centering", r"\scriptsize",
        r"\caption{Title. Caption}", r"\label{tab:tid}", r"\begin{tabular}{llcccc}", r"\toprule",
        r"model & context & env.a $\uparrow$ & cam.b $\downarrow$ & plain & mix \\", r"\midrule",
        r"x & fullkv & \textbf{0.900}{\tiny\,[0.800, 1.000], n=5} & 0.300{\tiny\,[0.250, 0.350], n=5} & 3 & "
        r"0.700{\tiny\,n=2} \\",
        r"y & fullkv & \underline{0.500}{\tiny\,[0.400, 0.600], n=5} & \textbf{0.200}{\tiny\,[0.100, 0.300], n=4} & "
        r"0.250 & n/c \\",
        r"z|w & fullkv & 0.100{\tiny\,[0.000, 0.200], n=5} & n/c$^{1}$ & a|b & n/c \\",
        r"\bottomrule", r"\end{tabular}", r"\par\raggedright\tiny $^{1}$no pose",
        r"\par\raggedright\tiny Not computed in any row: gone: weights missing", r"\end{table}", ""])


def test_latex_prints_a_rate_as_its_escaped_text_and_an_unexplained_n_c_bare():
    t = Table("r", "R_1", "50% & more", ["k"], [Column("v", "v", True)],
              [(("a",), {"v": ci(0.5, 0.4, 0.6, kind="rate")}), (("b",), {"v": Cell()})])
    assert render.latex(t).splitlines()[4:12] == [
        r"\caption{R\_1. 50\% \& more}", r"\label{tab:r}", r"\begin{tabular}{lc}", r"\toprule",
        r"k & v $\uparrow$ \\", r"\midrule", r"a & 50.0\% [40.0\%, 60.0\%] n=5 \\", r"b & n/c \\"]


# -- page: escaping, tokens, widths -----------------------------------------------------------------------------------
def test_html_escaping_covers_quotes():
    assert page._e("<a href='x'>\"&") == "&lt;a href=&#x27;x&#x27;&gt;&quot;&amp;"


def test_a_key_may_break_after_dots_brackets_pluses_and_slashes():
    assert page._breakable("a.b[c+d/e f<") == "a.<wbr>b[<wbr>c+<wbr>d/<wbr>e f&lt;"


def test_the_unbreakable_pieces_split_at_spaces_and_after_break_characters():
    assert page._tokens("ab cd.ef  g[h") == ["ab", "cd.", "ef", "g[", "h"]
    assert page._tokens("") == []


def test_a_header_puts_the_backbone_and_the_chance_level_on_their_own_lines():
    html, width = page._header("env.visible[dinov2] (chance ≈ 0.10)")
    assert html == ("env.<wbr>visible<br><span class='bb'>[dinov2]</span><br>"
                    "<span class='bb'>(chance ≈ 0.10)</span>")
    assert width == pytest.approx(7 * 7.6 + 14)  # "visible" in 12-px bold is the widest piece


def test_a_header_is_as_wide_as_its_widest_line():
    assert page._header("a[backbone-long]") == ("a<br><span class='bb'>[backbone-long]</span>",
                                                pytest.approx(len("backbone-long]") * 6.6 + 14))
    assert page._header("a[b] (chance_long_text)") == (
        "a<br><span class='bb'>[b]</span><br><span class='bb'>(chance_long_text)</span>",
        pytest.approx(len("(chance_long_text)") * 6.6 + 14))
    assert page._header("wide") == ("wide", pytest.approx(4 * 7.6 + 14))


def test_a_cell_puts_its_interval_and_n_in_small_type_under_the_value():
    assert page._cell(ci(0.5123, 0.49, 0.53, 12), {}) == (
        "<span class='nw'>0.512</span><br><span class='ci'><span class='nw'>[0.490, 0.530]</span> "
        "<span class='nw'>n=12</span></span>", pytest.approx(len("[0.490, 0.530]") * 6.6 + 14))


def test_a_long_value_is_wider_than_its_small_type():
    c = Cell(123456789.0, NAN, NAN, 2)
    assert page._cell(c, {}) == ("<span class='nw'>123456789.000</span><br><span class='ci'>"
                                 "<span class='nw'>(n=2)</span></span>", pytest.approx(13 * 7.2 + 14))


def test_a_cell_without_an_interval_keeps_its_note_in_one_piece():
    c = Cell(0.5, NAN, NAN, 4, [Unit(0.4, [], "a"), Unit(0.6, [], "b")], kind="models_mean")
    assert page._cell(c, {})[0] == ("<span class='nw'>0.500</span><br><span class='ci'>"
                                    "<span class='nw'>(2 models, n=4)</span></span>")


@pytest.mark.parametrize("value, note, want", [
    (Cell(reason="r"), {"r": 1}, ("n/<wbr>c[<wbr>1]", 2 * 7.2 + 14)),
    (None, {}, ("", 14.0)),
    ("departure.return", {}, ("departure.<wbr>return", 10 * 7.2 + 14)),
    (0.25, {}, ("0.<wbr>250", 3 * 7.2 + 14)),
])
def test_a_value_that_is_not_a_computed_cell_is_its_breakable_text(value, note, want):
    html, width = page._cell(value, note)
    assert (html, width) == (want[0], pytest.approx(want[1]))


# -- page.column_parts ------------------------------------------------------------------------------------------------
def narrow(n: int, key: str = "x") -> Table:
    """Columns "c0".."c<n-1>" (29.2 px: their headers) after one row key "m" of ``key``."""
    cols = [Column(f"c{i}", f"c{i}") for i in range(n)]
    return Table("n", "N", "", ["m"], cols, [((key,), {c.key: None for c in cols})])


def test_columns_fill_a_part_up_to_exactly_the_budget():
    t = narrow(3)
    key_w, col_w = 1 * 7.6 + 14, 2 * 7.6 + 14  # the header "m" is wider than the key "x"
    assert page.column_parts(t, t.columns, key_w + col_w + col_w) == [t.columns[:2], t.columns[2:]]
    assert page.column_parts(t, t.columns, key_w + col_w + col_w + col_w) == [t.columns]
    assert page.column_parts(t, t.columns, key_w + col_w) == [[c] for c in t.columns]


def test_a_column_wider_than_the_budget_still_has_a_part_of_its_own():
    t = narrow(2)
    assert page.column_parts(t, t.columns, 10.0) == [[t.columns[0]], [t.columns[1]]]


def test_the_row_keys_width_is_their_widest_cell_and_repeats_in_every_part():
    t = narrow(4, key="a_long_key")
    key_w, col_w = 10 * 7.2 + 14, 2 * 7.6 + 14
    assert page.column_parts(t, t.columns, key_w + 2 * col_w) == [t.columns[:2], t.columns[2:]]
    assert page.column_parts(t, t.columns, key_w + 2 * col_w - 0.01) == [[c] for c in t.columns]


def test_a_column_is_as_wide_as_its_widest_value_or_header_with_its_arrow():
    cols = [Column("c0", "c0", True), Column("c1", "c1")]
    t = Table("n", "N", "", ["m"], cols, [(("x",), {"c0": None, "c1": "wide_value_1"})])
    key_w, c0, c1 = 1 * 7.6 + 14, 2 * 7.6 + 14, 12 * 7.2 + 14  # "c0 ↑" splits at the space: "c0" is the widest
    assert page.column_parts(t, cols, key_w + c0 + c1) == [cols]
    assert page.column_parts(t, cols, key_w + c0 + c1 - 0.01) == [[cols[0]], [cols[1]]]


# -- page tables ------------------------------------------------------------------------------------------------------
def page_table() -> Table:
    a, plain = Column("env.a", "env.a", True), Column("plain", "plain")
    rows = [(("x",), {"env.a": ci(0.9, 0.8, 1.0), "plain": 3}),
            (("y",), {"env.a": ci(0.5, 0.4, 0.6), "plain": 0.25}),
            (("z.w",), {"env.a": ci(0.1, 0.0, 0.2), "plain": Cell(reason="why <not>")}),
            (("v",), {"env.a": Cell(reason="why <not>"), "plain": "a<b"})]
    return Table("tp", "Page <table>", "Cap & more", ["model"], [a, plain], rows, mark_best=True,
                 notes=["note <1>"], separated=lambda *_: True)


ROWS_HTML = [
    "<div class='tw'><table class='sortable' data-table='tp'><thead><tr><th>model</th><th>env.<wbr>a ↑</th>"
    "<th>plain</th></tr></thead><tbody>",
    "<tr><td>x</td><td class='best' data-v='0.9' data-col='env.a'><span class='nw'>0.900</span><br><span class='ci'>"
    "<span class='nw'>[0.800, 1.000]</span> <span class='nw'>n=5</span></span></td><td class='' data-v='3'>3</td></tr>",
    "<tr><td>y</td><td class='second' data-v='0.5' data-col='env.a'><span class='nw'>0.500</span><br>"
    "<span class='ci'><span class='nw'>[0.400, 0.600]</span> <span class='nw'>n=5</span></span></td>"
    "<td class='' data-v='0.25'>0.<wbr>250</td></tr>",
    "<tr><td>z.<wbr>w</td><td class='' data-v='0.1'><span class='nw'>0.100</span><br><span class='ci'>"
    "<span class='nw'>[0.000, 0.200]</span> <span class='nw'>n=5</span></span></td><td class='nc'>n/<wbr>c[<wbr>1]</td></tr>",
    "<tr><td>v</td><td class='nc'>n/<wbr>c[<wbr>1]</td><td class=''>a&lt;b</td></tr>",
    "</tbody></table></div>"]


def test_a_table_part_marks_best_second_and_n_c_cells_and_gives_numbers_a_sort_value():
    t = page_table()
    assert page._table_part(t, t.columns, t.footnotes(), t.ranks()).split("\n") == ROWS_HTML


def test_a_table_section_has_its_title_downloads_notes_table_footnotes_and_legend():
    html = page.table_html(page_table(), {"md": "tables/tp.md", "csv": "tables/t&p.csv"})
    assert html.split("\n") == [
        "<section id='t-tp'><h3>Page &lt;table&gt;</h3><p class='cap'>Cap &amp; more</p>",
        "<p class='fn'><a href='tables/tp.md'>md</a> <a href='tables/t&amp;p.csv'>csv</a></p>",
        "<p class='cap'><b>note &lt;1&gt;</b></p>",
        *ROWS_HTML,
        "<details class='fn'><summary>1 footnote: why cells are n/c</summary>[1] why &lt;not&gt;</details>",
        "<div class='fn'>Best per column in bold where its paired 95 % interval separates it from every other row "
        "(as in the verdict), second best underlined likewise; unmarked columns do not separate.</div>",
        "</section>"]


def test_a_table_section_without_downloads_rows_or_emphasis_is_short():
    t = Table("e", "Empty", "Cap", ["k"], [Column("v", "v")])
    assert page.table_html(t, {}) == "<section id='t-e'><h3>Empty</h3><p class='cap'>Cap</p>\n<p>(no rows)</p>\n</section>"


def test_a_collapsed_table_section_is_its_summary_and_downloads():
    t = Table("c", "Coll", "Cap", ["k"], [Column("v", "v")], [(("a",), {"v": 1})], collapsed="Nothing <here>.")
    assert page.table_html(t, {"md": "c.md"}).split("\n") == [
        "<section id='t-c'><h3>Coll</h3><p class='cap'>Cap</p>", "<p class='fn'><a href='c.md'>md</a></p>",
        "<p class='fold' data-collapsed='c'>Nothing &lt;here&gt;. The full table is in the downloads above.</p>"
        "</section>"]


def test_folded_columns_and_several_footnotes_are_listed_under_the_table():
    cols = [Column("a", "a"), Column("b", "b"), Column("c", "c"), Column("d", "d")]
    t = Table("f", "F", "", ["k"], cols, [(("r",), {"a": Cell(reason="a: off"), "b": Cell(reason="b: off"),
                                                    "c": Cell(reason="one"), "d": Cell(reason="two")}),
                                          (("s",), {"a": Cell(reason="a: off"), "b": Cell(reason="b: off"),
                                                    "c": 1, "d": 2})], fold=True)
    lines = page.table_html(t, {}).split("\n")
    assert lines[-3:] == [
        "<ul class='fold' data-folded='f'><li>Not computed in any row: <b>a, b</b>: off</li></ul>",
        "<details class='fn'><summary>2 footnotes: why cells are n/c</summary>[1] one<br>[2] two</details>",
        "</section>"]


def test_a_wide_table_is_shown_in_numbered_parts_the_separating_columns_first():
    cols = [Column(f"metric_{i}_long_name_for_width", f"metric_{i}_long_name_for_width", True) for i in range(8)]
    rows = [((m,), {c.key: ci(v, v - 0.1, v + 0.1) for c in cols}) for m, v in (("a", 0.9), ("b", 0.2))]
    t = Table("w", "W", "", ["model"], cols, rows, mark_best=True, separated=lambda *_: True)
    parts = page.column_parts(t, cols)
    assert [len(p) for p in parts] == [4, 4]
    html = page.table_html(t, {})
    assert html.count("<p class='fn part'>") == 2 and html.count("<table") == 2
    assert "<p class='fn part'>Part 1 of 2: 4 columns (the columns that separate first)</p>" in html
    assert "<p class='fn part'>Part 2 of 2: 4 columns</p>" in html
    t.separated = None  # no emphasis: the parts do not claim an order
    assert "<p class='fn part'>Part 1 of 2: 4 columns</p>" in page.table_html(t, {})


def test_the_default_budget_is_1150_px():
    head, value = Column("h" * 16, "h" * 16), Column("v", "v")  # 7.6 * 16 + 14 and 7.2 * 136 + 14 px
    t = Table("b", "B", "", ["m"], [head, value], [(("x",), {"h" * 16: None, "v": "y" * 136})])
    assert page.column_parts(t, t.columns) == [[head], [value]]  # 21.6 + 135.6 + 993.2 = 1150.4 px
    t.rows[0][1]["v"] = "y" * 135
    assert page.column_parts(t, t.columns) == [t.columns]


def test_a_part_of_one_column_says_column():
    cols = [Column(f"c{i}", f"c{i}") for i in range(2)]
    t = Table("o", "O", "", ["m"], cols, [(("x" * 150,), {"c0": "y" * 20, "c1": "y" * 20})])
    assert "<p class='fn part'>Part 2 of 2: 1 column</p>" in page.table_html(t, {})


# -- page.verdict_html ------------------------------------------------------------------------------------------------
def metric(key: str, means: dict[str, float], diffs: dict[tuple[str, str], Cell]) -> MetricComparison:
    return MetricComparison(key, {k: ci(v, v - 0.01, v + 0.01) for k, v in means.items()}, diffs)


def policies() -> Comparison:
    """FullKV, Sliding and FoV of model m: a paper metric FullKV wins (FoV not apart from it), a variant with a chance
    level FoV wins (with its speedup), a lower-is-better variant, and a metric that separates nobody."""
    pairs = [("sliding", "fullkv"), ("fov", "fullkv"), ("fov", "sliding")]
    ms = {
        PAPER: metric(PAPER, {"fullkv": 0.9, "sliding": 0.5, "fov": 0.88},
                      {pairs[0]: ci(-0.4, -0.5, -0.3), pairs[1]: ci(-0.02, -0.05, 0.01), pairs[2]: ci(0.38, 0.3, 0.46)}),
        THUMB: metric(THUMB, {"fullkv": 0.6, "sliding": 0.62, "fov": 0.7},
                      {pairs[0]: ci(0.02, -0.01, 0.05), pairs[1]: ci(0.1, 0.05, 0.15), pairs[2]: ci(0.08, 0.07, 0.09)}),
        RPE: metric(RPE, {"fullkv": 0.2, "sliding": 0.3, "fov": 0.25},
                    {pairs[0]: ci(0.1, 0.05, 0.15), pairs[1]: ci(0.05, 0.01, 0.09), pairs[2]: ci(-0.05, -0.09, -0.01)}),
        PSNR: metric(PSNR, {"fullkv": 20.0, "sliding": 21.0, "fov": 20.5},
                     {p: Cell(1.0, NAN, NAN, 2) for p in pairs}),
    }
    return Comparison("policies", "m", ["fullkv", "sliding", "fov"], {"fullkv": {}, "sliding": {}, "fov": {}}, pairs,
                      ms, latency={"fullkv": ci(10.0, 9.0, 11.0), "sliding": ci(8.0, 7.0, 9.0),
                                   "fov": Cell(reason="no timing recorded")},
                      speedup={"fullkv": ci(1.0, 1.0, 1.0, kind="ratio"), "sliding": ci(1.25, 1.1, 1.4, kind="ratio"),
                               "fov": ci(1.5, 1.2, 1.8, kind="ratio")})


def models() -> Comparison:
    """Two models, one of them named "fullkv": the best of a models comparison is never "the baseline"."""
    pair = ("other", "fullkv")
    return Comparison("models", None, ["fullkv", "other"], {"fullkv": {}, "other": {}}, [pair],
                      {PAPER: metric(PAPER, {"fullkv": 0.8, "other": 0.6}, {pair: ci(-0.2, -0.3, -0.1)})})


def quiet_models() -> Comparison:
    return Comparison("models", None, ["a", "b"], {"a": {}, "b": {}}, [("b", "a")])


@pytest.fixture(scope="module")
def lone(tmp_path_factory) -> Analyses:
    """One video of model m under FullKV with the paper's environment.visible: nothing to compare."""
    it = make_item(tmp_path_factory.mktemp("lone"), {PAPER: entry(PAPER, 0.5)})
    return Analyses(Study([it], {"n": 20, "seed": 0}, lambda p: p.name))


def with_comparisons(an: Analyses, comps: list[Comparison]) -> Analyses:
    out = Analyses(an.study)
    out.__dict__["comparisons"] = comps  # the verdict is computed from these by the real rule
    return out


def test_a_verdict_without_a_comparison_says_what_ran_and_gives_the_headline(lone):
    assert page.verdict_html(lone).split("\n") == [
        "<section id='verdict'><h2>Verdict</h2>",
        "<p>Nothing to compare: m under fullkv (1 video), no other policy or model on the same videos. Run several "
        "(<code>-m context=fullkv,sliding,fov</code>) for a verdict.</p>",
        "<p class='cap' data-headline='1'>m / fullkv, paper metrics: environment.visible[dinov2] ↑ 0.500 (n=1)</p>",
        "</section>"]


def verdict_of_three(lone: Analyses) -> list[str]:
    return page.verdict_html(with_comparisons(lone, [policies(), models(), quiet_models()])).split("\n")


def test_the_verdict_answers_first_then_explains_how_to_read_it(lone):
    verdict_lines = verdict_of_three(lone)
    assert verdict_lines[0] == "<section id='verdict'><h2>Verdict</h2>"
    assert verdict_lines[1] == (
        "<p class='answer' data-answer='context policies of m'>FullKV and FoV keep more of the world than Sliding on "
        "environment.visible[dinov2] ↑: fullkv 0.900, fov 0.880, sliding 0.500; paired fullkv − sliding +0.400 "
        "[0.300, 0.500] n=5 (95 % bootstrap interval over matched videos).</p>"
        "<p class='answer' data-answer='models'>fullkv keeps more of the world than other on "
        "environment.visible[dinov2] ↑: fullkv 0.800, other 0.600; paired fullkv − other +0.200 [0.100, 0.300] n=5 "
        "(95 % bootstrap interval over matched videos).</p>")
    assert verdict_lines[2].startswith("<p class='cap'>Per metric that separates two contenders")
    assert verdict_lines[-1] == "</section>"


def test_each_comparison_lists_its_separating_metrics_best_first(lone):
    verdict_lines = verdict_of_three(lone)
    head = ("<table class='verdict' data-comparison='{}'><thead><tr><th>metric</th><th>ranking</th><th>best</th>"
            "<th>paired differences</th></tr></thead><tbody>")
    assert verdict_lines[3:] == [
        "<h3>context policies of m (0 matched videos)</h3>",
        head.format("context policies of m"),
        "<tr data-metric='environment.visible[dinov2]' data-best='fullkv'><td>environment.visible[dinov2] ↑</td>"
        "<td>fullkv 0.900 ≈ fov 0.880 ≫ sliding 0.500</td><td>fullkv (the baseline)</td><td>"
        "<span class='sep'><b>sliding − fullkv -0.400 [-0.500, -0.300] n=5</b></span><br>"
        "fov − fullkv -0.020 [-0.050, 0.010] n=5<br>"
        "<span class='sep'><b>fov − sliding +0.380 [0.300, 0.460] n=5</b></span></td></tr>",
        "<tr data-metric='camera.rpe_rot[classical-opencv]' data-best='fullkv'><td>camera.rpe_rot[classical-opencv] ↓ "
        "<span class='fn'>[variant]</span></td><td>fullkv 0.200 ≫ fov 0.250 ≫ sliding 0.300</td>"
        "<td>fullkv (the baseline)</td><td>"
        "<span class='sep'><b>sliding − fullkv +0.100 [0.050, 0.150] n=5</b></span><br>"
        "<span class='sep'><b>fov − fullkv +0.050 [0.010, 0.090] n=5</b></span><br>"
        "<span class='sep'><b>fov − sliding -0.050 [-0.090, -0.010] n=5</b></span></td></tr>",
        "<tr data-metric='environment.visible[pixel-thumb16]' data-best='fov'><td>environment.visible[pixel-thumb16] ↑ "
        "<span class='fn'>[variant]</span><br><span class='fn'>chance ≈ 0.10</span></td>"
        "<td>fov 0.700 &gt; sliding 0.620 ≈ fullkv 0.600</td><td>fov (speedup 1.50x [1.20, 1.80] n=5)</td><td>"
        "sliding − fullkv +0.020 [-0.010, 0.050] n=5<br>"
        "<span class='sep'><b>fov − fullkv +0.100 [0.050, 0.150] n=5</b></span><br>"
        "<span class='sep'><b>fov − sliding +0.080 [0.070, 0.090] n=5</b></span></td></tr>",
        "</tbody></table>",
        "<p class='fn'>Not separating: diagnostic.revisit_psnr[pixels]</p>",
        "<p class='fn'>generation time per video (wall clock of the generate call; a KV-context cost only for a model "
        "that attends over a KV cache, not for the CPU reference renderer): fullkv 10.00 s; sliding 8.00 s, 1.25x "
        "[1.10, 1.40] n=5 vs FullKV</p>",
        "<h3>models (0 matched videos)</h3>",
        head.format("models"),
        "<tr data-metric='environment.visible[dinov2]' data-best='fullkv'><td>environment.visible[dinov2] ↑</td>"
        "<td>fullkv 0.800 ≫ other 0.600</td><td>fullkv</td><td>"
        "<span class='sep'><b>other − fullkv -0.200 [-0.300, -0.100] n=5</b></span></td></tr>",
        "</tbody></table>",
        "<h3>models (0 matched videos)</h3>",
        "<p>No metric separates them (every paired 95 % interval includes 0, or fewer than 3 pairs).</p>",
        "</section>"]


def test_a_verdict_with_no_answer_opens_with_how_to_read_it(lone):
    lines = page.verdict_html(with_comparisons(lone, [quiet_models()])).split("\n")
    assert lines[0] == "<section id='verdict'><h2>Verdict</h2>" and lines[1].startswith("<p class='cap'>Per metric")


# -- page figures, head, cases, videos --------------------------------------------------------------------------------
def rel_to(base: Path):
    return lambda p: Path(os.path.relpath(p, base)).as_posix()


def test_a_figure_shows_its_first_png_and_links_every_file(tmp_path):
    paths = [tmp_path / "f" / "decay.svg", tmp_path / "f" / "decay.png", tmp_path / "f" / "other.png"]
    assert page._figure_html("Decay <1>", paths, rel_to(tmp_path)) == (
        "<h3>Decay &lt;1&gt;</h3><a href='f/decay.png'><img class='fig' src='f/decay.png' alt='Decay &lt;1&gt;'></a>"
        "<p class='fn'><a href='f/decay.svg'>svg</a> <a href='f/decay.png'>png</a> <a href='f/other.png'>png</a> "
        "(click the figure for full size)</p>")
    assert page._figure_html("None", [], rel_to(tmp_path)) == ""


def test_the_figures_section_has_one_colour_key_every_figure_and_the_previews(tmp_path):
    items = [make_item(tmp_path, context="fullkv"), make_item(tmp_path, context="fov")]
    pal = Palette(items)
    html = page._figures_html({"A": [tmp_path / "a.png"], "Empty": []}, {"lrlr": [tmp_path / "p" / "lrlr.png"]},
                              pal, rel_to(tmp_path))
    c0, c1 = pal.colours["fullkv"], pal.colours["fov"]
    assert html.split("\n") == [
        "<section id='figures'><h2>Figures</h2><p class='cap' id='colour-key'>Colours (the same in every figure): "
        f"<span class='swatch' data-name='fullkv' data-colour='{c0}' style='background:{c0}'></span>fullkv"
        f"<span class='swatch' data-name='fov' data-colour='{c1}' style='background:{c1}'></span>fov</p>",
        "<h3>A</h3><a href='a.png'><img class='fig' src='a.png' alt='A'></a><p class='fn'><a href='a.png'>png</a> "
        "(click the figure for full size)</p>",
        "",
        "<h3>Trajectories</h3>",
        "<div class='vid' data-preview='lrlr'>lrlr<br><a href='p/lrlr.png'><img class='fig' src='p/lrlr.png' "
        "alt='lrlr'></a></div>"]
    assert page._figures_html({}, {}, pal, rel_to(tmp_path)).count("\n") == 0  # no previews: no heading


def test_the_head_counts_videos_and_what_was_skipped_and_links_the_upfront_tables():
    t = Table("main", "Main", "", ["k"], [])
    html = page._head_html([Path("/o/run_a"), Path("/o/run<b>")], 1, {"not_done": 2, "duplicate": 3}, [t])
    lines = html.split("\n")
    assert lines[0].startswith("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>")
    assert lines[-3] == "<h1>WorldMem study report</h1>"
    assert lines[-2].startswith("<p class='cap'>Runs: <code>run_a</code>, <code>run&lt;b&gt;</code>. 1 evaluated video; "
                               "skipped: 2 not done, 0 without metrics.json, 3 already in an earlier run (same model")
    assert lines[-1] == ("<nav><a href='#verdict'>verdict</a><a href='#t-main'>main</a><a href='#figures'>figures</a>"
                        "<a href='#more'>more tables</a><a href='#cases'>cases</a></nav>")
    assert "2 evaluated videos;" in page._head_html([], 2, {}, [])


def test_a_video_links_its_files_plays_its_own_mp4_and_shows_its_strip(tmp_path):
    it = make_item(tmp_path, model="m<1>", context="fov")
    (it.item_dir / "meta.json").write_text("{}")
    (it.item_dir / "metrics.json").write_text("{}")
    rows = [{"reference": 0, "frames": [4], "labels": ["R1"], "metrics": ["a"]}]
    html = page._video_html(it, (tmp_path / "strips" / "s.png", rows), None, "metadata", rel_to(tmp_path))
    d = "run/m<1>/fov/seed-1/lrlr/env_0"
    de = d.replace("<", "&lt;").replace(">", "&gt;")
    assert html == (
        f"<div class='case'><div><b>m&lt;1&gt;</b> / fov <span class='fn'>(run)</span><video controls muted "
        f"preload='metadata' src='{de}/video.mp4'></video><a href='{de}/meta.json'>meta.json</a> · "
        f"<a href='{de}/metrics.json'>metrics.json</a></div><div><a href='strips/s.png'><img class='strip' "
        f"src='strips/s.png' alt='revisit strip' data-item='{de}/metrics.json' data-strip='"
        + page._e(json.dumps(rows)) + "'></a></div></div>")


def test_a_video_without_a_strip_says_so_and_plays_what_the_page_made_with_its_note(tmp_path):
    it = make_item(tmp_path)
    (it.item_dir / "controls").mkdir()
    (it.item_dir / "context_trace.json").write_text("[]")
    pv = PageVideo(tmp_path / "videos" / "v.mp4", "hevc", "yuv420p", "an H.264 copy <of hevc>")
    html = page._video_html(it, None, pv, "none", rel_to(tmp_path))
    d = "run/m/fullkv/seed-1/lrlr/env_0"
    assert html == (
        "<div class='case'><div><b>m</b> / fullkv <span class='fn'>(run)</span><video controls muted preload='none' "
        "src='videos/v.mp4'></video><div class='fn' data-video-note='hevc' style='max-width:320px'>an H.264 copy "
        f"&lt;of hevc&gt;</div><a href='{d}/controls'>controls</a> · <a href='{d}/context_trace.json'>context "
        "trace</a></div><div><span class='fn'>(no revisit frames recorded)</span></div></div>")


def test_a_video_that_cannot_play_is_warned_about_and_a_plain_copy_has_no_note(tmp_path):
    it = make_item(tmp_path)
    warn = PageVideo(tmp_path / "v.mp4", "x", "y", "cannot play this <video>")
    assert ("<div class='warn' data-video-note='x' style='max-width:320px'>cannot play this &lt;video&gt;</div>"
            in page._video_html(it, None, warn, "none", rel_to(tmp_path)))
    html = page._video_html(it, None, PageVideo(tmp_path / "v.mp4", "h264", "yuv420p"), "none", rel_to(tmp_path))
    assert "src='v.mp4'></video></div>" in html and "data-video-note" not in html


def test_cases_group_videos_by_case_trajectory_and_seed_in_order(tmp_path):
    its = [make_item(tmp_path, model=m, context=c, seed=s, traj=t, case=k, run=r)
           for m, c, s, t, k, r in [("b", "fullkv", 2, "lrlr", "env_1", "r1"), ("a", "fov", 1, "lrud", "env_0", "r1"),
                                    ("a", "fullkv", 1, "lrud", "env_0", "r2"), ("a", "fullkv", 1, "lrud", "env_0", "r1"),
                                    ("b", "fullkv", 1, "lrlr", "env_1", "r1")]]
    key = ("r1", "a", "fov", 1, "lrud", "env_0")
    got = page._cases_html(its, {key: (tmp_path / "s.png", [])}, {key: PageVideo(tmp_path / "x.mp4", "h", "p")},
                           rel_to(tmp_path))
    heads = [x for x in got if not x.startswith("<div class='case'>")]
    assert heads == ["<h3 id='case-env_0'>env_0</h3>", "<div><b>lrud</b>, seed 1<br>", "</div>",
                     "<h3 id='case-env_1'>env_1</h3>", "<div><b>lrlr</b>, seed 1<br>", "</div>",
                     "<div><b>lrlr</b>, seed 2<br>", "</div>"]
    videos = [x for x in got if x.startswith("<div class='case'>")]
    assert [v.split("<b>")[1].split("<video")[0] for v in videos] == [
        "a</b> / fov <span class='fn'>(r1)</span>", "a</b> / fullkv <span class='fn'>(r1)</span>",
        "a</b> / fullkv <span class='fn'>(r2)</span>", "b</b> / fullkv <span class='fn'>(r1)</span>",
        "b</b> / fullkv <span class='fn'>(r1)</span>"]
    assert "src='x.mp4'" in videos[0] and "img class='strip'" in videos[0]
    assert "src='x.mp4'" not in videos[1] and "img class='strip'" not in videos[1]
    assert all("preload='metadata'" in v for v in videos)


@pytest.mark.parametrize("n, preload", [(300, "metadata"), (301, "none")])
def test_videos_load_on_play_above_three_hundred(tmp_path, n, preload):
    it = make_item(tmp_path)
    got = page._cases_html([it] * n, {}, {}, rel_to(tmp_path))
    assert f"preload='{preload}'" in got[2] and len(got) == 3 + n


# -- page.write_page --------------------------------------------------------------------------------------------------
def page_tables() -> list[Table]:
    one = [(("x",), {"v": 1})]
    return [Table("extra", "Extra", "", ["k"], [Column("v", "v")], one, collapsed="Folded away."),
            Table("variants", "Variants", "", ["k"], [Column("v", "v")], one),
            Table("context", "Context", "", ["k"], [Column("v", "v")]),  # upfront, but without rows: nowhere
            Table("main", "Main", "", ["k"], [Column("v", "v")]),  # the main table even without rows
            Table("more", "More", "", ["k"], [Column("v", "v")], one)]


def test_the_page_opens_with_the_verdict_then_the_upfront_tables_figures_more_tables_and_cases(tmp_path, lone):
    out = tmp_path / "report"
    out.mkdir()
    it = lone.study.items[0]
    key = (it.run,) + it.key
    got = page.write_page(out, lone, page_tables(), {"Fig": [out / "f.png"]}, {}, {key: None}, [tmp_path / "run"],
                          {"not_done": 1}, {"main": {"md": "tables/main.md"}}, Palette([it]))
    assert got == out / "index.html"
    html = got.read_text()
    order = ["<nav><a href='#verdict'>verdict</a><a href='#t-main'>main</a><a href='#t-variants'>variants</a>"
             "<a href='#figures'>figures</a>", "<section id='verdict'>", "<section id='t-main'>",
             "<p class='fn'><a href='tables/main.md'>md</a></p>", "<section id='t-variants'>",
             "<section id='figures'>", "<h3>Fig</h3>",
             "</section><section id='more'><h2>More tables</h2><p class='cap'>Per trajectory",
             "<details data-details='extra'><summary>Extra: Folded away.</summary><section id='t-extra'>",
             "</section></details>",
             "<details data-details='more'><summary>More (1 row)</summary><section id='t-more'>",
             "</section><section id='cases'><h2>Cases</h2>", "<h3 id='case-env_0'>env_0</h3>",
             f"src='{Path(os.path.relpath(it.item_dir / 'video.mp4', out)).as_posix()}'",
             "(no revisit frames recorded)", "</section><script>document.querySelectorAll", "</script></body></html>"]
    at = [html.find(x) for x in order]
    assert -1 not in at and at == sorted(at), list(zip(order, at))
    assert html.count("<section id='t-main'>") == 1 and "t-context" not in html
    assert "data-details='main'" not in html and "data-details='variants'" not in html


def test_the_page_plays_what_it_is_given_for_a_video(tmp_path, lone):
    it = lone.study.items[0]
    pv = PageVideo(tmp_path / "videos" / "copy.mp4", "hevc", "yuv420p", "a copy")
    html = page.write_page(tmp_path, lone, page_tables(), {}, {}, {}, [tmp_path / "run"], {}, {}, Palette([it]),
                           videos={(it.run,) + it.key: pv}).read_text()
    assert "src='videos/copy.mp4'" in html and "data-video-note='hevc'" in html


# -- strips: names ----------------------------------------------------------------------------------------------------
def test_strips_live_in_the_reports_strips_folder_one_flat_name_per_video(tmp_path):
    it = make_item(tmp_path, model="m", context="fov", seed=2, traj="lrud", case="env_3", run="r")
    assert strips.strips_dir(tmp_path / "rep") == tmp_path / "rep" / "strips"
    assert strips.strip_path(tmp_path, it) == tmp_path / "r__m__fov__seed-2__lrud__env_3.png"


@pytest.mark.parametrize("key, want", [(THUMB, "env.visible"), ("departure.return_visible[x]", "dep.return_visible"),
                                       ("diagnostic.revisit_psnr", "diag.revisit_psnr"), ("camera.rpe_rot", "camera.rpe_rot")])
def test_a_strip_title_shortens_the_family_and_drops_the_backbone(key, want):
    assert strips.short_name(key) == want


def test_a_row_as_the_page_reads_it_lists_its_metrics_in_table_order():
    row = strips.StripRow(3, [4, 8], ["R1", "R2"], {THUMB: [0.1, 0.2], "camera.rpe_rot": [1.0, 2.0], PAPER: [0.5, 0.6]})
    assert row.as_dict() == {"reference": 3, "frames": [4, 8], "labels": ["R1", "R2"],
                             "metrics": [PAPER, THUMB, "camera.rpe_rot"]}


# -- strips: frames of a row ------------------------------------------------------------------------------------------
def me(**details) -> MetricEntry:
    return MetricEntry.computed("environment.visible", "x", "diagnostic", 0.5, **details)


@pytest.mark.parametrize("m, want", [
    (me(per_revisit=[0.1, 0.2], return_frames=[4, 8]), ([4, 8], [0], True)),
    (me(per_revisit=[0.1, 0.2], return_frames=[4, 8], reference_frames=[3]), ([4, 8], [3], True)),
    (me(per_revisit=[0.1, 0.2], revisit_frames=[[4, 5, 6], [8, 9]], reference_frames=[2, 3]), ([5, 9], [2, 3], False)),
    (me(per_revisit=[0.1, 0.2], return_frames=[4], revisit_frames=[[4, 5], [8, 9, 10, 11]]), ([5, 10], [0], False)),
    (me(per_revisit=[0.1, 0.2], return_frames=[4, 8.5], revisit_frames=[[4], [8]]), ([4, 8], [0], False)),
    (me(per_revisit=[0.1, 0.2], return_frames=[4, 8.5]), None),
    (me(per_revisit=[0.1, 0.2], revisit_frames=[[4], []]), None),
    (me(per_revisit=[0.1, 0.2], revisit_frames=[[4]]), None),
    (me(per_revisit=[0.1, 0.2], return_frames=[4, 8, 10]), None),
    (me(return_frames=[4, 8]), None),
    (me(per_revisit=[], return_frames=[]), None),
])
def test_a_row_shows_the_return_frames_else_each_windows_middle_frame(m, want):
    assert strips._row_frames(m) == want


def camera(path: Path, yaw_deg: list[float]) -> None:
    """A camera file whose frame i turns ``yaw_deg[i]`` degrees about the vertical axis."""
    from trajectories import CameraPath

    c2w = np.tile(np.eye(4), (len(yaw_deg), 1, 1))
    for i, y in enumerate(np.deg2rad(yaw_deg)):
        c2w[i, :3, :3] = [[np.cos(y), 0, np.sin(y)], [0, 1, 0], [-np.sin(y), 0, np.cos(y)]]
    c2w[:, 3, 3] = 1.0
    c2w[:, :3, 3] = 5.0  # a translation the orientations leave out
    CameraPath("lrlr", c2w, np.eye(3), 8.0, 48, 64, {"V": (0, len(yaw_deg))}).save(path)


def test_the_orientations_are_the_rotations_of_the_camera_file_or_none(tmp_path):
    it = make_item(tmp_path)
    assert strips._orientations(it) is None
    camera(it.item_dir / "camera.npz", [0.0, 90.0])
    rot = strips._orientations(it)
    assert rot.shape == (2, 3, 3) and rot[1] == pytest.approx(np.array([[0, 0, 1], [0, 1, 0], [-1, 0, 0]]), abs=1e-12)


def test_the_reference_is_the_closest_in_orientation_else_the_last():
    y = np.deg2rad([0.0, 40.0, 10.0, 35.0, 80.0])
    rot = np.array([[[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]] for a in y])
    assert strips._closest([0, 1, 2], 3, rot) == 1
    assert strips._closest([1, 0, 2], 4, rot) == 1
    assert strips._closest([2, 0], 0, rot) == 0  # a tie goes to the earlier frame
    assert strips._closest([0, 2], 3, None) == 2
    assert strips._closest([0, 2], 5, rot) == 2  # a frame past the camera file: the last reference
    assert strips._closest([0, 5], 3, rot) == 5
    assert strips._closest([0, 2], 4, rot[:4]) == 2  # exactly at the end of the file


def strip_item(root: Path, **kw) -> Item:
    """Four metrics with frames on three distinct rows (two share theirs), one without frames, one not computed."""
    metrics = {
        "departure.sweep_visible[x]": entry("departure.sweep_visible[x]", 0.7, per_revisit=[0.7, 0.6],
                                            revisit_frames=[[4, 5, 6], [8, 9]], reference_frames=[2, 3]),
        THUMB: entry(THUMB, 0.5, per_revisit=[0.5, 0.4], return_frames=[4, 8]),
        "departure.return_visible[x]": entry("departure.return_visible[x]", 0.9, per_revisit=[0.9, 0.8],
                                             return_frames=[6, 8], reference_frames=[1, 3]),
        "environment.depth[da3]": entry("environment.depth[da3]", 0.3, per_revisit=[0.3, 0.2], return_frames=[4, 8]),
        RPE: entry(RPE, 0.1),
        PAPER: {"metric": "environment.visible", "backbone": "dinov2", "status": "not_computed", "reason": "off",
                "per_revisit": [1, 2], "return_frames": [4, 8]},
    }
    return make_item(root, metrics, **kw)


def test_strip_rows_group_metrics_by_their_frames_in_table_order(tmp_path):
    it = strip_item(tmp_path)
    # frame 5 (the sweep's first shown frame) looks where reference frame 2 does; frame 9 where frame 3 does
    camera(it.item_dir / "camera.npz", [0, 0, 20, 60, 20, 20, 20, 20, 20, 60, 0, 0])
    rows = strips.strip_rows(it)
    assert [(r.reference, r.frames, r.labels, r.scores) for r in rows] == [
        (0, [4, 8], ["R1", "R2"], {THUMB: [0.5, 0.4], "environment.depth[da3]": [0.3, 0.2]}),
        (3, [6, 8], ["D2", "R2"], {"departure.return_visible[x]": [0.9, 0.8]}),
        (2, [5, 9], ["R1", "R2"], {"departure.sweep_visible[x]": [0.7, 0.6]})]


def test_a_sweep_row_without_a_camera_file_takes_the_last_reference(tmp_path):
    it = make_item(tmp_path, {"departure.sweep_visible[x]": entry(
        "departure.sweep_visible[x]", 0.7, per_revisit=[0.7, 0.6], revisit_frames=[[4, 5, 6], [8, 9]],
        reference_frames=[3, 2])})
    assert [(r.reference, r.frames) for r in strips.strip_rows(it)] == [(2, [5, 9])]


def test_the_frame_candidates_are_every_frame_and_reference_of_the_computed_entries():
    got = strips.strip_frame_candidates([
        me(per_revisit=[0.1, 0.2], revisit_frames=[[4, 5, 6], [8, 9]], reference_frames=[2, 3]),
        me(per_revisit=[0.1, 0.2], return_frames=[10, 4]), me(),
        MetricEntry.unavailable("environment.visible", "y", "off", per_revisit=[1, 2], return_frames=[20, 21])])
    assert got == [0, 2, 3, 4, 5, 9, 10]
    assert strips.strip_frame_candidates([]) == []


# -- strips: frames read or kept --------------------------------------------------------------------------------------
def test_strip_frames_are_taken_from_the_kept_frames_when_all_are_there(tmp_path):
    it = strip_item(tmp_path)
    kept = ([0, 1, 2, 3, 4, 5, 6, 8, 9, 11], np.arange(10)[:, None, None, None] * np.ones((1, 2, 2, 3), np.uint8))
    idx, frames = strips.strip_frames(it, kept=kept)
    assert idx == [0, 3, 4, 5, 6, 8, 9] and frames[:, 0, 0, 0].tolist() == [0, 3, 4, 5, 6, 7, 8]
    idx, frames = strips.strip_frames(it, max_rows=1, kept=kept)
    assert idx == [0, 4, 8] and frames[:, 0, 0, 0].tolist() == [0, 4, 7]


def test_strip_frames_are_read_from_the_video_when_one_is_missing(tmp_path, monkeypatch):
    import harness.video

    calls = []

    def read_frames(path, indices=None):
        calls.append((path, indices))
        return indices, np.zeros((len(indices), 2, 2, 3), np.uint8)

    monkeypatch.setattr(harness.video, "read_frames", read_frames)
    it = strip_item(tmp_path)
    kept = ([0, 3, 4, 5, 6, 8], np.zeros((6, 2, 2, 3), np.uint8))
    idx, frames = strips.strip_frames(it, kept=kept)
    assert calls == [(it.item_dir / "video.mp4", [0, 3, 4, 5, 6, 8, 9])] and idx == [0, 3, 4, 5, 6, 8, 9]
    assert isinstance(idx, list) and frames.shape == (7, 2, 2, 3)
    assert strips.strip_frames(it, max_rows=2)[0] == [0, 3, 4, 6, 8]
    assert strips.strip_frames(make_item(tmp_path, case="none")) is None


# -- strips: drawing --------------------------------------------------------------------------------------------------
def test_a_strip_has_a_row_per_frame_set_and_a_column_per_window_after_the_reference(tmp_path, monkeypatch):
    """(Drawn with matplotlib's file writer stubbed: what the figure held when it was saved.)"""
    import matplotlib.pyplot as plt

    from evaluate.reporting import plots

    metrics = {k: entry(k, 0.5, per_revisit=[0.5, 0.25, 0.125], return_frames=[4, 6, 8])
               for k in (THUMB, "environment.depth[da3]", "departure.a[x]", "departure.b[x]")}
    for k in ("diagnostic.x[y]", "diagnostic.y[y]", "diagnostic.z[y]"):  # exactly max_metrics: no "..."
        metrics[k] = entry(k, 0.5, per_revisit=[0.5], return_frames=[5], reference_frames=[3])
    it = make_item(tmp_path, metrics, model="m", context="fov", seed=2, traj="lrlr", case="env_1")
    seen = {}

    def save(fig, out, svg=True):
        seen.update(number=fig.number, out=out, svg=svg, size=tuple(fig.get_size_inches()),
                    left=fig.subplotpars.left, suptitle=(fig._suptitle.get_text(), fig._suptitle.get_fontsize()),
                    flat=[(ax.get_title(), ax.title.get_fontsize(), ax.get_visible(), len(ax.images), ax.axison)
                          for ax in fig.axes])
        return [out.with_suffix(".png")]

    monkeypatch.setattr(plots, "_save", save)
    frames: Future = Future()  # what the report's reader thread hands over
    frames.set_result(([0, 4, 5, 8], np.zeros((4, 2, 2, 3), np.uint8)))
    got = strips.frame_strip(it, tmp_path / "s.png", frames=frames)
    assert got[0] == tmp_path / "s.png" and seen["out"] == tmp_path / "s.png" and seen["svg"] is False
    assert [r["reference"] for r in got[1]] == [0, 3] and got[1][0]["frames"] == [4, 6, 8]
    assert not plt.fignum_exists(seen["number"])  # closed
    assert seen["size"] == pytest.approx((2.4 * 4, 2.4 * 2 + 0.5))
    assert seen["suptitle"] == ("m/fov/seed-2/lrlr/env_1: each metric's reference and scored frames", 7)
    assert seen["left"] != pytest.approx(0.125)  # laid out tight, not matplotlib's default margins
    assert seen["flat"] == [
        ("reference: frame 0\nenv.visible\nenv.depth\ndep.a\n...", 6, True, 1, False),
        ("R1: frame 4\nenv.visible 0.500\nenv.depth 0.500\ndep.a 0.500", 6, True, 1, False),
        ("D2: frame 6\nenv.visible 0.250\nenv.depth 0.250\ndep.a 0.250", 6, True, 0, False),
        ("R2: frame 8\nenv.visible 0.125\nenv.depth 0.125\ndep.a 0.125", 6, True, 1, False),
        ("reference: frame 3\ndiag.x\ndiag.y\ndiag.z", 6, True, 0, False),
        ("R1: frame 5\ndiag.x 0.500\ndiag.y 0.500\ndiag.z 0.500", 6, True, 1, False),
        ("", 12, False, 0, False), ("", 12, False, 0, False)]


def test_no_strip_without_rows_or_frames(tmp_path):
    it = make_item(tmp_path, {RPE: entry(RPE, 0.1)})
    assert strips.frame_strip(it, tmp_path / "a.png") is None
    fut: Future = Future()
    fut.set_result(None)
    assert strips.frame_strip(strip_item(tmp_path, case="c2"), tmp_path / "b.png", frames=fut) is None


def test_a_strip_reads_its_frames_when_none_are_given(tmp_path, monkeypatch):
    from evaluate.reporting import plots

    read = []
    monkeypatch.setattr(plots, "_save", lambda fig, out, svg=True: [out])
    monkeypatch.setattr(strips, "strip_frames", lambda it, max_rows: read.append(max_rows) or ([0], np.zeros((1, 2, 2, 3))))
    it = make_item(tmp_path, {THUMB: entry(THUMB, 0.5, per_revisit=[0.5], return_frames=[4])})
    got = strips.frame_strip(it, tmp_path / "a.png", max_rows=2)
    assert read == [2] and got[1] == [{"reference": 0, "frames": [4], "labels": ["R1"], "metrics": [THUMB]}]


# -- strips: drawn ahead during the evaluation ------------------------------------------------------------------------
def ahead_result(case: str = "env_0") -> ItemResult:
    item = {"model": "m", "context": "fullkv", "seed": 1, "trajectory": "lrlr", "case_id": case}
    return ItemResult(item=item, case_family="environment", num_revisits=2, phases=dict(PHASES), metrics={
        THUMB: MetricEntry.from_dict(entry(THUMB, 0.5, per_revisit=[0.5, 0.4], return_frames=[4, 8]))})


KEPT = ([0, 4, 6, 8], np.arange(4)[:, None, None, None] * np.ones((1, 2, 2, 3), np.uint8))


@pytest.fixture
def fake_strip(monkeypatch):
    """``frame_strip`` stubbed: records (item, png, frame indices) and returns (png, rows) or, for case ``none``,
    nothing."""
    calls = []

    def frame_strip(it, out_png, frames=None):
        calls.append((it.case_id, out_png, frames[0], frames[1][:, 0, 0, 0].tolist()))
        if it.case_id == "boom":
            raise RuntimeError("boom")
        return None if it.case_id == "none" else (out_png, [{"reference": 0}])

    monkeypatch.setattr(strips, "frame_strip", frame_strip)
    return calls


def test_a_strip_drawn_ahead_uses_the_kept_frames_and_is_listed(tmp_path, fake_strip):
    run = tmp_path / "run"
    s = strips.StripsAhead(run, tmp_path / "strips")
    s._draw(run / "m/fullkv/seed-1/lrlr/env_0", ahead_result(), KEPT)
    s._draw(run / "m/fullkv/seed-1/lrlr/none", ahead_result("none"), KEPT)
    s.close()
    png = tmp_path / "strips" / "run__m__fullkv__seed-1__lrlr__env_0.png"
    assert fake_strip[0] == ("env_0", png, [0, 4, 8], [0, 1, 3])
    assert s.drawn == [png] and len(fake_strip) == 2


def test_a_strip_that_fails_ahead_is_only_logged(tmp_path, fake_strip, caplog):
    s = strips.StripsAhead(tmp_path / "run", tmp_path / "strips")
    with caplog.at_level(logging.WARNING, logger="evaluate.reporting.strips"):
        s._draw(tmp_path / "run" / "boom", ahead_result("boom"), KEPT)
    s.close()
    assert s.drawn == [] and "not drawn ahead (boom); the report draws it" in caplog.text


def test_the_drawing_threads_cpu_seconds_are_summed_over_strips_failed_ones_included(tmp_path, fake_strip,
                                                                                        monkeypatch):
    """What a job's phase split moves from evaluation to report (harness.app.benchmarks.first_look)."""
    import time

    clock = iter([1.0, 1.25, 5.0, 5.5])  # a fake thread clock: each strip reads it at its start and its end
    monkeypatch.setattr(time, "thread_time", lambda: next(clock))
    s = strips.StripsAhead(tmp_path / "run", tmp_path / "strips")
    assert s.cpu_s == 0.0
    s._draw(tmp_path / "run" / "a", ahead_result("a"), KEPT)
    s._draw(tmp_path / "run" / "boom", ahead_result("boom"), KEPT)
    s.close()
    assert s.cpu_s == 0.75 and [c[0] for c in fake_strip] == ["a", "boom"]


def test_close_waits_for_the_strip_still_being_drawn(tmp_path, monkeypatch):
    """The run reads the strips' CPU seconds and the report reads the PNGs after close(): it returns only once the
    last strip is drawn (a correct close can never pass the check below early; a close that does not wait fails it
    unless its own thread is starved for half a second)."""
    import threading

    go, drawing = threading.Event(), threading.Event()

    def frame_strip(it, out_png, frames=None):
        drawing.set()
        go.wait(30)
        return out_png, []

    monkeypatch.setattr(strips, "frame_strip", frame_strip)
    s = strips.StripsAhead(tmp_path / "run", tmp_path / "strips")
    s.submit(tmp_path / "run" / "a", ahead_result("a"), KEPT)
    assert drawing.wait(30)
    closing = threading.Thread(target=s.close)
    closing.start()
    closing.join(0.5)
    assert closing.is_alive() and s.drawn == []  # still waiting for the strip being drawn
    go.set()
    closing.join(30)
    assert not closing.is_alive() and len(s.drawn) == 1


def test_submitted_items_are_drawn_on_the_background_thread_by_close(tmp_path, fake_strip):
    with strips.StripsAhead(tmp_path / "run", tmp_path / "strips") as s:
        s.submit(tmp_path / "run" / "a", ahead_result("a"), KEPT)
    assert [c[0] for c in fake_strip] == ["a"] and len(s.drawn) == 1


def test_an_item_without_kept_frames_or_without_a_result_is_not_drawn_ahead(tmp_path, monkeypatch):
    seen = []
    with strips.StripsAhead(tmp_path / "run", tmp_path / "strips") as s:
        monkeypatch.setattr(s, "_draw", lambda d, result, kept: seen.append(d.name))
        s.submit(tmp_path / "run" / "b", ahead_result("b"), None)  # nothing kept: nothing to draw from
        s.submit(tmp_path / "run" / "c", None, KEPT)  # no result: nothing to draw
        s.submit(tmp_path / "run" / "d", ahead_result("d"), KEPT)
    assert seen == ["d"]
    with pytest.raises(RuntimeError):  # closed on leaving the block
        s._pool.submit(print)


def test_close_shuts_the_background_thread_down(tmp_path):
    s = strips.StripsAhead(tmp_path / "run", tmp_path / "strips")
    s.close()
    with pytest.raises(RuntimeError):
        s._pool.submit(print)


@pytest.mark.parametrize("given, want", [(None, 2), (0, 1), (-3, 1), (5, 5), ("3", 3)])
def test_at_least_one_item_waits_with_its_frames(tmp_path, given, want):
    s = strips.StripsAhead(tmp_path, tmp_path) if given is None else strips.StripsAhead(tmp_path, tmp_path, given)
    assert s.max_waiting == want
    s.close()


class Pending(Future):
    """A future still running whose result the caller can wait for (recorded, at once)."""

    def __init__(self, name: str, log: list[str]):
        super().__init__()
        self.name, self.log = name, log

    def done(self) -> bool:
        return False

    def result(self, timeout=None):
        self.log.append(self.name)


def test_a_submit_waits_for_the_oldest_strips_beyond_max_waiting(tmp_path, monkeypatch):
    waited: list[str] = []
    s = strips.StripsAhead(tmp_path, tmp_path, max_waiting=2)
    monkeypatch.setattr(s, "_draw", lambda *a: None)
    finished: Future = Future()
    finished.set_result(None)
    s._waiting = [finished, Pending("p1", waited), Pending("p2", waited), Pending("p3", waited)]
    s.submit(tmp_path / "a", ahead_result(), KEPT)
    assert waited == ["p1", "p2"] and [getattr(f, "name", "new") for f in s._waiting] == ["p3", "new"]
    s.close()


# -- build: where, settings -------------------------------------------------------------------------------------------
def test_the_report_of_one_run_is_in_the_run_and_of_several_beside_the_first():
    assert build.default_out_dir([Path("/o/a")]) == Path("/o/a/eval/report")
    assert build.default_out_dir(["/o/a", "/p/b", "/q/c"]) == Path("/o/reports/a+b+c")


def test_the_settings_are_the_first_recorded_ones_else_the_defaults(tmp_path):
    assert build.settings_of([]) == {"bootstrap": {"n": 2000, "seed": 0}, "departure_deg": 30.0, "tolerance_deg": 30.0}
    its = [make_item(tmp_path, case="a"),
           make_item(tmp_path, case="b", settings={"bootstrap": {"n": 50, "seed": 3}, "departure_deg": 45.0,
                                                   "return_tolerances_deg": [15.0, 5.0]}),
           make_item(tmp_path, case="c", settings={"departure_deg": 60.0})]
    assert build.settings_of(its) == {"bootstrap": {"n": 50, "seed": 3}, "departure_deg": 45.0, "tolerance_deg": 15.0}
    assert build.settings_of(its[2:]) == {"bootstrap": {"n": 2000, "seed": 0}, "departure_deg": 60.0,
                                          "tolerance_deg": 30.0}
    assert build.settings_of([make_item(tmp_path, settings={"return_tolerances_deg": []})])["tolerance_deg"] == 30.0


# -- build: the report ------------------------------------------------------------------------------------------------
class Recorder:
    """Stand-ins for the slow parts of a build (charts, strips, video transcoding), recording their calls."""

    def __init__(self, mp: pytest.MonkeyPatch):
        self.calls: dict[str, list] = {"figures": [], "strips": [], "videos": []}
        mp.setattr(build, "_draw_figures", self.figures)
        mp.setattr(build, "draw_strips", self.strips)
        mp.setattr(build, "page_videos", self.videos)

    def figures(self, fdir, an, items, tables, pal):
        self.calls["figures"].append(fdir)
        return {"Fig": [fdir / "fig.png"]}, {}

    def strips(self, items, folder):
        self.calls["strips"].append(folder)
        return {}

    def videos(self, items, folder):
        self.calls["videos"].append(folder)
        return {}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A run of two videos (one model under FullKV, a static and a dynamic case); files only."""
    from tests.support.report_data import make_run

    return make_run(tmp_path_factory.mktemp("built"), models=("evoke",), contexts=("fullkv",), trajectories=("lrlr",),
                    cases=1, seeds=(1,), videos=False)


def small_analyses(root: Path) -> Analyses:
    its = [make_item(root, {PAPER: entry(PAPER, v)}, case=c) for c, v in (("a", 0.5), ("b", 0.7))]
    return Analyses(Study(its, {"n": 10, "seed": 0}, lambda p: p.name))


def test_a_report_without_figures_or_strips_draws_neither_and_goes_into_the_run(run_dir, monkeypatch):
    plain = Recorder(monkeypatch)
    a = build.build_report([run_dir], strips=False, figures=False)
    out = run_dir.resolve() / "eval" / "report"
    assert a["out_dir"] == str(out) and a["html"] == str(out / "index.html") and Path(a["html"]).exists()
    assert a["markdown"] == str(out / "report.md") and a["sources"] == str(out / "sources.json")
    assert a["items"] == 2 and a["figures"] == {}
    assert plain.calls == {"figures": [], "strips": [], "videos": [out / "videos"]}
    assert a["analyses"].study.boot == {"n": 200, "seed": 0}  # the evaluation's bootstrap


def test_a_report_draws_figures_and_strips_by_default_and_writes_every_table(run_dir, tmp_path, monkeypatch):
    full = Recorder(monkeypatch)
    b = build.build_report([str(run_dir)], tmp_path / "rep", boot={"n": 10, "seed": 1})
    out = (tmp_path / "rep").resolve()
    assert b["out_dir"] == str(out)
    assert full.calls == {"figures": [out / "figures"], "strips": [out / "strips"], "videos": [out / "videos"]}
    assert b["figures"] == {"Fig": [str(out / "figures" / "fig.png")]}
    assert b["analyses"].study.boot == {"n": 10, "seed": 1}
    # every table as Markdown (in full), CSV and LaTeX, report.md, tables.tex and sources.json
    tables = b["tables_built"]
    assert any(t.collapsed for t in tables)
    assert b["tables"] == {t.id: {"md": f"tables/{t.id}.md", "csv": f"tables/{t.id}.csv", "tex": f"tables/{t.id}.tex"}
                           for t in tables}
    for t in tables:
        assert (out / "tables" / f"{t.id}.md").read_text() == render.markdown(t, full=True)
        assert (out / "tables" / f"{t.id}.csv").read_bytes().decode() == render.to_csv(t)
        assert (out / "tables" / f"{t.id}.tex").read_text() == render.latex(t)
    assert (out / "tables.tex").read_text() == "\n".join(render.latex(t) for t in tables)
    md = (out / "report.md").read_text()
    assert md.startswith("# Study report\n\nRuns: synth; 2 evaluated videos. Oracle entries excluded")
    assert md.endswith("\n".join(render.markdown(t) for t in tables)) and "## Verdict" in md
    text = (out / "sources.json").read_text()
    src = json.loads(text)
    assert text.count("\n") <= 1 and src["base"] == "." and src["runs"] == [str(run_dir.resolve())]
    assert len(src["files"]) == len(set(src["files"])) and list(src["tables"]) == [t.id for t in tables]
    main = src["tables"]["main"]
    assert main["title"] == tables[0].title and main["index"] == tables[0].index
    cell = main["rows"][0]["cells"]["dynamic.overall[Qwen/Qwen3.8-27B]"]
    assert cell["mean"] == pytest.approx(0.75)
    rel = Path(os.path.relpath(run_dir.resolve() / "evoke/fullkv/seed-1/lrlr/dynamic_0/metrics.json", out)).as_posix()
    assert [src["files"][t["file"]] for u in cell["units"] for t in u["terms"]] == [rel]


def test_a_report_given_its_items_reads_nothing_else(run_dir, tmp_path, monkeypatch):
    from evaluate.reporting.collect import load_items

    Recorder(monkeypatch)
    items = load_items([run_dir.resolve()])[0][:1]
    c = build.build_report([run_dir], tmp_path / "rep", strips=False, figures=False, items=items)
    assert c["items"] == 1 and len(c["analyses"].study.items) == 1


def test_a_report_refuses_a_folder_that_is_not_a_run_and_a_run_with_nothing_evaluated(tmp_path):
    with pytest.raises(ReportError, match="no manifest.jsonl"):
        build.build_report([tmp_path], strips=False, figures=False)
    (tmp_path / "manifest.jsonl").write_text("")
    with pytest.raises(ReportError, match="no evaluated item in"):
        build.build_report([tmp_path], strips=False, figures=False)


def test_the_tables_are_the_studys_then_the_paper_comparison_then_each_human_study(tmp_path, monkeypatch):
    import evaluate.human.report
    from evaluate.reporting import paper
    from evaluate.reporting.tables import Builder

    an = small_analyses(tmp_path)
    loaded = []
    monkeypatch.setattr(evaluate.human.report, "study_tables",
                        lambda d, suffix: [Table(f"human_{d.name}{suffix}", "H", "", ["k"], [])])
    real = paper.load_paper_numbers
    monkeypatch.setattr(paper, "load_paper_numbers", lambda p=None: loaded.append(p) or real())
    ids = [t.id for t in build._all_tables(an.study, an, None, ())]
    assert ids == [t.id for t in Builder(an.study, an).all_tables()] + ["paper"] and loaded == [None]
    assert [t.id for t in build._all_tables(an.study, an, Path("p.json"), ["/x/a"])][-2:] == ["paper", "human_a"]
    assert loaded == [None, Path("p.json")]  # the packaged numbers, then the file given
    assert [t.id for t in build._all_tables(an.study, an, None, ["/x/a", "/x/b"])][-3:] == [
        "paper", "human_a_1", "human_b_2"]


def test_the_figures_are_drawn_into_their_folder_with_what_each_panel_drew(tmp_path, monkeypatch):
    from evaluate.reporting import plots

    an = small_analyses(tmp_path)
    calls = []
    monkeypatch.setattr(plots, "decay_curves", lambda an, pal, out, first: (calls.append(("decay", out, first))
                                                                           or ([out.with_suffix(".png")], [1])))
    monkeypatch.setattr(plots, "latency_vs_memory", lambda an, pal, out: (calls.append(("lvm", out))
                                                                          or ([out.with_suffix(".png")], [2])))
    monkeypatch.setattr(plots, "profile_bars", lambda main, pal, out: (calls.append(("profile", main.id, out))
                                                                       or ([out.with_suffix(".png")], [3])))
    monkeypatch.setattr(plots, "trajectory_previews", lambda items, fdir: {"lrlr": [fdir / "lrlr.png"]})
    pal = Palette(an.study.items)
    tables = [Table("other", "O", "", ["k"], []), Table("main", "M", "", ["k"], [])]
    figs, previews = build._draw_figures(tmp_path, an, an.study.items, tables, pal)
    assert calls == [("decay", tmp_path / "decay", an.verdict.metrics), ("lvm", tmp_path / "latency_vs_memory"),
                     ("profile", "main", tmp_path / "profile")]
    assert figs == {"Per-window decay": [tmp_path / "decay.png"],
                    "Latency vs memory on the metrics that separate the policies": [tmp_path / "latency_vs_memory.png"],
                    "Model profile": [tmp_path / "profile.png"]}
    assert previews == {"lrlr": [tmp_path / "lrlr.png"]}
    assert json.loads((tmp_path / "figures.json").read_text()) == {
        "colours": pal.colours, "markers": pal.markers, "figures": {"decay": [1], "latency_vs_memory": [2],
                                                                     "profile": [3]}}


# -- build: videos and strips -----------------------------------------------------------------------------------------
def test_the_page_plays_each_video_or_a_copy_beside_its_strip(tmp_path, monkeypatch):
    from evaluate.reporting import playable

    monkeypatch.setattr(playable, "page_video", lambda video, copy: PageVideo(copy, "c", "p", video.name))
    with_video, without = make_item(tmp_path, case="a"), make_item(tmp_path, case="b")
    (with_video.item_dir / "video.mp4").write_bytes(b"")
    got = build.page_videos([with_video, without], tmp_path / "videos")
    assert got == {("run", "m", "fullkv", 1, "lrlr", "a"): PageVideo(
        tmp_path / "videos" / "run__m__fullkv__seed-1__lrlr__a.mp4", "c", "p", "video.mp4")}


def five_rows(root: Path, case: str) -> Item:
    """Five metrics on five distinct frame sets (a strip shows four)."""
    return make_item(root, {f"environment.m{i}[x]": entry(f"environment.m{i}[x]", 0.5, per_revisit=[0.5],
                                                          return_frames=[i]) for i in range(5)}, case=case)


def test_strips_are_reused_while_newer_than_video_and_metrics_else_drawn_in_order(tmp_path, monkeypatch):
    folder = tmp_path / "strips"
    folder.mkdir()
    drawn_with = []

    def frame_strip(it, out_png, frames=None):
        drawn_with.append((it.case_id, out_png.name, frames.result()))
        return out_png, ["drawn"]

    monkeypatch.setattr(strips, "frame_strip", frame_strip)
    monkeypatch.setattr(strips, "strip_frames", lambda it: f"frames of {it.case_id}")
    its = {c: five_rows(tmp_path, c) for c in ("no_video", "equal", "newer", "between", "stale", "missing", "empty")}
    its["empty"] = make_item(tmp_path, {RPE: entry(RPE, 0.1)}, case="empty")
    times = {"equal": (100, 200, 200), "newer": (100, 200, 300), "between": (100, 300, 200), "stale": (300, 200, 250),
             "empty": (100, 100, 100)}  # metrics.json, video, strip [s]
    for case, it in its.items():
        if case == "no_video":
            continue
        for name, t in zip(("metrics.json", "video.mp4", "strip"), times.get(case, (100, 100, None))):
            p = strips.strip_path(folder, it) if name == "strip" else it.item_dir / name
            if t is not None:
                p.write_bytes(b"")
                os.utime(p, (t, t))
    out = build.draw_strips(list(its.values()), folder)
    key = {c: (it.run,) + it.key for c, it in its.items()}
    rows = [{"reference": 0, "frames": [i], "labels": ["V" if i < 2 else "D1" if i < 4 else "R1"],
             "metrics": [f"environment.m{i}[x]"]} for i in range(4)]
    assert out[key["no_video"]] is None and out[key["empty"]] is None
    assert out[key["equal"]] == (strips.strip_path(folder, its["equal"]), rows)
    assert out[key["newer"]] == (strips.strip_path(folder, its["newer"]), rows)
    assert drawn_with == [(c, strips.strip_path(folder, its[c]).name, f"frames of {c}")
                          for c in ("between", "stale", "missing")]
    assert all(out[key[c]] == (strips.strip_path(folder, its[c]), ["drawn"]) for c in ("between", "stale", "missing"))
    assert build.draw_strips([], folder) == {}

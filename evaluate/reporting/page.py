"""The static HTML page of a report (``index.html``): the verdict first, then the main table (the paper's Table 2),
the variants and the policy comparison, the figures with one colour key for all of them, the analyses' tables
(folded), and per case the videos side by side across models and policies with their revisit strips and links to
meta.json, controls, the context trace and metrics.json.

Tables sort by clicking a header (inline JS). Every link is relative and nothing is fetched from the network, so
the folder opens from a shared filesystem.
"""

from __future__ import annotations

import html
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from .analyses import Analyses
from .cells import Cell, fixed, fmt_parts, plural
from .collect import Item, PageKey
from .plots import Palette
from .release import release_html
from .render import cell_text
from .tables import Column, Table
from .verdict import answer, headline, latency_text, line_data

if TYPE_CHECKING:
    from .playable import PageVideo
    from .strips import Strip

_CSS = """body{font-family:system-ui,sans-serif;margin:1em auto;max-width:1600px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;
vertical-align:top}.nw{white-space:nowrap}span.ci{font-size:11px;color:#555}span.bb{font-weight:normal;font-size:11px}
div.tw{overflow-x:auto}p.part{margin:.6em 0 0}th{background:#f3f3f3;cursor:pointer;user-select:none}th.asc:after{content:" \\25B2"}
th.desc:after{content:" \\25BC"}td.best{font-weight:bold}td.second{text-decoration:underline}td.nc{color:#a33}
.cap{font-size:12px;color:#555;max-width:1100px}.fn{font-size:11px;color:#666}.fold{font-size:11px;color:#a33;
max-width:1300px;margin:.2em 0}.vid{display:inline-block;margin:4px;vertical-align:top;font-size:11px}.vid video{width:320px;
display:block;background:#000}.case{display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start;margin:6px 0;
font-size:11px}.case video{width:320px;display:block;background:#000}img.fig{max-width:100%;height:auto}
img.strip{max-width:100%;height:auto;display:block}.warn{color:#a33;font-weight:bold}nav a{margin-right:.8em}
section{margin-bottom:2em}h3{margin-bottom:.2em}#verdict{border:2px solid #2a6;padding:.3em 1em;border-radius:6px}
table.verdict td{white-space:normal}table.verdict td.sep{font-weight:bold}.swatch{display:inline-block;width:14px;
height:14px;margin:0 4px 0 12px;vertical-align:middle;border-radius:2px}p.answer{font-size:17px;font-weight:bold;
margin:.4em 0;max-width:1100px}details>summary{cursor:pointer;
font-weight:bold;margin:.4em 0}"""

# Click a header to sort by that column (numbers by their data-v value, text otherwise); a second click reverses.
_JS = """document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('th').forEach(function(th,ci){th.addEventListener('click',function(){
  var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows),asc=!th.classList.contains('asc');
  t.querySelectorAll('th').forEach(function(h){h.classList.remove('asc','desc')});
  th.classList.add(asc?'asc':'desc');
  rows.sort(function(a,b){var x=a.cells[ci],y=b.cells[ci],u=parseFloat(x.dataset.v),w=parseFloat(y.dataset.v);
   var r=(!isNaN(u)&&!isNaN(w))?u-w:(isNaN(u)&&!isNaN(w))?1:(!isNaN(u)&&isNaN(w))?-1:
    x.textContent.localeCompare(y.textContent);return asc?r:-r;});
  rows.forEach(function(r){body.appendChild(r)});});});});"""


#: above this many videos the page's videos load on play (preload='none') instead of on open
PRELOAD_LIMIT = 300
#: tables shown open, in this order, right after the verdict; every other table sits in "More tables"
UPFRONT = ("main", "variants", "context", "context_paired")


def _e(s: object) -> str:
    return html.escape(str(s), quote=True)


#: the widest part of a table [px], estimated from its text: a 1366-px screen less the page's margins (2 x 16 px), a
#: scrollbar and room for the estimate's error. A table wider than this is split into parts by its columns, each
#: part repeating the row keys (tests/evaluate/reporting/test_report_browser.py measures every part at 1366 px).
TABLE_BUDGET_PX = 1150
#: estimated advance of one character [px]: 12 px bold (headers), 12 px (values), 11 px (intervals, notes); generous
#: for system-ui fonts, whose digits are about 0.55 em
_PX_HEAD, _PX_BODY, _PX_SMALL = 7.6, 7.2, 6.6
#: a cell's horizontal padding and border [px]
_PAD_PX = 14
#: where a long header or key may break: after these characters (``departure.`` | ``return_visible``)
_BREAK_AFTER = ".[+/"


def _breakable(s: str) -> str:
    """``s`` escaped, with a line-break opportunity (``<wbr>``) after each of :data:`_BREAK_AFTER`: a metric key
    wraps inside its column instead of widening it. The text (``textContent``) is unchanged."""
    return "".join(_e(ch) + ("<wbr>" if ch in _BREAK_AFTER else "") for ch in s)


def _tokens(s: str) -> list[str]:
    """The pieces of ``s`` that never break (split at spaces and after :data:`_BREAK_AFTER`)."""
    out, cur = [], ""
    for ch in s:
        if ch == " ":
            out.append(cur)
            cur = ""
            continue
        cur += ch
        if ch in _BREAK_AFTER:
            out.append(cur)
            cur = ""
    return [x for x in out + [cur] if x]


def _header(label: str) -> tuple[str, float]:
    """A column header as HTML (the metric's name; its backbone and chance level on their own small lines) and its
    narrowest width [px]."""
    name, sep, rest = label.partition("[")
    lines = [(_breakable(name.strip()), _tokens(name), _PX_HEAD)]
    if sep:
        bb, close, tail = rest.partition("]")
        lines.append((f"<span class='bb'>[{_breakable(bb)}]</span>", _tokens(f"[{bb}]"), _PX_SMALL))
        if tail.strip():
            lines.append((f"<span class='bb'>{_e(tail.strip())}</span>", _tokens(tail), _PX_SMALL))
    width = max(len(t) * px for _, toks, px in lines for t in toks)
    return "<br>".join(h for h, _, _ in lines), width + _PAD_PX


def _cell(v: Any, note: dict[str, int]) -> tuple[str, float]:
    """A value as HTML (a Cell: its mean, then its interval and n in small type below) and its narrowest width."""
    if isinstance(v, Cell) and v.ok():
        head, rest = fmt_parts(v)
        parts = rest.rsplit(" ", 1) if rest.startswith("[") else [rest]  # "[lo, hi]" | "n=4" may wrap apart
        small = " ".join(f"<span class='nw'>{_e(x)}</span>" for x in parts if x)
        width = max([len(head) * _PX_BODY] + [len(x) * _PX_SMALL for x in parts])
        return (f"<span class='nw'>{_e(head)}</span><br><span class='ci'>{small}</span>" if small else
                f"<span class='nw'>{_e(head)}</span>"), width + _PAD_PX
    text = cell_text(v, note)
    return _breakable(text), max((len(t) * _PX_BODY for t in _tokens(text)), default=0.0) + _PAD_PX


def column_parts(t: Table, cols: list[Column], budget: float = TABLE_BUDGET_PX) -> list[list[Column]]:
    """``cols`` in order, cut into parts whose estimated width (the row-key columns, repeated in each part, plus
    the part's columns) fits ``budget`` [px]; one part when the whole table fits."""
    note = t.footnotes()
    key_w = sum(max([_header(h)[1]] + [_cell(str(k[j]), note)[1] for k, _ in t.rows]) for j, h in enumerate(t.index))
    parts: list[list[Column]] = [[]]
    width = key_w
    for c in cols:
        w = max([_header(c.label + c.arrow)[1]] + [_cell(cells.get(c.key), note)[1] for _, cells in t.rows])
        if parts[-1] and width + w > budget:
            parts.append([])
            width = key_w
        parts[-1].append(c)
        width += w
    return parts


def _table_part(t: Table, cols: list[Column], note: dict[str, int], ranks: dict[tuple[int, str], int]) -> str:
    """One ``<table>`` of ``t``: its row keys and ``cols``."""
    P = [f"<div class='tw'><table class='sortable' data-table='{_e(t.id)}'><thead><tr>" +
         "".join(f"<th>{_header(h)[0]}</th>" for h in t.index) +
         "".join(f"<th>{_header(c.label + c.arrow)[0]}</th>" for c in cols) + "</tr></thead><tbody>"]
    for i, (key, cells) in enumerate(t.rows):
        tds = [f"<td>{_breakable(str(k))}</td>" for k in key]
        for c in cols:
            v = cells.get(c.key)
            cls, dv = [], ""
            if isinstance(v, Cell):
                if v.ok():
                    dv = f" data-v='{v.mean:.9g}'"
                else:
                    cls.append("nc")
            elif isinstance(v, (int, float)):
                dv = f" data-v='{v}'"
            r = ranks.get((i, c.key))
            if r:
                cls.append("best" if r == 1 else "second")
                dv += f" data-col='{_e(c.key)}'"  # what a marked cell is best in (browser tests read it)
            tds.append(f"<td class='{' '.join(cls)}'{dv}>{_cell(v, note)[0]}</td>")
        P.append("<tr>" + "".join(tds) + "</tr>")
    P.append("</tbody></table></div>")
    return "\n".join(P)


def table_html(t: Table, downloads: dict[str, str]) -> str:
    """A table's section: title, caption, downloads, the table (in parts that each fit a 1366-px screen:
    :func:`column_parts`), the folded columns, the footnotes."""
    note = t.footnotes()
    ranks = t.ranks()
    P = [f"<section id='t-{_e(t.id)}'><h3>{_e(t.title)}</h3><p class='cap'>{_e(t.caption)}</p>"]
    if downloads:
        P.append("<p class='fn'>" + " ".join(f"<a href='{_e(v)}'>{_e(k)}</a>" for k, v in downloads.items()) + "</p>")
    if t.collapsed:
        P.append(f"<p class='fold' data-collapsed='{_e(t.id)}'>{_e(t.collapsed)} The full table is in the "
                 "downloads above.</p></section>")
        return "\n".join(P)
    P += [f"<p class='cap'><b>{_e(n)}</b></p>" for n in t.notes]
    if t.rows:
        parts = column_parts(t, t.shown_columns)
        for k, cols in enumerate(parts):
            if len(parts) > 1:
                P.append(f"<p class='fn part'>Part {k + 1} of {len(parts)}: {plural(len(cols), 'column')}"
                         + (" (the columns that separate first)" if k == 0 and ranks else "") + "</p>")
            P.append(_table_part(t, cols, note, ranks))
    else:
        P.append("<p>(no rows)</p>")
    folded = t.folded()
    if folded:
        P.append(f"<ul class='fold' data-folded='{_e(t.id)}'>" + "".join(
            f"<li>Not computed in any row: <b>{_e(', '.join(cols))}</b>: {_e(reason)}</li>" for reason, cols in folded)
            + "</ul>")
    if note:
        P.append(f"<details class='fn'><summary>{plural(len(note), 'footnote')}: why cells are n/c</summary>" +
                 "<br>".join(f"[{k}] {_e(r)}" for r, k in note.items()) + "</details>")
    if ranks:
        P.append("<div class='fn'>Best per column in bold where its paired 95 % interval separates it from every "
                 "other row (as in the verdict), second best underlined likewise; unmarked columns do not "
                 "separate.</div>")
    P.append("</section>")
    return "\n".join(P)


def verdict_html(an: Analyses) -> str:
    """The verdict section: per comparison a table of the separating metrics (best first, paired intervals)."""
    v = an.verdict
    P = ["<section id='verdict'><h2>Verdict</h2>"]
    if not v.comparisons:
        s = an.study
        P.append(f"<p>Nothing to compare: {_e(', '.join(sorted({it.model for it in s.items})))} under "
                 f"{_e(', '.join(sorted({it.context for it in s.items})))} ({plural(len(s.items), 'video')}), no other policy "
                 "or model on the same videos. Run several (<code>-m context=fullkv,sliding,fov</code>) for a "
                 "verdict.</p>")
        P += [f"<p class='cap' data-headline='1'>{_e(x)}</p>" for x in headline(an)]
        P.append("</section>")
        return "\n".join(P)
    P.append("<p class='cap'>Per metric that separates two contenders (the paired 95 % interval, bootstrap over "
             "matched videos, excludes 0, and the difference reaches the metric's resolution, 0.01 on a [0, 1] "
             "score): the contenders best first (≫ by ten resolutions or more, &gt; separated, ≈ not), the best "
             "one's speedup vs FullKV and every paired difference (separated ones in bold). [variant]: not the "
             "paper's backbone (see the variants table). No interval below 3 pairs. Chance: what a video with no "
             "memory of the content scores.</p>")
    answers = [(c, a) for c in v.comparisons if (a := answer(an, c))]
    if answers:  # the answer first, in words, before the tables that back it
        P.insert(1, "".join(f"<p class='answer' data-answer='{_e(c.title)}'>{_e(a)}</p>" for c, a in answers))
    for i, c in enumerate(v.comparisons):
        lines = [x for x in v.lines if x.comparison is c]
        P.append(f"<h3>{_e(c.header)}</h3>")
        if lines:
            P.append(f"<table class='verdict' data-comparison='{_e(c.title)}'><thead><tr><th>metric</th>"
                     "<th>ranking</th><th>best</th><th>paired differences</th></tr></thead><tbody>")
            for x in lines:
                d = line_data(x)
                chain = d["ranking"][0]["name"] + f" {fixed(d['ranking'][0]['mean'])}"
                for rel, r in zip(d["relations"], d["ranking"][1:]):
                    chain += f" {rel} {r['name']} {fixed(r['mean'])}"
                diffs = "<br>".join((f"<span class='sep'><b>{_e(e['a'])} − {_e(e['b'])} {_e(e['text'])}</b></span>"
                                     if e["separated"] else f"{_e(e['a'])} − {_e(e['b'])} {_e(e['text'])}")
                                    for e in d["diffs"])
                sp = f" (speedup {_e(d['best_speedup'])})" if d["best_speedup"] else ""
                if c.kind == "policies" and d["best"] == "fullkv":
                    sp = " (the baseline)"
                tag = "" if d["paper_metric"] else " <span class='fn'>[variant]</span>"
                ch = f"<br><span class='fn'>{_e(d['chance'])}</span>" if d["chance"] else ""
                arrow = "↑" if d["direction"] == "higher" else "↓"
                P.append(f"<tr data-metric='{_e(x.key)}' data-best='{_e(d['best'])}'><td>{_e(x.key)} {arrow}{tag}"
                         f"{ch}</td><td>{_e(chain)}</td><td>{_e(d['best'])}{sp}</td><td>{diffs}</td></tr>")
            P.append("</tbody></table>")
        else:
            P.append("<p>No metric separates them (every paired 95 % interval includes 0, or fewer than 3 pairs).</p>")
        if v.quiet.get(i):
            P.append(f"<p class='fn'>Not separating: {_e(', '.join(v.quiet[i]))}</p>")
        lat = latency_text(c)
        if lat:
            P.append(f"<p class='fn'>{_e(lat)}</p>")
    P.append("</section>")
    return "\n".join(P)


def _figure_html(name: str, paths: list[Path], rel: Callable[[Path], str]) -> str:
    if not paths:
        return ""
    png = [p for p in paths if p.suffix == ".png"][0]
    alt = " ".join(f"<a href='{_e(rel(p))}'>{p.suffix[1:]}</a>" for p in paths)
    return (f"<h3>{_e(name)}</h3><a href='{_e(rel(png))}'><img class='fig' src='{_e(rel(png))}' alt='{_e(name)}'>"
            f"</a><p class='fn'>{alt} (click the figure for full size)</p>")


def write_page(out_dir: Path, an: Analyses, tables: list[Table], figures: dict[str, list[Path]],
               previews: dict[str, list[Path]], strips: dict[PageKey, Optional[Strip]], runs: list[Path],
               skipped: dict[str, int], downloads: dict[str, dict[str, str]], pal: Palette,
               videos: Optional[dict[PageKey, PageVideo]] = None) -> Path:
    """Write ``out_dir/index.html`` atomically. ``strips``: (run, *item key) -> (png, rows drawn) or None.
    ``videos``: (run, *item key) -> :class:`~evaluate.reporting.playable.PageVideo` (what the player plays, and a
    note beside it); items without one play their own ``video.mp4``."""
    from harness.io import write_text

    items: list[Item] = an.study.items

    def rel(p: Path) -> str:
        return Path(os.path.relpath(p, out_dir)).as_posix()

    by_id = {t.id: t for t in tables}
    upfront = [by_id[i] for i in UPFRONT if i in by_id and (by_id[i].rows or i == "main")]
    rest = [t for t in tables if t.id not in UPFRONT]
    P = [_head_html(runs, len(items), skipped, upfront), verdict_html(an), release_html(runs)]
    for t in upfront:
        P.append(table_html(t, downloads.get(t.id, {})))
    P.append(_figures_html(figures, previews, pal, rel))
    P.append("</section><section id='more'><h2>More tables</h2><p class='cap'>Per trajectory, multi-revisit, "
             "cross-axis, coverage, the dynamic decomposition, group summaries and the paper's numbers beside "
             "ours. Click to open.</p>")
    for t in rest:
        summary = f"{t.title}: {t.collapsed}" if t.collapsed else f"{t.title} ({plural(len(t.rows), 'row')})"
        P.append(f"<details data-details='{_e(t.id)}'><summary>{_e(summary)}</summary>"
                 + table_html(t, downloads.get(t.id, {})) + "</details>")
    P.append("</section><section id='cases'><h2>Cases</h2><p class='cap'>Per case, trajectory and seed: the videos "
             "side by side across models and context policies, each with its revisit strip (per row, a metric's "
             "own reference frame beside the frame it scored in each revisit window, with its scores).</p>")
    P += _cases_html(items, strips, videos or {}, rel)
    P.append(f"</section><script>{_JS}</script></body></html>")
    out = out_dir / "index.html"
    write_text(out, "\n".join(P))
    return out


def _head_html(runs: list[Path], n_items: int, skipped: dict[str, int], upfront: list[Table]) -> str:
    """The page's head, title, what it holds (runs, videos, what was skipped and left out) and its navigation."""
    return "\n".join([
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>WorldMem study report</title>",
        f"<style>{_CSS}</style></head><body>", "<h1>WorldMem study report</h1>",
        "<p class='cap'>Runs: " + ", ".join(f"<code>{_e(r.name)}</code>" for r in runs) +
        f". {plural(n_items, 'evaluated video')}; skipped: {skipped.get('not_done', 0)} not done, "
        f"{skipped.get('not_evaluated', 0)} without metrics.json, {skipped.get('duplicate', 0)} already in an earlier "
        "run (same model, context, seed, trajectory and case; the first run given wins). Oracle entries (the "
        "reference model's own geometry) are excluded from every table and plot, and dynamic cases from the "
        "static-content metrics. n/c = not computed (reason in the footnote). Every number links back to its "
        "metrics.json through <a href='sources.json'>sources.json</a>.</p>",
        "<nav><a href='#verdict'>verdict</a>" + "".join(f"<a href='#t-{_e(t.id)}'>{_e(t.id)}</a>" for t in upfront)
        + "<a href='#figures'>figures</a><a href='#more'>more tables</a><a href='#cases'>cases</a></nav>"])


def _figures_html(figures: dict[str, list[Path]], previews: dict[str, list[Path]], pal: Palette,
                  rel: Callable[[Path], str]) -> str:
    """The figures section (left open): the colour key, every figure, the trajectory previews."""
    P = ["<section id='figures'><h2>Figures</h2><p class='cap' id='colour-key'>Colours (the same in every "
         "figure): " + "".join(f"<span class='swatch' data-name='{_e(n)}' data-colour='{_e(pal.colours[n])}' "
                               f"style='background:{_e(pal.colours[n])}'></span>{_e(n)}" for n in pal.names)
         + "</p>"]
    for name, paths in figures.items():
        P.append(_figure_html(name, paths, rel))
    if previews:
        P.append("<h3>Trajectories</h3>")
        for name, paths in previews.items():
            P.append(f"<div class='vid' data-preview='{_e(name)}'>{_e(name)}<br><a href='{_e(rel(paths[0]))}'>"
                     f"<img class='fig' src='{_e(rel(paths[0]))}' alt='{_e(name)}'></a></div>")
    return "\n".join(P)


def _cases_html(items: list[Item], strips: dict[PageKey, Optional[Strip]], videos: dict[PageKey, PageVideo],
                rel: Callable[[Path], str]) -> list[str]:
    """Per case, trajectory and seed, the videos side by side (:func:`_video_html`)."""
    # a study of thousands of videos would make every one fetch its metadata on open: load on play instead
    preload = "metadata" if len(items) <= PRELOAD_LIMIT else "none"
    by_case: dict[str, dict[tuple[str, int], list[Item]]] = defaultdict(lambda: defaultdict(list))
    for it in items:
        by_case[it.case_id][(it.trajectory, it.seed)].append(it)
    P = []
    for case, groups in sorted(by_case.items()):
        P.append(f"<h3 id='case-{_e(case)}'>{_e(case)}</h3>")
        for (traj, seed), its in sorted(groups.items()):
            P.append(f"<div><b>{_e(traj)}</b>, seed {seed}<br>")
            for it in sorted(its, key=lambda i: (i.model, i.context, i.run)):
                key = (it.run,) + it.key
                P.append(_video_html(it, strips.get(key), videos.get(key), preload, rel))
            P.append("</div>")
    return P


def _video_html(it: Item, strip: Optional[Strip], pv: Optional[PageVideo], preload: str,
                rel: Callable[[Path], str]) -> str:
    """One video's player (with a note on what it plays), its files' links and its revisit strip beside it."""
    d = it.item_dir
    links = [("meta.json", d / "meta.json"), ("controls", d / "controls"),
             ("context trace", d / "context_trace.json"), ("metrics.json", d / "metrics.json")]
    lk = " · ".join(f"<a href='{_e(rel(p))}'>{_e(n)}</a>" for n, p in links if p.exists())
    if strip:
        png, rows = strip
        st = (f"<a href='{_e(rel(png))}'><img class='strip' src='{_e(rel(png))}' alt='revisit strip' "
              f"data-item='{_e(rel(it.metrics_path))}' data-strip='{_e(json.dumps(rows))}'></a>")
    else:
        st = "<span class='fn'>(no revisit frames recorded)</span>"
    src = pv.src if pv is not None else d / "video.mp4"
    note = ""
    if pv is not None and pv.note:
        note = (f"<div class='{'warn' if pv.warning else 'fn'}' data-video-note='{_e(pv.codec)}' "
                f"style='max-width:320px'>{_e(pv.note)}</div>")
    # the strip beside the player at its own size (click: full size); it wraps below on a narrow screen
    return (f"<div class='case'><div><b>{_e(it.model)}</b> / {_e(it.context)} "
            f"<span class='fn'>({_e(it.run)})</span><video controls muted preload='{preload}' "
            f"src='{_e(rel(src))}'></video>{note}{lk}</div><div>{st}</div></div>")

"""The static HTML report: tables (sortable by clicking a header; inline JS), figures, and per case the videos side
by side across models and policies with their revisit strips and links to meta.json, controls, the context trace
and metrics.json. Every link is relative and nothing is fetched from the network, so the folder opens from a
shared filesystem."""

from __future__ import annotations

import html
import os
from collections import defaultdict
from pathlib import Path
from typing import Optional

from .cells import Cell
from .collect import Item
from .render import cell_text
from .tables import Table

_CSS = """body{font-family:system-ui,sans-serif;margin:1em auto;max-width:1600px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;
vertical-align:top}td{white-space:nowrap}th{background:#f3f3f3;cursor:pointer;user-select:none}th.asc:after{content:" \\25B2"}
th.desc:after{content:" \\25BC"}td.best{font-weight:bold}td.second{text-decoration:underline}td.nc{color:#a33}
.cap{font-size:12px;color:#555;max-width:1100px}.fn{font-size:11px;color:#666}.vid{display:inline-block;margin:4px;
vertical-align:top;font-size:11px}.vid video{width:320px;display:block;background:#000}img.fig{max-width:100%}
img.strip{max-width:100%;display:block}nav a{margin-right:.8em}section{margin-bottom:2em}h3{margin-bottom:.2em}"""

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


def _e(s: object) -> str:
    return html.escape(str(s), quote=True)


def table_html(t: Table, downloads: dict[str, str]) -> str:
    note = t.footnotes()
    ranks = t.ranks()
    P = [f"<section id='t-{_e(t.id)}'><h3>{_e(t.title)}</h3><p class='cap'>{_e(t.caption)}</p>"]
    P += [f"<p class='cap'><b>{_e(n)}</b></p>" for n in t.notes]
    if downloads:
        P.append("<p class='fn'>" + " ".join(f"<a href='{_e(v)}'>{_e(k)}</a>" for k, v in downloads.items()) + "</p>")
    if t.rows:
        P.append(f"<div style='overflow-x:auto'><table class='sortable' data-table='{_e(t.id)}'><thead><tr>" +
                 "".join(f"<th>{_e(h)}</th>" for h in t.index + [c.label + c.arrow for c in t.columns]) +
                 "</tr></thead><tbody>")
        for i, (key, cells) in enumerate(t.rows):
            tds = [f"<td>{_e(k)}</td>" for k in key]
            for c in t.columns:
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
                tds.append(f"<td class='{' '.join(cls)}'{dv}>{_e(cell_text(v, note))}</td>")
            P.append("<tr>" + "".join(tds) + "</tr>")
        P.append("</tbody></table></div>")
    else:
        P.append("<p>(no rows)</p>")
    if note:
        P.append(f"<details class='fn'><summary>{len(note)} footnote(s): why cells are n/c</summary>" +
                 "<br>".join(f"[{k}] {_e(r)}" for r, k in note.items()) + "</details>")
    if ranks:
        P.append("<div class='fn'>Best per column in bold, second best underlined.</div>")
    P.append("</section>")
    return "\n".join(P)


def write_page(out_dir: Path, items: list[Item], tables: list[Table], figures: dict[str, list[Path]],
               previews: dict[str, list[Path]], strips: dict[tuple, Optional[Path]], runs: list[Path],
               skipped: dict[str, int], downloads: dict[str, dict[str, str]]) -> Path:
    """Write ``out_dir/index.html`` atomically."""
    from harness.io import write_text

    def rel(p: Path) -> str:
        return Path(os.path.relpath(p, out_dir)).as_posix()

    P = ["<!doctype html><html lang='en'><head><meta charset='utf-8'><title>WorldMem study report</title>",
         f"<style>{_CSS}</style></head><body>", "<h1>WorldMem study report</h1>",
         "<p class='cap'>Runs: " + ", ".join(f"<code>{_e(r.name)}</code>" for r in runs) +
         f". {len(items)} evaluated video(s); skipped: {skipped.get('not_done', 0)} not done, "
         f"{skipped.get('not_evaluated', 0)} without metrics.json, {skipped.get('duplicate', 0)} already in an earlier "
         "run (same model, context, seed, trajectory and case; the first run given wins). Oracle entries (the reference model's own "
         "geometry) are excluded from every table and plot. n/c = not computed (reason in the footnote). "
         "Every number links back to its metrics.json through <a href='sources.json'>sources.json</a>.</p>",
         "<nav>" + "".join(f"<a href='#t-{_e(t.id)}'>{_e(t.id)}</a>" for t in tables) +
         "<a href='#figures'>figures</a><a href='#cases'>cases</a></nav>"]
    for t in tables:
        P.append(table_html(t, downloads.get(t.id, {})))
    P.append("<section id='figures'><h2>Figures</h2>")
    for name, paths in figures.items():
        if paths:
            png = [p for p in paths if p.suffix == ".png"][0]
            alt = " ".join(f"<a href='{_e(rel(p))}'>{p.suffix[1:]}</a>" for p in paths)
            P.append(f"<h3>{_e(name)}</h3><img class='fig' src='{_e(rel(png))}' alt='{_e(name)}'><p class='fn'>{alt}"
                     "</p>")
    if previews:
        P.append("<h3>Trajectories</h3>")
        for name, paths in previews.items():
            P.append(f"<div class='vid'>{_e(name)}<br><img class='fig' style='width:480px' "
                     f"src='{_e(rel(paths[0]))}' alt='{_e(name)}'></div>")
    P.append("</section><section id='cases'><h2>Cases</h2><p class='cap'>Per case, trajectory and seed: the videos "
             "side by side across models and context policies, each with its revisit strip (frame 0 beside the "
             "chosen return frame of every revisit, with the per-revisit scores).</p>")
    # a study of thousands of videos would make every one fetch its metadata on open: load on play instead
    preload = "metadata" if len(items) <= PRELOAD_LIMIT else "none"
    by_case: dict[str, dict[tuple, list[Item]]] = defaultdict(lambda: defaultdict(list))
    for it in items:
        by_case[it.case_id][(it.trajectory, it.seed)].append(it)
    for case, groups in sorted(by_case.items()):
        P.append(f"<h3 id='case-{_e(case)}'>{_e(case)}</h3>")
        for (traj, seed), its in sorted(groups.items()):
            P.append(f"<div><b>{_e(traj)}</b>, seed {seed}<br>")
            for it in sorted(its, key=lambda i: (i.model, i.context, i.run)):
                d = it.item_dir
                links = [("meta.json", d / "meta.json"), ("controls", d / "controls"),
                         ("context trace", d / "context_trace.json"), ("metrics.json", d / "metrics.json")]
                lk = " · ".join(f"<a href='{_e(rel(p))}'>{_e(n)}</a>" for n, p in links if p.exists())
                strip = strips.get((it.run,) + it.key)
                st = f"<a href='{_e(rel(strip))}'><img class='strip' src='{_e(rel(strip))}' alt='revisit strip'></a>" \
                    if strip else "<span class='fn'>(no return frames recorded)</span>"
                P.append(f"<div class='vid'><b>{_e(it.model)}</b> / {_e(it.context)} "
                         f"<span class='fn'>({_e(it.run)})</span><video controls muted preload='{preload}' "
                         f"src='{_e(rel(d / 'video.mp4'))}'></video>{lk}<div style='width:320px'>{st}</div></div>")
            P.append("</div>")
    P.append(f"</section><script>{_JS}</script></body></html>")
    out = out_dir / "index.html"
    write_text(out, "\n".join(P))
    return out

"""Open a report in a real headless Chromium and check it: every video loads and has a duration, the tables
render (and sort on a header click), no console error appears, every table fits a 1366-px and a 1920-px screen
without horizontal scrolling; save a screenshot.

``python -m evaluate.reporting.browser <index.html> <screenshot.png> [<element id>]`` prints the findings as JSON and exits 1 when a
check fails. Needs playwright (``pip install playwright``) and a Chromium executable (Debian: ``apt-get install
chromium``; playwright's own browser download is not needed).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from playwright.sync_api import Browser

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome", "headless_shell")


def find_chromium() -> Optional[str]:
    """A Chromium executable: ``$CHROMIUM`` or the first of :data:`CANDIDATES` on PATH."""
    env = os.environ.get("CHROMIUM")
    if env and Path(env).exists():
        return env
    for name in CANDIDATES:
        p = shutil.which(name)
        if p:
            return p
    return None


_PROBE = """async () => {
  const vids = Array.from(document.querySelectorAll('video'));
  vids.forEach(v => { if (v.preload === 'none') { v.preload = 'metadata'; v.load(); } });  // large pages
  await Promise.all(vids.map(v => v.readyState >= 1 ? null : new Promise(res => {
    v.addEventListener('loadedmetadata', res, {once: true}); v.addEventListener('error', res, {once: true});
    setTimeout(res, 20000); })));
  return {videos: vids.map(v => ({src: v.getAttribute('src'), duration: v.duration, error: v.error && v.error.code,
                                   readyState: v.readyState})),
          tables: Array.from(document.querySelectorAll('table.sortable')).map(t => ({id: t.dataset.table,
                   rows: t.tBodies[0].rows.length, cols: t.tHead.rows[0].cells.length})),
          images: Array.from(document.querySelectorAll('img')).map(i => ({src: i.getAttribute('src'),
                   ok: i.complete && i.naturalWidth > 0})),
          // the layout: where each section starts (px from the top), the verdict, strips and colour key
          sections: Array.from(document.querySelectorAll('section[id]')).map(s => ({id: s.id,
                   top: s.getBoundingClientRect().top + window.scrollY, visible: s.offsetParent !== null})),
          verdict: Array.from(document.querySelectorAll('#verdict tr[data-metric]')).map(r => ({
                   metric: r.dataset.metric, best: r.dataset.best, text: r.textContent})),
          strips: Array.from(document.querySelectorAll('img.strip')).map(i => ({item: i.dataset.item,
                   rows: JSON.parse(i.dataset.strip || '[]')})),
          swatches: Array.from(document.querySelectorAll('#colour-key .swatch')).map(s => ({name: s.dataset.name,
                   colour: getComputedStyle(s).backgroundColor})),
          folded: Array.from(document.querySelectorAll('ul.fold')).map(u => ({table: u.dataset.folded,
                   items: u.children.length, text: u.textContent})),
          // emphasised cells: their table, column (metric key), rank and the row's leading key cells
          emphasis: Array.from(document.querySelectorAll('table.sortable td.best, table.sortable td.second')).map(
                   td => ({table: td.closest('table').dataset.table, col: td.dataset.col,
                           rank: td.classList.contains('best') ? 1 : 2,
                           row: Array.from(td.parentElement.cells).slice(0, 2).map(c => c.textContent),
                           weight: getComputedStyle(td).fontWeight})),
          answer: Array.from(document.querySelectorAll('#verdict p.answer')).map(p => ({text: p.textContent,
                   top: p.getBoundingClientRect().top + window.scrollY}))};
}"""

_SORT = """() => {
  const t = Array.from(document.querySelectorAll('table.sortable')).find(t => t.tBodies[0].rows.length > 1);
  if (!t) return null;
  const col = Array.from(t.tBodies[0].rows[0].cells).findIndex(c => c.dataset.v !== undefined);
  if (col < 0) return null;
  const read = () => Array.from(t.tBodies[0].rows).map(r => parseFloat(r.cells[col].dataset.v));
  t.tHead.rows[0].cells[col].click(); const asc = read();
  t.tHead.rows[0].cells[col].click(); const desc = read();
  return {table: t.dataset.table, col: col, asc: asc, desc: desc};
}"""


#: the command-line switches of every Chromium this module starts (headless in a container: no sandbox, no GPU)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required"]


@contextmanager
def chromium(executable: Optional[str] = None) -> Iterator[Browser]:
    """A headless Chromium (playwright's ``Browser``), closed on exit. Several checks may share one: starting the
    browser is most of a check's time."""
    from playwright.sync_api import sync_playwright

    exe = executable or find_chromium()
    if exe is None:
        raise FileNotFoundError("no Chromium executable found (apt-get install chromium, or set $CHROMIUM)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


# Every table's box once every <details> is open: its width, how far its right edge reaches, and how much wider
# its content is than the box it scrolls in (0: no horizontal scrolling); and the page's own overflow.
_TABLE_FIT = """() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const doc = document.documentElement;
  return {viewport: window.innerWidth, page_overflow: doc.scrollWidth - doc.clientWidth,
          tables: Array.from(document.querySelectorAll('table')).map((t, i) => {
            const r = t.getBoundingClientRect(), box = t.parentElement;
            return {id: t.dataset.table || (t.classList.contains('verdict') ? 'verdict' : 'table-' + i),
                    part: Array.from(document.querySelectorAll(`table[data-table="${t.dataset.table}"]`)).indexOf(t),
                    cols: t.rows.length ? t.rows[0].cells.length : 0, width: r.width, left: r.left, right: r.right,
                    overflow: Math.max(t.scrollWidth - t.clientWidth, box.scrollWidth - box.clientWidth)};
          }),
          // the bold (best) cells of the sortable tables: where they are, so a test can see them on screen
          best: Array.from(document.querySelectorAll('table.sortable td.best')).map(td => ({
            table: td.closest('table').dataset.table, col: td.dataset.col, right: td.getBoundingClientRect().right,
            row: Array.from(td.parentElement.cells).slice(0, 2).map(c => c.textContent)}))};
}"""


def table_fit(html: Path, widths: Sequence[int] = (1366, 1920), browser: Optional[Browser] = None,
              height: int = 768) -> dict[int, dict[str, Any]]:
    """Open ``html`` at each viewport width (every ``<details>`` opened, so folded tables count too) and return,
    per width, ``{viewport, page_overflow, tables: [{id, part, cols, width, left, right, overflow}], best: [{table,
    col, right, row}]}`` (``best``: the bold cells): a table fits when ``overflow`` is 0 and ``right`` is within
    the viewport."""
    if browser is None:
        with chromium() as b:
            return table_fit(html, widths, b, height)
    out: dict[int, dict[str, Any]] = {}
    for w in widths:
        page = browser.new_page(viewport={"width": w, "height": height})
        try:
            page.goto(Path(html).resolve().as_uri())
            page.wait_for_load_state("load")
            out[w] = page.evaluate(_TABLE_FIT)
        finally:
            page.close()
    return out


def misfits(fit: dict[int, dict[str, Any]]) -> list[str]:
    """The tables of :func:`table_fit`'s result that need horizontal scrolling, as sentences (empty: all fit)."""
    bad = []
    for w, r in fit.items():
        if r["page_overflow"] > 0:
            bad.append(f"at {w} px the page scrolls sideways by {r['page_overflow']} px")
        for t in r["tables"]:
            if t["overflow"] > 0 or t["right"] > r["viewport"] + 0.5:
                bad.append(f"at {w} px table {t['id']} (part {t['part'] + 1}, {t['cols']} columns) is "
                           f"{t['width']:.0f} px wide, scrolls by {t['overflow']} px, right edge {t['right']:.0f}")
    return bad


def check_page(html: Path, screenshot: Path, executable: Optional[str] = None, timeout_s: float = 60,
               fragment: str = "", browser: Optional[Browser] = None) -> dict[str, Any]:
    """Load ``html`` (file://) and return ``{videos, tables, images, sections, verdict, strips, swatches, folded,
    emphasis, answer, sort, console_errors, page_errors}``; the screenshot shows the viewport at ``#fragment`` (top
    of the page when empty). ``browser``: a running :func:`chromium` to use (else one is started)."""
    if browser is None:
        with chromium(executable) as b:
            return check_page(html, screenshot, executable, timeout_s, fragment, b)
    errors: list[str] = []
    page_errors: list[str] = []
    failed: list[str] = []
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: page_errors.append(str(e)))
        # media elements cancel their own range requests (net::ERR_ABORTED); anything else is a broken link
        page.on("requestfailed", lambda r: None if "ERR_ABORTED" in (r.failure or "") else
                failed.append(f"{r.url} ({r.failure})"))
        page.goto(Path(html).resolve().as_uri(), timeout=timeout_s * 1000)
        page.wait_for_load_state("load", timeout=timeout_s * 1000)
        info: dict[str, Any] = page.evaluate(_PROBE)  # the probe's JSON
        info["sort"] = page.evaluate(_SORT)
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        if fragment:
            page.evaluate("f => document.getElementById(f).scrollIntoView()", fragment)
        page.screenshot(path=str(screenshot), full_page=False)
    finally:
        page.close()
    info.update(console_errors=errors, page_errors=page_errors, failed_requests=failed, screenshot=str(screenshot))
    return info


def problems(info: dict[str, Any]) -> list[str]:
    """What failed, as sentences (empty when the page is fine)."""
    out = []
    for v in info["videos"]:
        if v["error"] or not (v["duration"] and v["duration"] > 0):
            out.append(f"video {v['src']} did not load (error {v['error']}, duration {v['duration']})")
    if not info["tables"] or not any(t["rows"] for t in info["tables"]):
        out.append("no table rendered")
    out += [f"image {i['src']} did not load" for i in info["images"] if not i["ok"]]
    out += [f"console error: {e}" for e in info["console_errors"]]
    out += [f"page error: {e}" for e in info["page_errors"]]
    out += [f"request failed: {u}" for u in info["failed_requests"]]
    return out


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    with chromium() as b:
        info = check_page(Path(argv[0]), Path(argv[1]), fragment=argv[2] if len(argv) == 3 else "", browser=b)
        bad = problems(info) + misfits(table_fit(Path(argv[0]), browser=b))
    print(json.dumps({"videos": len(info["videos"]), "tables": len(info["tables"]), "problems": bad,
                      "screenshot": info["screenshot"]}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The official release on a report page: what an imported run holds and what its trajectory check found.

Read from ``<run>/release/import.json`` (:func:`evaluate.release.importer.import_release`) and
``<run>/release/check.json`` (:func:`evaluate.release.check.check_run`); a run that is not an imported release (and
was never checked) adds nothing.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def release_html(runs: list[Path]) -> str:
    """A section per run with a release import or check: rows, videos, skipped rows by reason, the check's
    verdict lines. Empty when no run has either."""
    from evaluate.release.check import verdict_lines

    parts = []
    for run in runs:
        imp = _read(Path(run) / "release" / "import.json")
        chk = _read(Path(run) / "release" / "check.json")
        if imp is None and chk is None:
            continue
        e = html.escape
        p = [f"<h3>{e(Path(run).name)}</h3>"]
        if imp is not None:
            p.append(f"<p class='cap'>Imported from <code>{e(str(imp.get('source', '?')))}</code>: "
                     f"{imp.get('rows', 0)} row(s) -> {imp.get('videos', 0)} video(s) scored once each; "
                     f"{imp.get('camera_rows', 0)} camera-following row(s) scored on the static-memory video they "
                     f"point at; {imp.get('skipped_rows', 0)} row(s) skipped. Metrics whose annotations the release "
                     "does not ship (person boxes, object masks, dynamic events) are n/c unless an overlay case set "
                     "gives them (docs/release.md).</p>")
            problems = imp.get("problems") or {}
            if problems:
                p.append("<ul>" + "".join(
                    f"<li>{e(kind)}: {len(subjects)} distinct, "
                    f"{sum(len(w) for w in subjects.values())} row(s); e.g. {e(next(iter(subjects)))}</li>"
                    for kind, subjects in sorted(problems.items())) + "</ul>")
        if chk is not None:
            p.append("<p class='cap'>Trajectory check (<code>release check</code>): each video's measured camera "
                     "path against its preset.</p><ul>"
                     + "".join(f"<li>{e(line)}</li>" for line in verdict_lines(chk)) + "</ul>")
        parts.append("".join(p))
    if not parts:
        return ""
    return "<section id='release'><h2>The official release</h2>" + "".join(parts) + "</section>"

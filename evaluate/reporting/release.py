"""The official release on a report page: what an imported run holds, the inference each of its tables rests on,
and each video's measured layout next to its preset.

Read from ``<run>/release/import.json`` (:func:`evaluate.release.importer.import_release`) and
``<run>/release/check.json`` (:func:`evaluate.release.check.check_run`, also written by an import that measured its
videos); a run that is not an imported release (and was never checked) adds nothing.
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


def _scored(run: Path) -> int:
    """Items of the run with an evaluation result (``metrics.json``)."""
    from harness.outputs import RunDir

    return sum((Path(run) / key / "metrics.json").is_file() for key in RunDir(Path(run)).item_keys())


def _counts(run: Path, imp: dict[str, Any]) -> str:
    g = imp.get
    return (f"<p class='cap'>Imported from <code>{html.escape(str(g('source', '?')))}</code>: {g('rows', 0)} row(s) "
            f"read of {g('rows_in_release', g('rows', 0))} -> {g('videos', 0)} video(s) imported as items, "
            f"{_scored(run)} scored; {g('kept_rows', 0)} row(s) on them, of which {g('camera_rows', 0)} "
            f"camera-following row(s) ({g('camera_items', 0)} video(s) scored for camera following only, never for "
            f"memory); {g('duplicate_rows', 0)} duplicate row(s); {g('skipped_rows', 0)} row(s) skipped"
            + (f"; {g('not_read')} not read (release.limit / max_rows)" if g("not_read") else "")
            + f". {g('flagged', 0)} video(s) do not follow their preset and are scored on their measured layout. "
            "Metrics whose annotations the release does not ship (person boxes, object masks, dynamic events) are "
            "n/c unless an overlay case set gives them (docs/release.md).</p>")


def _inference(trajectory: str, groups: list[dict[str, Any]]) -> str:
    """The inference a preset's tables rest on (its YAML's description) and what the check found of it."""
    from harness.config_groups import group_yaml

    try:
        desc = str(group_yaml("trajectory", trajectory).get("description", ""))
    except Exception:  # a preset no longer in conf/trajectory
        desc = "(the preset is no longer configured)"
    mine = [g for g in groups if g["trajectory"] == trajectory]
    videos, follow = sum(g["videos"] for g in mine), sum(g["matching"] for g in mine)
    verdict = (f"the check measured {videos} video(s): {follow} follow it" if videos else "not measured yet "
               "(python -m harness release check)")
    return f"<li><b>{html.escape(trajectory)}</b>: inference: {html.escape(desc)}; {verdict}.</li>"


def _cell(stats: dict[str, Any], key: str, fmt: str) -> str:
    s = stats.get(key)
    if not s:
        return "n/a"
    mid = format(s["median"], fmt)
    return mid if abs(s["max"] - s["min"]) < 1e-9 else f"{mid} [{format(s['min'], fmt)}-{format(s['max'], fmt)}]"


def _layouts(chk: dict[str, Any]) -> str:
    """Measured layout (preset) per preset and model."""
    e = html.escape
    rows = []
    for g in chk.get("groups") or []:
        m, p = g["measured"], g["preset"]
        cells = [g["trajectory"], g["model"], f"{g['matching']}/{g['videos']}",
                 f"{m['sequence'] or 'none'} ({p['sequence'] or 'none'})"]
        cells += [f"{_cell(m, k, f)} ({_cell(p, k, f)})" for k, f in
                  (("initial_hold", "g"), ("amplitude", ".1f"), ("speed", ".3f"), ("final_hold", "g"))]
        cells.append(f"{m['profile']} ({p['profile']})")
        rows.append("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in cells) + "</tr>")
    head = ("preset", "model", "follow", "moves", "initial hold", "amplitude deg", "speed /frame", "final hold",
            "profile")
    return ("<p class='cap'>Each video's layout measured from its frames alone (medians, [range] over the videos), "
            "the preset's in brackets (<code>release check</code>; release/check.md has the YAML the videos "
            "imply).</p><table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>")


def release_html(runs: list[Path]) -> str:
    """A section per run with a release import or check: exact counts, skipped rows by reason, the inference each
    preset's tables rest on, the measured layouts next to the presets and the check's verdict lines. Empty when
    no run has either."""
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
            p.append(_counts(Path(run), imp))
            problems = imp.get("problems") or {}
            if problems:
                p.append("<ul>" + "".join(
                    f"<li>{e(kind)}: {len(subjects)} distinct, "
                    f"{sum(int(v.get('rows', 0)) for v in subjects.values())} row(s); e.g. {e(next(iter(subjects)))}"
                    "</li>" for kind, subjects in sorted(problems.items())) + "</ul>")
        groups = (chk or {}).get("groups") or []
        trajectories = sorted({g["trajectory"] for g in groups} | set((imp or {}).get("trajectories") or []))
        if trajectories:
            p.append("<p class='cap'>What each preset's tables rest on:</p><ul>"
                     + "".join(_inference(t, groups) for t in trajectories) + "</ul>")
        if chk is not None:
            p.append(_layouts(chk) + "<ul>" + "".join(f"<li>{e(line)}</li>" for line in verdict_lines(chk))
                     + "</ul>")
        parts.append("".join(p))
    if not parts:
        return ""
    return "<section id='release'><h2>The official release</h2>" + "".join(parts) + "</section>"

"""What a human study reads from evaluated runs, in one place: finished items, their metric values and the judge's
checklist answers.

Every read of a run (:class:`harness.outputs.RunDir`) and of its ``metrics.json`` (:class:`evaluate.results.ItemResult`)
by the study code goes through these functions. An entry counts when it is computed, its value is finite, and it
is not ground truth (the reference model's own geometry never scores a video, and never stands in for a human).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError
from harness.io import read_json, seal_problem
from harness.outputs import RunDir, item_meta

from ..results import ItemResult, MetricEntry
from .common import Record


@dataclass(frozen=True)
class RunItem:
    """One evaluated video of a run. ``result`` is its ``metrics.json`` without ground truth; ``arm`` =
    ``<model>/<context>``."""

    run: str
    run_dir: Path
    item_dir: Path
    model: str
    context: str
    seed: int
    trajectory: str
    case_id: str
    family: str
    result: ItemResult

    @property
    def arm(self) -> str:
        return f"{self.model}/{self.context}"

    @property
    def key(self) -> tuple[str, str, int, str, str]:
        return self.model, self.context, self.seed, self.trajectory, self.case_id

    def meta(self) -> Record:
        m = item_meta(self.item_dir)
        if m is None:
            raise ConfigError(f"{self.item_dir}: meta.json is missing or unreadable; re-run the item")
        return m

    def video(self) -> Path:
        """The item's ``video.mp4``, checked before a study shows it: its bytes must still be the ones its metrics
        were computed on (``metrics.json``'s ``video_sha256``) and ``meta.json`` recorded (``video.sha256``, when
        it holds one). A video replaced after its run or its evaluation is a :class:`ConfigError`."""
        from harness.io import sha256_file

        p = self.item_dir / "video.mp4"
        st = p.stat() if p.is_file() else None
        stamp = (str(p), st.st_size, st.st_mtime_ns) if st else None
        if stamp is None or _CHECKED.get(stamp) != self.result.video_sha256:
            fix = "re-run the item, re-evaluate the run (stage=evaluate), then plan the study again"
            if stamp is None:
                raise ConfigError(f"{p}: missing; {fix}")
            problems, sha = [], sha256_file(p)
            recorded = (self.meta().get("video") or {}).get("sha256")
            if recorded is not None and sha != recorded:
                problems.append("video.mp4 sha256 differs from meta.json (replaced after its run)")
            if sha != self.result.video_sha256:
                problems.append("video.mp4 sha256 differs from metrics.json's video_sha256 (not the video the metrics "
                                "were computed on)")
            if problems:
                raise ConfigError(f"{self.item_dir}: {'; '.join(problems)}; {fix}")
            _CHECKED[stamp] = sha
        return p


_CHECKED: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) -> sha256 of a video already checked


def resolve_run(name_or_path: str, output_root: str | Path) -> Path:
    """A run by name (``<output_root>/<name>``) or by path; it must hold a ``manifest.jsonl``."""
    return RunDir.existing(name_or_path, output_root).path


def load_items(run_dirs: Sequence[Path]) -> list[RunItem]:
    """Every ``done`` item with a ``metrics.json``; an item (model, context, seed, trajectory, case) present in
    several runs is taken from the first run given (as the study report does), so no video counts twice."""
    items: dict[tuple[str, str, int, str, str], RunItem] = {}
    for run_dir in run_dirs:
        run = RunDir(Path(run_dir))
        for r in run.done_rows():
            d = run.item_dir(r.dir)
            if not (d / "metrics.json").is_file():
                continue
            try:
                data = read_json(d / "metrics.json")
                res = ItemResult.from_dict(data).without_oracle()
            except (ValueError, KeyError, TypeError) as exc:  # truncated or foreign: say which file
                raise ConfigError(f"{d / 'metrics.json'}: unreadable ({type(exc).__name__}: {exc}); re-evaluate the "
                                  "run (stage=evaluate run=<name> overwrite=true)") from None
            # an edited result, or one of another video than the item holds now, never picks or labels a study item
            problem = seal_problem(data) or res.video_problem(r.video_sha256)
            if problem is not None:
                raise ConfigError(f"{d / 'metrics.json'}: {problem}; re-evaluate the run (stage=evaluate "
                                  "run=<name>: it recomputes such a file)")
            it = res.item
            ri = RunItem(run.name, run.path, d, str(it.get("model", r.model)), str(it.get("context", r.context)),
                         int(it.get("seed", r.seed)), str(it.get("trajectory", r.trajectory)),
                         str(it.get("case_id", r.case_id)), res.case_family, res)
            items.setdefault(ri.key, ri)
    return sorted(items.values(), key=lambda i: i.key)


def entry(item: RunItem, key: str) -> MetricEntry | None:
    """The computed entry ``key`` (``metric[backbone]``) of an item with a finite value, else None."""
    e = item.result.metrics.get(key)
    if e is None or not e.is_computed or e.value is None or not math.isfinite(e.value):
        return None
    return e


def value(item: RunItem, key: str) -> float | None:
    """The computed value of ``key``, or None (not computed, failed, not finite, oracle)."""
    e = entry(item, key)
    if e is None:
        return None
    v = e.value
    assert v is not None  # entry() returns computed entries with a finite value only
    return float(v)


def computed_keys(items: Sequence[RunItem], metric_id: str) -> dict[str, int]:
    """``metric[backbone]`` keys of ``metric_id`` computed somewhere, with how many items have each."""
    out: dict[str, int] = {}
    for it in items:
        for k in it.result.metrics:
            if k.split("[")[0] == metric_id and entry(it, k) is not None:
                out[k] = out.get(k, 0) + 1
    return dict(sorted(out.items()))


def not_computed_reason(items: Sequence[RunItem], metric_id: str) -> str:
    """A recorded reason why ``metric_id`` has no value (the first one found), for error messages."""
    for it in items:
        for k, e in it.result.metrics.items():
            if k.split("[")[0] == metric_id and e.reason:
                return f"{k}: {e.reason}"
    return f"no item of these runs has an entry for {metric_id}"


def judge_labels(items: Sequence[RunItem]) -> dict[str, int]:
    """Judge model labels (the ``[...]`` of ``dynamic.overall[...]``) computed somewhere, with item counts."""
    return {k.split("[", 1)[1].rstrip("]"): n for k, n in computed_keys(items, "dynamic.overall").items()}


def judge_answers(item: RunItem, judge: str) -> Record | None:
    """The judge's verdict of a dynamic item: ``{"started": bool, "answers": 8 x yes/no, "items": 8 x 0/1 (gated),
    "overall": float}`` from its ``dynamic.overall[<judge>]`` entry, or None when it was not judged."""
    e = entry(item, f"dynamic.overall[{judge}]")
    if e is None or "items" not in e.details:
        return None
    overall = e.value
    assert overall is not None  # entry() returns computed entries with a finite value only
    return {"started": bool(e.get("started")), "answers": list(e.get("answers") or []),
            "items": [int(x) for x in e.get("items")], "overall": float(overall)}

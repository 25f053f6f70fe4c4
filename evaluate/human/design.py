"""Study design from evaluated runs (WorldMemBench appendix F): blinded A/B pairs for static memory, checklist
instances for dynamic memory, the media annotators see, and the annotators' tokens and item orders.

Static pairs. A *task* is a case on a trajectory; an *arm* is a model under a context policy (``<model>/<context>``).
For each metric (``metric[backbone]``), every task where two arms both have a computed value gives one candidate
pair per two arms (videos of the same seed pair with each other; arms run with different seeds, as models with
their own frozen seeds are, pair their k-th smallest remaining seeds). ``pairs=N`` candidates per metric are drawn
without replacement (all of them where a metric has no more than N; the plan says so). Which arm is shown as A
alternates within each metric and arm pair, starting from a seeded coin, so every arm is shown first about as
often as second. The pairs are then shuffled into opaque ids (``p001``, ...): an id says nothing about the metric,
the arms or the case.

Dynamic instances. Every dynamic-case video whose case has an event with eight questions and (by default) a
computed judge verdict is a candidate; ``instances=N`` of them are drawn and shuffled into ids ``d001``, ....

Every random choice comes from the recorded study seed and the study's own secret (random per plan, recorded only
in ``key.json``, mode 0600, so nobody with the runs can regenerate the blinding) through
:func:`~evaluate.human.common.sub_seed` (one independent stream per purpose), so the same runs, options, seed and
``secret=`` give the same study, byte for byte: the tokens are the one exception (secrets drawn from the OS).

Media. The revisit windows of both videos of a pair (the frames the metric scored, the union over the two sides,
so both clips show the same frames; the revisit phases where an entry records no frames) are transcoded into
``media/<id>-a.mp4`` and ``<id>-b.mp4`` (A and B as shown) and the reference frame into ``<id>-r.png`` (frame 0,
the conditioning frame, of the arm first by name; departure metrics, whose reference is each video's own first
away view, get ``<id>-ra.png`` / ``<id>-rb.png``). A dynamic instance's whole video becomes ``media/<id>.mp4``.
Transcoding (not copying) leaves no container metadata of the source in the served file.
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import shutil
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from evaluate.results import MetricEntry
from harness.errors import ConfigError
from trajectories.phases import PhaseKind, count, departure, phase_at, revisit

from . import sources
from .common import (
    ANNOTATOR_ID,
    ANNOTATORS_FILE,
    DYNAMIC,
    KEY_FILE,
    MEDIA_DIR,
    ORGANISER_FILE,
    STATIC,
    STUDY_FILE,
    STUDY_SCHEMA,
    TOKENS_FILE,
    Record,
    StudyError,
    sub_seed,
    token_hash,
)
from .sources import RunItem

#: the six static metrics of the paper's human study (Table 6): the seven static metrics less Reconstruction
PAPER_STATIC = ("human.identity", "human.appearance", "object.appearance", "object.geometry", "environment.visible",
                "environment.depth")

#: metric id -> (what the question is about, the question). ``{target}`` is the case's target names.
QUESTIONS: dict[str, tuple[str, str]] = {
    "human.identity": ("identity", "When the camera comes back, which clip keeps the person's identity (the face: "
                                   "who it is) closer to the first view?"),
    "human.appearance": ("appearance", "When the camera comes back, which clip keeps the person's appearance "
                                       "(clothing, hair, body) closer to the first view?"),
    "object.appearance": ("appearance", "When the camera comes back, which clip keeps the {target}'s appearance "
                                        "(colour, texture, details) closer to the first view?"),
    "object.geometry": ("geometry", "When the camera comes back, which clip keeps the {target}'s shape and size "
                                    "closer to the first view?"),
    "environment.visible": ("environment", "When the camera comes back, which clip shows the scene (its content: "
                                           "what is where) closer to the first view?"),
    "environment.depth": ("geometry", "When the camera comes back, which clip keeps the scene's 3-D layout (what is "
                                      "near, what is far) closer to the first view?"),
    "environment.reconstruction": ("geometry", "When the camera comes back, which clip keeps the scene's geometry "
                                               "(the shape of the room and its surfaces) closer to the first "
                                               "view?"),
    "departure.visible": ("environment", "Each clip shows the camera looking again at a view it first saw while "
                                         "turned away (shown above it). Which clip shows that view closer to how it "
                                         "first looked?"),
    "departure.return_visible": ("environment", "Each clip shows the camera looking again at a view it first saw "
                                                "while turned away (shown above it). Which clip shows that "
                                                "view closer to how it first looked?"),
}
STATIC_INSTRUCTIONS = (
    "You see the first view (what the camera saw before it turned away), then two clips of the camera coming "
    "back, side by side and playing in sync. Answer the question: A (left) is better, Tie, or B (right) is better. "
    "Judge only what the question asks; ignore overall image quality. Keys: A / T / B (or 1 / 2 / 3) choose, Enter "
    "submits, Space plays or pauses.")
DYNAMIC_INSTRUCTIONS = (
    "Watch the clip. The timeline shows the camera's phases: V initial hold, D departures (turned away), R revisits, "
    "H final hold; click it to jump. First decide whether the described event visibly starts during the initial "
    "hold V. If it does not, submit: nothing else is asked. If it does, answer the eight questions from what the "
    "video shows. Keys: Y / N answer the highlighted question and move on, Enter submits, Space plays or pauses.")


@dataclass
class PlanRequest:
    """What ``human plan`` was asked. ``metrics``: ``["static"]`` (the paper's six, as computed in the runs),
    ``["dynamic"]``, or metric ids / keys (``environment.visible`` or ``environment.visible[pixel-thumb16]``).
    ``pairs``: per metric (None = every candidate); ``instances``: dynamic instances (None = all)."""

    runs: list[Path]
    metrics: list[str]
    seed: int
    pairs: Optional[int] = None
    instances: Optional[int] = None
    annotators: list[str] = field(default_factory=lambda: ["a1", "a2", "a3"])
    judge: Optional[str] = None
    require_judge: bool = True
    checks: int = 0  # attention checks mixed among the items (design_checks; dynamic: design_dynamic_checks)
    practice: int = 0  # practice items shown first to every annotator, never counted
    #: the study's own secret, mixed into every seeded choice and recorded only in ``key.json`` (mode 0600): without
    #: it the blinding (which arm is A, the pair ids, the orders) cannot be regenerated from the runs and the seed.
    #: None: a fresh random one (:func:`plan_study`); give the recorded one to rebuild a study byte for byte.
    secret: str | None = None

    def stream(self, *parts: object) -> int:
        """The seed of one random choice: the study seed, the study secret and the purpose (:func:`sub_seed`)."""
        return sub_seed(self.seed, *_secret_part(self.secret), *parts)

    @property
    def kind(self) -> str:
        return DYNAMIC if self.metrics == ["dynamic"] else STATIC


# --------------------------------------------------------------------------------------------------- static
def _metric_keys(items: Sequence[RunItem], specs: Sequence[str]) -> list[str]:
    """Resolve ``metric=`` entries to computed ``metric[backbone]`` keys (an id with one computed backbone is that
    key; several backbones must be named)."""
    def paper_six() -> list[str]:
        keys = []
        for mid in PAPER_STATIC:
            found = sources.computed_keys(items, mid)
            if found:  # several backbones: the one most items have (then the first by name: ``found`` is sorted
                # by name and min keeps the first of equals)
                keys.append(min(found.items(), key=lambda kv: -kv[1])[0])
        if not keys:
            raise StudyError("metric=static: none of the paper's six static metrics (" + ", ".join(PAPER_STATIC) +
                             ") is computed in these runs; evaluate them first (docs/evaluation.md) or name a "
                             "computed metric, e.g. metric=departure.visible")
        return keys

    out = []
    for spec in specs:
        if spec == "static":
            out += paper_six()
            continue
        mid = spec.split("[")[0]
        if mid not in QUESTIONS:
            raise StudyError(f"metric={spec}: not a static metric a person can compare; use one of "
                             f"{', '.join(QUESTIONS)}, metric=static (the paper's six) or metric=dynamic")
        found = sources.computed_keys(items, mid)
        if "[" in spec:
            if spec not in found:
                raise StudyError(f"metric={spec}: no item of these runs has it computed"
                                 + (f" (computed: {', '.join(found)})" if found else
                                    f" ({sources.not_computed_reason(items, mid)})"))
            out.append(spec)
        elif len(found) == 1:
            out.append(next(iter(found)))
        elif not found:
            raise StudyError(f"metric={spec}: not computed in these runs ({sources.not_computed_reason(items, mid)})")
        else:
            raise StudyError(f"metric={spec}: computed with several backbones ({', '.join(found)}); name one, e.g. "
                             f"metric={next(iter(found))}")
    if len(set(out)) != len(out):
        raise StudyError(f"metric=: {', '.join(specs)} names a metric twice (static = {', '.join(PAPER_STATIC)})")
    return out


def dropped_paper_metrics(items: Sequence[RunItem], specs: Sequence[str]) -> list[dict[str, str]]:
    """With ``metric=static``: the paper's six static metrics that are not computed in these runs (so not in the
    study), each with the recorded reason (typically a backbone without weights); empty otherwise. ``human plan``
    prints them as a warning and the study's key records them (``design.dropped``)."""
    if "static" not in specs:
        return []
    return [{"metric": mid, "reason": sources.not_computed_reason(items, mid)} for mid in PAPER_STATIC
            if not sources.computed_keys(items, mid)]


def _seed_pairs(a: list[RunItem], b: list[RunItem]) -> list[tuple[RunItem, RunItem]]:
    """Identical seeds pair with each other; the remaining videos pair by seed rank."""
    sb = {i.seed: i for i in b}
    out = [(i, sb[i.seed]) for i in a if i.seed in sb]
    used = {i.seed for i, _ in out}
    out += list(zip([i for i in a if i.seed not in used], [i for i in b if i.seed not in used]))
    return out


def static_candidates(items: Sequence[RunItem], key: str) -> list[tuple[RunItem, RunItem]]:
    """Every comparable pair (first arm by name, second) of ``key``, in a canonical order."""
    tasks: dict[tuple[str, str], dict[str, list[RunItem]]] = {}
    for it in items:
        if sources.value(it, key) is not None:
            tasks.setdefault((it.trajectory, it.case_id), {}).setdefault(it.arm, []).append(it)
    out = []
    for task in sorted(tasks):
        arms = tasks[task]
        for x, y in combinations(sorted(arms), 2):
            out += _seed_pairs(sorted(arms[x], key=lambda i: i.seed), sorted(arms[y], key=lambda i: i.seed))
    return out


def _targets(meta: Record) -> str:
    t = (meta.get("case") or {}).get("targets") or {}
    names = [o.get("name") or o.get("id") for o in t.get("objects") or []]
    if not names and t.get("persons"):
        names = ["person"]
    return " and ".join(n for n in names if n) or "target"


def _windows(metric_id: str, entries: Sequence[MetricEntry | dict[str, Any]], phases: dict[str, list[int]],
             num_revisits: int) -> list[tuple[str, int, int]]:
    """(label, start, end) half-open frame windows both clips of a pair show: the metric's recorded revisit frames
    (union over the two sides, first to last per revisit), else the revisit phases."""
    lists: list[Any] = [e.get("revisit_frames") for e in entries if e.get("revisit_frames")]
    out = []
    for k in range(max((len(x) for x in lists), default=0)):
        fr = [int(f) for x in lists if k < len(x) for f in x[k]]
        if fr:
            out.append((phase_at(phases, min(fr)) or "?", min(fr), max(fr) + 1))
    if out:
        return out
    if metric_id.startswith("departure."):  # the later departures, which look back at D1's views
        names = [departure(k) for k in range(2, count(phases, PhaseKind.DEPART) + 1)]
    else:
        names = [revisit(k) for k in range(1, num_revisits + 1) if revisit(k) in phases]
    return [(n, int(phases[n][0]), int(phases[n][1])) for n in names]


def _write_clip(src: Path, frames: list[int], fps: float, dst: Path) -> None:
    from harness.video import VideoWriter, iter_frames

    w = VideoWriter(dst, fps)
    got = []
    try:
        for i, f in iter_frames(src, indices=frames):
            w.write(f)
            got.append(i)
    except BaseException:
        w.abort()
        raise
    if got != frames:
        w.abort()
        raise StudyError(f"{src}: has {len(got)} of the {len(frames)} frames a study clip needs (shorter than its "
                         "camera.npz?); re-run that item")
    w.close()


def _write_frame(src: Path, t: int, dst: Path) -> None:
    from PIL import Image

    from harness.io import atomic_path
    from harness.video import read_frames

    got, arr = read_frames(src, indices=[t])
    if list(got) != [t]:
        raise StudyError(f"{src}: has no frame {t} (the reference frame of a study pair); re-run that item")
    with atomic_path(dst) as tmp:
        Image.fromarray(arr[0]).save(tmp, format="PNG")


def _phases(it: RunItem) -> dict[str, list[int]]:
    ph = it.result.phases or (it.meta().get("camera") or {}).get("phases")
    if not ph:
        raise StudyError(f"{it.item_dir}: no camera phases in metrics.json or meta.json; re-evaluate the run")
    return {k: [int(v[0]), int(v[1])] for k, v in ph.items()}


def _fps(it: RunItem) -> float:
    cam = it.meta().get("camera") or {}
    if not cam.get("fps"):
        raise StudyError(f"{it.item_dir}: meta.json records no camera fps; re-run the item")
    return float(cam["fps"])


def _arm_record(it: RunItem, key: Optional[str] = None) -> Record:
    rec = {"arm": it.arm, "model": it.model, "context": it.context, "seed": it.seed, "trajectory": it.trajectory,
           "case_id": it.case_id, "run": it.run, "run_dir": str(it.run_dir), "item_dir": str(it.item_dir),
           "video_sha256": it.result.video_sha256}
    if key is not None:
        rec["value"] = sources.value(it, key)
    return rec


def _draw(n_have: int, want: Optional[int], rng: np.random.Generator) -> list[int]:
    """Indices of ``want`` of ``n_have`` candidates drawn without replacement (sorted), or all of them when
    ``want`` is None or not smaller than ``n_have`` (the plan's counts then say the metric fell short)."""
    if want is None or want >= n_have:
        return list(range(n_have))
    return sorted(int(i) for i in rng.choice(n_have, size=want, replace=False))


def design_static(req: PlanRequest, items: Sequence[RunItem]) -> tuple[list[Record], Record]:
    """The sampled pairs (hidden-key records, not yet with media or ids) and per-metric counts."""
    from evaluate.catalog import higher_is_better

    keys = _metric_keys(items, req.metrics)
    arms = sorted({it.arm for it in items})
    if len(arms) < 2:
        raise StudyError(f"run=: the runs hold one arm only ({', '.join(arms) or 'none'}); a pair needs two models or "
                         "two context policies: add run=<a run of another model or context>")
    chosen, counts = [], {}
    for key in keys:
        cands = static_candidates(items, key)
        if not cands:
            raise StudyError(f"metric={key}: no case and trajectory has it computed for two arms (arms: "
                             f"{', '.join(arms)}); drop it from metric= or evaluate the missing arm")
        rng = np.random.default_rng(req.stream("pairs", key))
        picked = [cands[i] for i in _draw(len(cands), req.pairs, rng)]
        counts[key] = {"candidates": len(cands), "pairs": len(picked),
                       "short": req.pairs is not None and len(picked) < req.pairs}
        by_arms: dict[tuple[str, str], list[tuple[RunItem, RunItem]]] = {}
        for a, b in picked:
            by_arms.setdefault((a.arm, b.arm), []).append((a, b))
        for group_key in sorted(by_arms):
            first_swapped = bool(np.random.default_rng(req.stream("sides", key, *group_key)).integers(2))
            for j, (a, b) in enumerate(by_arms[group_key]):
                swapped = first_swapped ^ bool(j % 2)  # alternate: balanced within each arm pair
                left, right = (b, a) if swapped else (a, b)
                chosen.append({"metric": key, "metric_id": key.split("[")[0],
                               "higher_is_better": higher_is_better(key), "swapped": swapped,
                               "task": {"trajectory": a.trajectory, "case_id": a.case_id},
                               "A": _arm_record(left, key), "B": _arm_record(right, key),
                               "_items": (left, right, a)})
    return chosen, counts


def design_checks(req: PlanRequest, items: Sequence[RunItem], chosen: Sequence[Record], n: int | None = None,
                  purpose: str = "checks") -> list[Record]:
    """``req.checks`` attention checks: pairs that look like any other, where one side is a clip of the first
    view's own video and the other the same arm's clip of another case (same trajectory and frames), so the
    answer is not a matter of taste: the side of the matching case. Seeded; the side of the right answer
    alternates. Each record carries ``check: {"expected": "A" | "B"}`` in the hidden key only; the statistics
    leave checks out and the report gives each annotator's passes and failures (``evaluate/human/analysis.py``)."""
    n = req.checks if n is None else n
    rng = np.random.default_rng(req.stream(purpose))  # the study secret too: checks are not regenerable either
    pool = list(chosen)
    out = []
    for k in range(n):
        order = rng.permutation(len(pool))
        for i in order:
            r = pool[int(i)]
            _, _, first = r["_items"]
            decoys = sorted((it for it in items if it.arm == first.arm and it.trajectory == first.trajectory
                             and it.case_id != first.case_id and it.seed == first.seed), key=lambda it: it.case_id)
            if decoys:
                break
        else:
            raise StudyError("checks=: an attention check needs a second case of the same arm, trajectory and seed "
                             "in these runs; run more cases or plan without checks=")
        decoy = decoys[int(rng.integers(len(decoys)))]
        expected = "A" if k % 2 == 0 else "B"
        a, b = (first, decoy) if expected == "A" else (decoy, first)
        out.append({"metric": r["metric"], "metric_id": r["metric_id"], "higher_is_better": r["higher_is_better"],
                    "swapped": expected == "B", "task": dict(r["task"]), "check": {"expected": expected,
                                                                                   "decoy_case": decoy.case_id},
                    "A": _arm_record(a, r["metric"]), "B": _arm_record(b, r["metric"]), "_items": (a, b, first)})
    return out


def _static_media(rec: Record, sid: str, media: Path) -> Record:
    """Write a pair's clips and reference frame(s); return its public record."""
    left, right, first = rec.pop("_items")
    mid = rec["metric_id"]
    ents: list[MetricEntry | dict[str, Any]] = [sources.entry(left, rec["metric"]) or {},
                                                sources.entry(right, rec["metric"]) or {}]
    phases = _phases(first)
    windows = _windows(mid, ents, phases, int(first.result.num_revisits))
    if not windows:
        raise StudyError(f"{first.item_dir}: no revisit window for {rec['metric']} (phases {list(phases)}); this "
                         "trajectory cannot be shown for that metric")
    frames = [t for _, a, b in windows for t in range(a, b)]
    fps = _fps(first)
    _write_clip(left.video(), frames, fps, media / f"{sid}-a.mp4")
    _write_clip(right.video(), frames, fps, media / f"{sid}-b.mp4")
    per_side = mid.startswith("departure.")
    if per_side:
        refs = []
        for side, it, e in (("a", left, ents[0]), ("b", right, ents[1])):
            t = int((e.get("reference_frames") or [0])[-1])
            _write_frame(it.video(), t, media / f"{sid}-r{side}.png")
            refs.append(f"{sid}-r{side}.png")
    else:
        _write_frame(first.video(), 0, media / f"{sid}-r.png")
        refs = [f"{sid}-r.png"]
    rec["clip_frames"] = [[lab, a, b] for lab, a, b in windows]
    segs, t0 = [], 0.0
    for lab, a, b in windows:
        segs.append({"label": lab, "start": round(t0, 4), "end": round(t0 + (b - a) / fps, 4)})
        t0 += (b - a) / fps
    family, question = QUESTIONS[mid]
    return {"id": sid, "kind": STATIC, "about": family,
            "question": question.format(target=_targets(first.meta())),
            "first_view": refs, "first_view_per_side": per_side, "clips": {"A": f"{sid}-a.mp4", "B": f"{sid}-b.mp4"},
            "fps": fps, "frames": len(frames), "segments": segs}


# -------------------------------------------------------------------------------------------------- dynamic
def _event(it: RunItem) -> Optional[Record]:
    ev: Optional[Record] = (it.meta().get("case") or {}).get("event")
    if not ev or len(ev.get("questions") or []) != 8:
        return None
    return ev


def design_dynamic(req: PlanRequest, items: Sequence[RunItem]) -> tuple[list[Record], Record]:
    dyn = [it for it in items if it.family == "dynamic"]
    if not dyn:
        raise StudyError("metric=dynamic: these runs have no evaluated dynamic-case video (case family 'dynamic'); "
                         "run a dynamic case (e.g. cases.include=[dynamic_cat]) or plan a static study")
    labels = sources.judge_labels(dyn)
    judge = req.judge
    if judge is None and labels:
        if len(labels) > 1:
            raise StudyError(f"judge=: these runs were judged by several models ({', '.join(labels)}); name one")
        judge = next(iter(labels))
    if judge is not None and judge not in labels and req.require_judge:
        raise StudyError(f"judge={judge}: no dynamic video of these runs has its verdict"
                         + (f" (judged by: {', '.join(labels)})" if labels else ""))
    if judge is None and req.require_judge:
        raise StudyError("metric=dynamic: no dynamic video of these runs has a judge verdict (" +
                         sources.not_computed_reason(dyn, "dynamic.overall") + "); evaluate with "
                         "evaluate.judge.base_url=... first (docs/judge.md), or plan with require_judge=false to "
                         "collect human labels without a comparison")
    cands, skipped = [], {"no_event": 0, "not_judged": 0}
    for it in dyn:
        ev = _event(it)
        if ev is None:
            skipped["no_event"] += 1
            continue
        vlm = sources.judge_answers(it, judge) if judge else None
        if vlm is None and req.require_judge:
            skipped["not_judged"] += 1
            continue
        cands.append((it, ev, vlm))
    if not cands:
        raise StudyError(f"metric=dynamic: no dynamic video qualifies ({skipped['no_event']} without an eight-question "
                         f"event, {skipped['not_judged']} without a verdict of {judge})")
    rng = np.random.default_rng(req.stream("instances"))
    drawn = _draw(len(cands), req.instances, rng)
    recs = []
    for it, ev, vlm in cands:
        qs = ev["questions"]
        recs.append({"arm": _arm_record(it), "judge": judge, "vlm": vlm, "aspects": [q["aspect"] for q in qs],
                     "references": [q["answer"] for q in qs], "_items": (it, ev)})
    out = [recs[i] for i in drawn]
    if req.checks or req.practice:  # practice first (never counted), then the still-clip attention checks
        out += design_dynamic_practice(req, recs, out) + design_dynamic_checks(req, out[:len(drawn)])
    return out, {"dynamic": {"candidates": len(cands), "instances": len(drawn), "judge": judge, "skipped": skipped,
                             "short": req.instances is not None and len(drawn) < req.instances}}


def design_dynamic_checks(req: PlanRequest, chosen: Sequence[Record], n: int | None = None) -> list[Record]:
    """``req.checks`` attention checks of a dynamic study: an instance whose clip is its own first frame held
    still for the clip's whole length (same event text, phases, timeline and questions as any instance), so the
    answer is not a matter of judgement: nothing moves, the event cannot visibly start, and the gate's right answer
    is "does not start". Drawn (seeded, with the study secret) from the chosen instances. Each record carries
    ``check: {"started": False, "still": True}`` in the hidden key only; the statistics leave checks out and the
    report gives each annotator's passes and failures, as for static checks. What they catch: an annotator who
    reports an event in a still clip (clicking through "starts"); an annotator who always answers "does not
    start" passes them (the export shows it: every ``started`` false)."""
    n = req.checks if n is None else n
    if not chosen:  # nothing to draw from (n <= 0 draws nothing either)
        return []
    rng = np.random.default_rng(req.stream("checks"))
    out = []
    for _ in range(n):
        r = chosen[int(rng.integers(len(chosen)))]
        out.append({"arm": dict(r["arm"]), "judge": None, "vlm": None, "aspects": list(r["aspects"]),
                    "references": list(r["references"]), "check": {"started": False, "still": True},
                    "_items": r["_items"]})
    return out


def design_dynamic_practice(req: PlanRequest, cands: Sequence[Record], chosen: Sequence[Record],
                            n: int | None = None) -> list[Record]:
    """``req.practice`` practice instances of a dynamic study, shown first to every annotator and never counted:
    drawn (seeded) from the candidate instances not in the study, then, if too few remain, from those in it."""
    n = req.practice if n is None else n
    if not cands:  # nothing to draw from (n <= 0 draws nothing either)
        return []
    taken = {(r["arm"]["arm"], r["arm"]["trajectory"], r["arm"]["case_id"]) for r in chosen}
    rest = [r for r in cands if (r["arm"]["arm"], r["arm"]["trajectory"], r["arm"]["case_id"]) not in taken]
    rng = np.random.default_rng(req.stream("practice"))
    pool = [rest[int(i)] for i in rng.permutation(len(rest))] + [chosen[int(i)] for i in
                                                                  rng.permutation(len(chosen))]
    out = []
    for k in range(n):
        r = pool[k % len(pool)]
        out.append({**r, "arm": dict(r["arm"]), "practice": True})
    return out


def _write_still(src: Path, n: int, fps: float, dst: Path) -> None:
    """A clip of ``n`` frames, each the first frame of ``src`` (an attention check of a dynamic study)."""
    from harness.video import VideoWriter, iter_frames

    first = next((f for _, f in iter_frames(src, indices=[0])), None)
    if first is None:
        raise StudyError(f"{src}: has no frame; re-run that item")
    w = VideoWriter(dst, fps)
    try:
        for _ in range(n):
            w.write(first)
    except BaseException:
        w.abort()
        raise
    w.close()


def _dynamic_media(rec: Record, sid: str, media: Path) -> Record:
    it, ev = rec.pop("_items")
    phases = _phases(it)
    n = max(b for _, b in phases.values())
    fps = _fps(it)
    if (rec.get("check") or {}).get("still"):
        _write_still(it.video(), n, fps, media / f"{sid}.mp4")
    else:
        _write_clip(it.video(), list(range(n)), fps, media / f"{sid}.mp4")
    from evaluate.judge.prompt import QUESTION_IDS

    return {"id": sid, "kind": DYNAMIC, "clip": f"{sid}.mp4", "fps": fps, "frames": n,
            "phases": [{"name": k, "start": a, "end": b}
                       for k, (a, b) in sorted(phases.items(), key=lambda p: p[1][0])],
            "event": {k: ev[k] for k in ("initial_state", "action", "expected_next_state")},
            "questions": [{"id": qid, "aspect": q["aspect"], "text": q["question"]}
                          for qid, q in zip(QUESTION_IDS, ev["questions"])]}


# ------------------------------------------------------------------------------------------------ annotators
SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{16,128}$")


def _secret_part(secret: str | None) -> list[str]:
    """The study secret as a part of :func:`sub_seed` (nothing for a study planned before secrets existed)."""
    return [f"secret={secret}"] if secret else []


def annotator_order(seed: int, annotator: str, item_ids: Sequence[str], secret: str | None = None,
                    first: Sequence[str] = ()) -> list[str]:
    """The seeded order in which ``annotator`` sees the items (a permutation, one per annotator); ``secret``: the
    study's (:attr:`PlanRequest.secret`); the ``first`` items (practice) lead, in their given order."""
    rest = [i for i in item_ids if i not in set(first)]
    rng = np.random.default_rng(sub_seed(seed, *_secret_part(secret), "order", annotator))
    return list(first) + [rest[i] for i in rng.permutation(len(rest))]


def check_annotator_ids(ids: Sequence[str]) -> list[str]:
    bad = [a for a in ids if not ANNOTATOR_ID.match(a)]
    if bad or not ids:
        why = f"; bad: {', '.join(bad)}" if bad else ""
        raise StudyError(f"annotators={','.join(ids)}: give a count (annotators=3) or ids of letters, digits, _ and - "
                         f"(up to 32 characters, e.g. annotators=ann1,ann2,ann3){why}")
    if len(set(ids)) != len(ids):
        raise StudyError(f"annotators={','.join(ids)}: an id appears twice")
    return list(ids)


def _annotator_records(seed: int, ids: Sequence[str], item_ids: Sequence[str],
                       secret: str | None = None, first: Sequence[str] = ()) -> tuple[list[Record], dict[str, str]]:
    tokens = {a: secrets.token_urlsafe(24) for a in ids}  # secrets, not from the seed: a token must not be guessable
    recs = [{"id": a, "token_sha256": token_hash(tokens[a]),
             "order": annotator_order(seed, a, item_ids, secret, first)}
            for a in ids]
    return recs, tokens


def _write_tokens(path: Path, tokens: dict[str, str]) -> None:
    """``<id>\\t<token>`` lines, created with mode 0600 (only the owner may read them)."""
    from harness.io import write_text

    write_text(path, "".join(f"{a}\t{t}\n" for a, t in tokens.items()), scrubbed=True, mode=0o600)


def write_organiser_token(study_dir: Path) -> str:
    """A fresh organiser token (from the OS, like the annotators' tokens) in ``organiser.txt``, mode 0600, replacing
    any older one; it opens the annotation app's ``/organiser`` page. Returns the token."""
    from harness.io import write_text

    token = secrets.token_urlsafe(32)
    write_text(Path(study_dir) / ORGANISER_FILE, token + "\n", scrubbed=True, mode=0o600)
    return token


def add_annotators(study_dir: Path, ids: Sequence[str]) -> dict[str, str]:
    """Add annotators to a planned study (seeded orders from the recorded seed, new tokens appended to
    ``tokens.txt``); returns the new tokens. Existing annotators and their votes are untouched."""
    from harness.io import read_json, write_json

    ids = check_annotator_ids(list(ids))
    ann = read_json(study_dir / ANNOTATORS_FILE)
    have = {a["id"] for a in ann["annotators"]}
    if have & set(ids):
        raise StudyError(f"annotators=: {', '.join(sorted(have & set(ids)))} already in {study_dir.name}")
    design = read_json(study_dir / KEY_FILE)["design"]
    seed, secret = int(design["seed"]), design.get("secret")
    item_ids = [i["id"] for i in read_json(study_dir / STUDY_FILE)["items"]]
    practice = [i["id"] for i in read_json(study_dir / KEY_FILE)["items"] if i.get("practice")]
    recs, tokens = _annotator_records(seed, ids, item_ids, secret, sorted(practice))
    old = (study_dir / TOKENS_FILE).read_text() if (study_dir / TOKENS_FILE).exists() else ""
    _write_tokens(study_dir / TOKENS_FILE, {**dict(line.split("\t", 1) for line in old.splitlines() if line),
                                            **tokens})
    ann["annotators"] += recs
    write_json(study_dir / ANNOTATORS_FILE, ann)
    return tokens


def revoke_annotators(study_dir: Path, ids: Sequence[str]) -> list[str]:
    """Revoke annotators' tokens (a token that leaked, a colleague who left): their sessions end at once, a running
    server refuses their logins and votes from the next request on (the vote store holds the revocation), and
    their lines leave ``tokens.txt``. The votes they gave stay. Returns the ids revoked."""
    from harness.io import read_json

    from .store import study_store

    known = {a["id"] for a in read_json(study_dir / ANNOTATORS_FILE)["annotators"]}
    ids = list(dict.fromkeys(ids))
    unknown = [a for a in ids if a not in known]
    if not ids:
        raise StudyError(f"revoke=: name the annotators to revoke, e.g. revoke={min(known, default='a1')}; "
                         f"{study_dir.name}'s are {', '.join(sorted(known))}")
    if unknown:
        raise StudyError(f"revoke={','.join(ids)}: {', '.join(unknown)} not in {study_dir.name}; "
                         f"its annotators are {', '.join(sorted(known))}")
    store = study_store(study_dir)
    for a in ids:
        store.revoke(a)
    if (study_dir / TOKENS_FILE).exists():
        old = dict(line.split("\t", 1) for line in (study_dir / TOKENS_FILE).read_text().splitlines() if line)
        _write_tokens(study_dir / TOKENS_FILE, {a: t for a, t in old.items() if a not in ids})
    return ids


# -------------------------------------------------------------------------------------------------- the plan
def plan_study(req: PlanRequest, out_dir: Path) -> dict[str, Any]:
    """Design the study and write its folder ``out_dir`` (created whole or not at all).

    Returns ``{"dir", "kind", "items", "counts", "annotators", "tokens_file", "dropped", "checks",
    "organiser_file"}`` (``organiser_file``: the organiser's token, :func:`write_organiser_token`; ``dropped``:
    :func:`dropped_paper_metrics`). Raises :class:`StudyError` for
    a bad request (before anything is written) and refuses an existing folder.
    """
    from harness.io import replace, temp_tag

    out_dir = Path(out_dir).resolve()
    req, annotators = _checked_request(req, out_dir)
    items = sources.load_items(req.runs)
    if not items:
        raise StudyError(f"run=: no evaluated item in {', '.join(str(r) for r in req.runs)}; evaluate first "
                         "(python -m harness stage=evaluate run=<name>)")
    recs, counts = (design_dynamic if req.kind == DYNAMIC else design_static)(req, items)
    if req.kind == STATIC:  # design_checks gives nothing for a count of 0 (checks=0, practice=0)
        # practice pairs: as clear-cut as the checks (one side another case), shown first, never counted
        practice = design_checks(req, items, recs, req.practice, "practice")
        for r in practice:
            r["practice"] = True
        recs = recs + design_checks(req, items, recs) + practice
    dropped = dropped_paper_metrics(items, req.metrics)
    perm = np.random.default_rng(req.stream("ids")).permutation(len(recs))
    ordered = [recs[i] for i in perm]

    _remove_dead_partials(out_dir)
    tmp = out_dir.parent / f".{out_dir.name}.{temp_tag()}.partial"
    try:
        n_items = _write_study(tmp, req, ordered, annotators, {
            "seed": req.seed, "secret": req.secret, "runs": [str(r) for r in req.runs], "metrics": req.metrics,
            "pairs": req.pairs, "instances": req.instances, "judge": req.judge, "require_judge": req.require_judge,
            "counts": counts, "dropped": dropped, "checks": req.checks, "practice": req.practice,
            "arms": sorted({it.arm for it in items}),
            "sides": "alternating per metric and arm pair, seeded start"})
        replace(tmp, out_dir)  # the whole folder appears at once
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"dir": str(out_dir), "kind": req.kind, "items": n_items, "counts": counts,
            "annotators": annotators, "tokens_file": str(out_dir / TOKENS_FILE), "dropped": dropped,
            "checks": req.checks, "organiser_file": str(out_dir / ORGANISER_FILE)}


def _checked_request(req: PlanRequest, out_dir: Path) -> tuple[PlanRequest, list[str]]:
    """The request with its secret (a fresh one when none was given) and its annotator ids, checked before
    anything is read or written: :class:`StudyError` naming the setting and the fix."""
    if out_dir.exists():
        raise StudyError(f"study folder {out_dir} exists; choose another name= (or move it away: it may hold votes)")
    above = next(p for p in out_dir.parents if p.exists())  # checked now: nothing is designed or written for it
    if not above.is_dir():
        raise StudyError(f"study folder {out_dir}: {above} is a file, not a folder; choose another name= or "
                         "output_root=")
    annotators = check_annotator_ids(req.annotators)
    if req.secret is None:  # a fresh study secret: the key cannot be regenerated from the runs and the seed
        req = dataclasses.replace(req, secret=secrets.token_hex(16))
    elif not SECRET_RE.fullmatch(str(req.secret)):
        raise StudyError("secret=: 16 to 128 letters, digits, _ or - (the one recorded in a study's key.json); or "
                         "leave it out for a fresh one")
    if not req.runs:
        raise StudyError("run=: give the evaluated runs to compare, e.g. human plan run=A run=B metric=static")
    if "dynamic" in req.metrics and req.metrics != ["dynamic"]:
        raise StudyError("metric=: a study is static (A/B pairs) or dynamic (checklists); plan metric=dynamic as a "
                         "study of its own")
    if req.kind == DYNAMIC and req.pairs is not None:
        raise StudyError("pairs= is for static studies; a dynamic study takes instances=N")
    if req.kind == STATIC and req.instances is not None:
        raise StudyError("instances= is for dynamic studies; a static study takes pairs=N (per metric)")
    return req, annotators


def _write_study(tmp: Path, req: PlanRequest, ordered: list[dict[str, Any]], annotators: list[str],
                 design: dict[str, Any]) -> int:
    """Write the study's files into the new folder ``tmp``: each item's media and public record under its blind id
    (``study.json``), the key with the hidden records and ``design`` (``key.json``, the owner's only), the
    annotators, their tokens and the organiser's token. Returns the number of items."""
    from harness.io import json_text, write_json, write_text

    prefix = "d" if req.kind == DYNAMIC else "p"
    width = max(3, len(str(len(ordered))))
    media = tmp / MEDIA_DIR
    media.mkdir(parents=True)  # creates the parents; never exist_ok: a partial is never written into twice
    public, hidden = [], []
    for n, rec in enumerate(ordered, start=1):
        sid = f"{prefix}{n:0{width}d}"
        pub = (_dynamic_media if req.kind == DYNAMIC else _static_media)(rec, sid, media)
        if rec.get("practice"):
            pub["practice"] = True  # the page says so; practice answers never enter a statistic
        public.append(pub)
        hidden.append({"id": sid, **rec})
    item_ids = [p["id"] for p in public]
    first = sorted(p["id"] for p in public if p.get("practice"))
    ann, tokens = _annotator_records(req.seed, annotators, item_ids, req.secret, first)
    write_json(tmp / STUDY_FILE, {"schema": STUDY_SCHEMA, "kind": req.kind,
                                  "instructions": DYNAMIC_INSTRUCTIONS if req.kind == DYNAMIC else
                                  STATIC_INSTRUCTIONS, "items": public})
    write_text(tmp / KEY_FILE, json_text({"schema": STUDY_SCHEMA, "kind": req.kind, "design": design,
                                          "items": hidden}),
               mode=0o600)  # the blinding key and its secret: the owner's only, like tokens.txt
    write_json(tmp / ANNOTATORS_FILE, {"annotators": ann})
    _write_tokens(tmp / TOKENS_FILE, tokens)
    write_organiser_token(tmp)
    return len(public)


def _remove_dead_partials(out_dir: Path) -> None:
    """Half-written study folders of this name left by a planner killed on this host: its pid is gone, or it is
    this process's own pid (reused after the kill; this process has no study in progress)."""
    from harness.io import host_tag, pid_alive, temp_owner

    for p in out_dir.parent.glob(f".{out_dir.name}.*.partial"):
        owner = temp_owner(p.name)
        if owner and owner[0] == host_tag() and (owner[1] == os.getpid() or not pid_alive(owner[1])):
            shutil.rmtree(p, ignore_errors=True)  # removes folders only: a file or a symlink there is kept


def check_request_runs(runs: Sequence[str], output_root: str) -> list[Path]:
    """Resolve ``run=`` values (names under output_root or paths); refuses duplicates."""
    paths = [sources.resolve_run(r, output_root) for r in runs]
    if len(set(paths)) != len(paths):
        raise ConfigError(f"run=: the same run is given twice ({', '.join(runs)})")
    return paths

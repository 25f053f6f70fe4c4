"""A study's votes joined with its hidden key: the agreement results (Tables 6 and 7 of the paper) and the raw
vote export.

Static studies, per metric and over all metrics: pairwise agreement with the decisive human majority (with its
bootstrap interval, majority ties, splits and metric ties counted apart), per arm the human and automatic win rates
and their Spearman rho across arms, and Fleiss' kappa of the A / Tie / B votes over the pairs.

Dynamic studies: per instance the human label of each checklist item (the majority of the annotators' gated
scores), the human and judge satisfaction fractions, their Spearman rho and PLCC overall and per aspect (with
bootstrap intervals over instances), Fleiss' kappa of the gate (per instance) and of the gated items (per item),
and how often the judge's gate and items match the human labels.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.cases import ASPECTS

from . import stats
from .common import (ANNOTATORS_FILE, DB_FILE, DYNAMIC, EXPORT_DIR, KEY_FILE, STATIC, STUDY_FILE, Record,
                     StudyError)
from .ranking import human_ranking
from .store import read_votes

ALL = "all metrics"


def load(study_dir: Path) -> tuple[Record, Record, list[Record], list[str]]:
    """(study.json, key.json, votes, annotator ids) of a study folder."""
    from harness.io import read_json

    study_dir = Path(study_dir)
    for f in (STUDY_FILE, KEY_FILE, ANNOTATORS_FILE):
        if not (study_dir / f).is_file():
            raise StudyError(f"{study_dir}: {f} is missing; this is not a complete study folder (plan it again)")
    study, key = read_json(study_dir / STUDY_FILE), read_json(study_dir / KEY_FILE)
    ann = [a["id"] for a in read_json(study_dir / ANNOTATORS_FILE)["annotators"]]
    known = {i["id"] for i in key["items"]}
    votes = [v for v in read_votes(study_dir) if v["item"] in known]
    return study, key, votes, ann


def _by_item(votes: Sequence[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for v in votes:
        out.setdefault(v["item"], []).append(v)
    return out


def _corr_ci(x: np.ndarray, y: np.ndarray, rows: Callable[[np.ndarray, np.ndarray], np.ndarray], n_boot: int,
             seed: int) -> tuple[float, float, int]:
    """Percentile bootstrap interval of a correlation over instances (``rows``: its batch form,
    :func:`~evaluate.human.stats.spearman_rows` or :func:`~evaluate.human.stats.plcc_rows`); resamples where it is
    undefined (constant) are dropped and their number returned. The ``n_boot`` resamples are drawn in one call, the
    same indices as one draw per resample (numpy's ``Generator.integers`` fills row after row)."""
    if len(x) < 3:
        return float("nan"), float("nan"), 0
    idx = np.random.default_rng(seed).integers(0, len(x), (n_boot, len(x)))
    values = rows(x[idx], y[idx])
    vals = values[np.isfinite(values)]
    dropped = int(n_boot - len(vals))
    if not len(vals):
        return float("nan"), float("nan"), dropped
    return float(np.quantile(vals, 0.025)), float(np.quantile(vals, 0.975)), dropped


# ------------------------------------------------------------------------------------------------------ static
def _passed(check: Record, vote: Record) -> bool:
    """Whether ``vote`` answers an attention check right: a static check's ``expected`` side, a dynamic check's
    ``started`` gate (a still clip: the event does not start)."""
    if "started" in check:
        return vote.get("started") is not None and bool(vote["started"]) == bool(check["started"])
    return bool(vote.get("choice") == check["expected"])


def attention(key: Record, votes: Sequence[Record]) -> dict[str, Record]:
    """Per annotator who answered an attention check (static: ``design_checks``, dynamic:
    ``design_dynamic_checks``): ``checks`` answered, ``passed`` (static: the side of the matching case; dynamic:
    "the event does not start" for a still clip) and the ``failed`` item ids."""
    checks = {it["id"]: it["check"] for it in key["items"] if it.get("check") and not it.get("practice")}
    out: dict[str, Record] = {}
    for v in votes:
        if v["item"] in checks:
            r = out.setdefault(v["annotator"], {"checks": 0, "passed": 0, "failed": []})
            r["checks"] += 1
            if _passed(checks[v["item"]], v):
                r["passed"] += 1
            else:
                r["failed"].append(v["item"])
    return out


def static_results(key: Record, votes: Sequence[Record], annotators: Sequence[str], n_boot: int = 2000,
                   boot_seed: int = 0) -> dict[str, Any]:
    """The static statistics over the study's pairs; attention checks are left out of every statistic and
    reported apart (``attention``)."""
    att = attention(key, votes)
    key = {**key, "items": [it for it in key["items"] if not it.get("check") and not it.get("practice")]}
    real = {it["id"] for it in key["items"]}
    votes = [v for v in votes if v["item"] in real]
    by = _by_item(votes)
    groups: dict[str, list[Record]] = {}
    for it in key["items"]:
        groups.setdefault(it["metric"], []).append(it)
    planned = list(key["design"].get("counts") or {})
    order = [m for m in planned if m in groups] + [m for m in groups if m not in planned] + [ALL]
    out: dict[str, Any] = {"kind": STATIC, "metrics": {}, "votes": len(votes), "annotators": list(annotators),
                           "items": len(key["items"]), "attention": att}
    for m in order:
        its = key["items"] if m == ALL else groups[m]
        rows = []
        for it in its:
            pref = stats.metric_preference(it["A"]["value"], it["B"]["value"], it["higher_is_better"])
            choices = [v["choice"] for v in by.get(it["id"], [])]
            rows.append((it, choices, pref))
        agr = stats.pairwise_agreement([(c, p) for _, c, p in rows], n_boot, boot_seed)
        # win rates per arm; over all metrics an arm is scored per metric and the rates pooled over its pairs
        wr = stats.win_rates([(it["A"]["arm"], it["B"]["arm"], c, p) for it, c, p in rows])
        arms = sorted(wr)
        rho = stats.spearman([wr[a]["human"] for a in arms], [wr[a]["auto"] for a in arms],
                             "arms (models or policies) with votes")
        counts = stats.count_matrix([c for _, c, _ in rows], stats.CHOICES)
        # beyond the paper: the arms ranked from the raw votes (Bradley-Terry) beside the metric's own ranking
        bt = human_ranking([(it["A"]["arm"], it["B"]["arm"], c, p) for it, c, p in rows], n_boot, boot_seed)
        out["metrics"][m] = {"bradley_terry": bt.as_dict(),
            **agr, "win_rates": wr, "spearman": rho.value, "spearman_n": rho.n, "spearman_reason": rho.reason,
            "fleiss_kappa": stats.fleiss_kappa(counts),
            "complete": int(sum(len(c) >= len(annotators) for _, c, _ in rows)),
            "metric_id": m.split("[")[0] if m != ALL else ALL}
    return out


# ----------------------------------------------------------------------------------------------------- dynamic
def dynamic_results(key: Record, votes: Sequence[Record], annotators: Sequence[str], n_boot: int = 2000,
                    boot_seed: int = 0) -> dict[str, Any]:
    """The dynamic statistics over the study's instances; attention checks and practice instances are left out
    of every statistic (checks are reported apart: ``attention``)."""
    key = {**key, "items": [it for it in key["items"] if not it.get("check") and not it.get("practice")]}
    real = {it["id"] for it in key["items"]}
    votes = [v for v in votes if v["item"] in real]
    by = _by_item(votes)
    inst, gate_ratings, item_ratings = [], [], []
    gate_match, item_match, item_n, tied = 0, 0, 0, 0
    for it in key["items"]:
        vs = by.get(it["id"], [])
        if not vs:
            continue
        refs = it["references"]
        per_ann = [stats.gated_items(bool(v["started"]), v["answers"], refs) for v in vs]
        labels = [stats.majority_label([p[q] for p in per_ann]) for q in range(8)]
        tied += sum(lab is None for lab in labels)
        started = [int(bool(v["started"])) for v in vs]  # each annotator's gate: 1 the event starts, 0 not
        gate = stats.majority_label(started)
        gate_ratings.append(started)
        item_ratings += [[p[q] for p in per_ann] for q in range(8)]
        h = stats.aspect_scores(labels, it["aspects"])
        vlm = it.get("vlm")
        j = stats.aspect_scores(vlm["items"], it["aspects"]) if vlm else None
        if vlm:
            gate_match += int(gate == int(vlm["started"]))  # a tied gate (None) matches neither
            for q in range(8):
                if labels[q] is not None:
                    item_n += 1
                    item_match += int(labels[q] == vlm["items"][q])
        inst.append({"id": it["id"], "arm": it["arm"]["arm"], "votes": len(vs), "human": h, "vlm": j,
                     "human_gate": gate, "vlm_gate": None if not vlm else bool(vlm["started"])})
    judged = [r for r in inst if r["vlm"] is not None]
    dims = ["overall", *ASPECTS]
    corr = {}
    for d in dims:
        x = np.asarray([r["human"][d] for r in judged], dtype=np.float64)
        y = np.asarray([r["vlm"][d] for r in judged], dtype=np.float64)
        ok = np.isfinite(x) & np.isfinite(y)
        rho, pl = stats.spearman(x, y, "instances"), stats.plcc(x, y, "instances")
        rlo, rhi, rdrop = _corr_ci(x[ok], y[ok], stats.spearman_rows, n_boot, boot_seed)
        plo, phi, pdrop = _corr_ci(x[ok], y[ok], stats.plcc_rows, n_boot, boot_seed)
        corr[d] = {"n": int(ok.sum()), "spearman": rho.value, "spearman_reason": rho.reason, "spearman_lo": rlo,
                   "spearman_hi": rhi, "plcc": pl.value, "plcc_reason": pl.reason, "plcc_lo": plo, "plcc_hi": phi,
                   "boot_dropped": max(rdrop, pdrop), "human_mean": float(np.nanmean(x)) if len(x) else float("nan"),
                   "vlm_mean": float(np.nanmean(y)) if len(y) else float("nan")}
    return {"kind": DYNAMIC, "votes": len(votes), "annotators": list(annotators), "items": len(key["items"]),
            "instances_voted": len(inst), "instances_judged": len(judged), "dimensions": corr,
            "tied_labels": tied, "complete": int(sum(r["votes"] >= len(annotators) for r in inst)),
            "fleiss_kappa_gate": stats.fleiss_kappa(stats.count_matrix(gate_ratings, (1, 0))),
            "fleiss_kappa_items": stats.fleiss_kappa(stats.count_matrix(item_ratings, (0, 1))),
            "gate_agreement": gate_match / len(judged) if judged else float("nan"),
            "item_agreement": item_match / item_n if item_n else float("nan"), "instances": inst,
            "judge": key["design"].get("counts", {}).get("dynamic", {}).get("judge")}


def analyse(study_dir: Path, n_boot: int = 2000, boot_seed: int = 0,
            exclude_failed_checks: bool = False) -> dict[str, Any]:
    """The agreement results of a study folder (see the module docstring); bootstrap: ``n_boot`` resamples,
    ``boot_seed``, percentile 95 %. ``exclude_failed_checks``: leave out every vote of an annotator who failed an
    attention check (``excluded`` lists them; the ``attention`` section always reports every annotator)."""
    _, key, votes, ann = load(study_dir)
    excluded: list[str] = []
    if exclude_failed_checks:
        excluded = sorted(a for a, r in attention(key, votes).items() if r["failed"])
    kept = [v for v in votes if v["annotator"] not in excluded]
    fn = dynamic_results if key["kind"] == DYNAMIC else static_results
    res = fn(key, kept, [a for a in ann if a not in excluded], n_boot, boot_seed)
    res["attention"] = attention(key, votes)
    res["excluded"] = excluded
    res["bootstrap"] = {"n": n_boot, "seed": boot_seed, "interval": "percentile 95 %"}
    return res


# ---------------------------------------------------------------------------------------------------- progress
#: a vote faster than this share of its clip's duration came before the clip could play halfway once
FAST_SHARE = 0.5
#: an annotator is flagged as implausibly fast when the median of their answers is below FAST_SHARE of the clip,
#: over at least this many timed answers (a single quick answer is no pattern)
FAST_MIN_VOTES = 3


def clip_seconds(item: Record) -> float | None:
    """How long an item's clip plays [s] (``frames / fps`` of its public record), None when unknown."""
    frames, fps = item.get("frames"), item.get("fps")
    return float(frames) / float(fps) if frames and fps else None


def speed(votes: Sequence[Record], public: dict[str, Record]) -> dict[str, Any]:
    """How fast an annotator answered: ``median_s`` (seconds per answer), ``fast`` (answers given before
    :data:`FAST_SHARE` of their clip could play), ``timed`` (answers with a time and a clip length) and
    ``flagged``: the median answer came before FAST_SHARE of its clip, over at least :data:`FAST_MIN_VOTES`
    timed answers (practice items left out)."""
    shares, secs = [], []
    for v in votes:
        it = public.get(v["item"]) or {}
        if v.get("elapsed_ms") is None or it.get("practice"):
            continue
        secs.append(v["elapsed_ms"] / 1000)
        clip = clip_seconds(it)
        if clip:
            shares.append(v["elapsed_ms"] / 1000 / clip)
    flagged = len(shares) >= FAST_MIN_VOTES and float(np.median(shares)) < FAST_SHARE
    return {"median_s": float(np.median(secs)) if secs else None, "timed": len(shares),
            "fast": int(sum(x < FAST_SHARE for x in shares)), "flagged": bool(flagged)}


def progress(study_dir: Path) -> list[Record]:
    """The organiser's view, per annotator: items answered of their total, the time of their last vote, votes
    changed (corrections), attention checks passed / answered and the ``failed_items``, how fast they answered
    (:func:`speed`: ``median_s``, ``fast``, ``timed``, ``too_fast`` flags an implausibly fast annotator), whether
    their token was ``revoked``, and (static) the share of their own votes on real pairs that side with the
    metric's preference (ties of either kind left out): the agreement so far. Readable while the server runs."""
    from harness.io import read_json

    from .store import study_store

    study, key, votes, ann = load(study_dir)
    orders = {a["id"]: a["order"] for a in read_json(Path(study_dir) / ANNOTATORS_FILE)["annotators"]}
    public = {i["id"]: i for i in study.get("items", [])}
    revoked = study_store(study_dir).revoked() if (Path(study_dir) / DB_FILE).exists() else {}
    items = {i["id"]: i for i in key["items"]}
    att = attention(key, votes)
    out = []
    for a in ann:
        mine = [v for v in votes if v["annotator"] == a]
        agree = n = 0
        if key["kind"] == STATIC:
            for v in mine:
                it = items[v["item"]]
                if it.get("check") or it.get("practice"):
                    continue
                pref = stats.metric_preference(it["A"]["value"], it["B"]["value"], it["higher_is_better"])
                if pref in ("A", "B") and v["choice"] in ("A", "B"):
                    n += 1
                    agree += v["choice"] == pref
        r = att.get(a, {"checks": 0, "passed": 0, "failed": []})
        sp = speed(mine, public)
        out.append({"annotator": a, "done": len(mine), "total": len(orders.get(a, [])),
                    "last_vote_utc": max((v["created_utc"] for v in mine), default=None),
                    "corrected": sum(1 for v in mine if v.get("corrections")),
                    "checks": r["checks"], "checks_passed": r["passed"], "failed_items": list(r["failed"]),
                    "median_s": sp["median_s"], "fast_votes": sp["fast"], "timed_votes": sp["timed"],
                    "too_fast": sp["flagged"], "revoked_utc": revoked.get(a),
                    "agree_with_metric": agree / n if n else None, "decisive_votes": n})
    return out


def flags(rows: Sequence[Record]) -> list[str]:
    """The organiser's warnings from :func:`progress`, one sentence each: an implausibly fast annotator (with the
    numbers), the attention checks an annotator failed (by item id), a revoked token."""
    out = []
    for r in rows:
        a = r["annotator"]
        if r["too_fast"]:
            out.append(f"{a} answers implausibly fast: median {r['median_s']:.1f} s per answer; {r['fast_votes']} of "
                       f"{r['timed_votes']} answers came before half of their clip could play (look at their "
                       "answers before you count them)")
        if r["failed_items"]:
            n = len(r["failed_items"])
            out.append(f"{a} failed {n} attention check{'' if n == 1 else 's'}: {', '.join(r['failed_items'])} "
                       "(human report exclude=failed_checks leaves their votes out)")
        if r["revoked_utc"]:
            out.append(f"{a}'s token was revoked at {r['revoked_utc']} UTC (their earlier votes stay)")
    return out


# ------------------------------------------------------------------------------------------------------ export
#: the first BLIND_COLUMNS say what was clicked and what kind of item it was (a practice item, an attention check
#: and whether it was passed), naming no model, policy, run or case; the rest unblind it
EXPORT_COLUMNS = ["vote_id", "annotator", "item", "kind", "role", "check_passed", "choice", "started", "answers",
                  "client_id", "elapsed_ms", "created_utc", "corrected", "first_choice", "first_started",
                  "first_answers", "metric", "trajectory", "case_id", "arm_A", "arm_B", "preferred_arm", "value_A",
                  "value_B", "higher_is_better", "metric_prefers", "metric_preferred_arm", "arm", "gated_items"]
BLIND_COLUMNS = 16
#: the export's roles of an item: a real item counts; practice and attention checks never enter a statistic
ROLES = ("real", "practice", "check")


def role_of(item: Record) -> str:
    """``practice``, ``check`` (an attention check) or ``real`` (a key.json item)."""
    return "practice" if item.get("practice") else "check" if item.get("check") else "real"


def export_rows(key: Record, votes: Sequence[Record], unblind: bool = False) -> list[Record]:
    """One row per raw vote: what was clicked (``choice`` A/T/B, or ``started`` and the eight ``answers``), the
    item's ``role`` (real, practice, check) and, for a check, ``check_passed``; with ``unblind``, what it means
    (the metric, the arms on each side and the preferred arm; a dynamic vote's arm and its eight gated scores)."""
    items = {i["id"]: i for i in key["items"]}
    rows = []
    for v in votes:
        it = items[v["item"]]
        r = {"vote_id": v["id"], "annotator": v["annotator"], "item": v["item"], "kind": v["kind"],
             "role": role_of(it), "check_passed": _passed(it["check"], v) if role_of(it) == "check" else None,
             "choice": v["choice"], "started": v["started"], "answers": v["answers"], "client_id": v["client_id"],
             "elapsed_ms": v["elapsed_ms"], "created_utc": v["created_utc"],
             # a vote changed before moving on (the store's audit trail): the answer counted is the last one
             "corrected": bool(v.get("corrections")), "first_choice": v.get("first_choice"),
             "first_started": v.get("first_started"), "first_answers": v.get("first_answers")}
        if unblind:
            r.update(_unblinded(it, v))
        rows.append(r)
    return rows


def _unblinded(it: Record, v: Record) -> dict[str, Any]:
    """What a vote means: the metric, the arms and the metric's side (static), the arm and gated scores
    (dynamic)."""
    if v["kind"] != STATIC:
        return {"metric": "dynamic", "trajectory": it["arm"]["trajectory"], "case_id": it["arm"]["case_id"],
                "arm": it["arm"]["arm"],
                "gated_items": stats.gated_items(bool(v["started"]), v["answers"], it["references"])}
    # the metric's side of the pair, so agreement can be recomputed from the export alone
    pref = stats.metric_preference(it["A"]["value"], it["B"]["value"], it["higher_is_better"])
    return {"metric": it["metric"], "trajectory": it["task"]["trajectory"], "case_id": it["task"]["case_id"],
            "arm_A": it["A"]["arm"], "arm_B": it["B"]["arm"],
            "preferred_arm": {"A": it["A"]["arm"], "B": it["B"]["arm"], "T": "tie"}[v["choice"]],
            "value_A": it["A"]["value"], "value_B": it["B"]["value"], "higher_is_better": it["higher_is_better"],
            "metric_prefers": pref, "metric_preferred_arm": {"A": it["A"]["arm"], "B": it["B"]["arm"], "T": "tie",
                                                             None: None}[pref]}


def _csv_cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list):
        return ";".join(str(x) for x in v)
    return str(v)


#: the file names of an export; an unblinded one says so in its name
EXPORT_NAMES = {False: "votes", True: "votes-unblinded"}


def export_votes(study_dir: Path, out_dir: Path | None = None, unblind: bool = False) -> dict[str, str]:
    """Write every raw vote to ``votes.csv`` and ``votes.jsonl`` (atomically) in ``out_dir`` (default
    ``<study>/exports``): blind (what was clicked, and each item's role), fit to hand to a colleague. With
    ``unblind``: ``votes-unblinded.{csv,jsonl}``, the arms and the metric's side beside each vote, written at mode
    0600 like ``key.json`` (they unblind the study). CSV lists join with ``;``; booleans are yes / no."""
    from harness.io import json_text, write_text

    _, key, votes, _ = load(study_dir)
    rows = export_rows(key, votes, unblind)
    out = Path(out_dir) if out_dir else Path(study_dir) / EXPORT_DIR
    cols = EXPORT_COLUMNS if unblind else EXPORT_COLUMNS[:BLIND_COLUMNS]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: _csv_cell(r.get(c)) for c in cols})
    name = EXPORT_NAMES[unblind]
    mode = 0o600 if unblind else None  # the arms: the owner's only, like key.json
    write_text(out / f"{name}.csv", buf.getvalue(), mode=mode)
    write_text(out / f"{name}.jsonl", "".join(json_text(r, compact=True) for r in rows), mode=mode)
    return {"csv": str(out / f"{name}.csv"), "jsonl": str(out / f"{name}.jsonl"), "votes": str(len(rows)),
            "unblinded": str(unblind).lower()}

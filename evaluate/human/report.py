"""The agreement tables of a human study, with the paper's Table 6 and 7 numbers beside ours.

``human report study=...`` writes ``<study>/report/agreement.{md,json}`` and ``tables/<id>.{md,csv,tex}``; the
study report (``python -m harness report run=... human_study=...``) includes the same tables. They are
:class:`evaluate.reporting.tables.Table` objects, so Markdown, CSV, LaTeX and the HTML page render them like every
other table.

The paper's numbers come from ``evaluate/paper_numbers.yaml``: entries of Tables 6 and 7 carry ``human:
{measure, metric | dimension}`` naming our counterpart (``metric: min`` / ``max`` = the lowest / highest of our
metrics). A paper number is compared with ours only where our metric is the same metric; whether it was computed
with the paper's backbone is said in its own column, since a weight-free diagnostic backbone makes the comparison
no reproduction check.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.cases import ASPECTS

from .analysis import ALL, analyse
from .common import DYNAMIC, REPORT_DIR, Record

if TYPE_CHECKING:
    from evaluate.reporting.cells import Cell
    from evaluate.reporting.tables import Table

#: our dynamic dimension -> the paper's Table 7 row name
DIMENSIONS = {"overall": "Overall", "return_progress": "Return Progress", "persistence_reset": "Persistence/Reset",
              "final_state": "Final State", "causal_physical": "Causal/Physics"}


def _f(v: float | None, digits: int = 3) -> str:
    from evaluate.reporting.cells import fixed

    return "n/c" if v is None or not np.isfinite(v) else fixed(v, digits)


def _pct(r: Record) -> Cell:
    """The agreement as a share with its interval over the decisive pairs (a Cell: printed as a percentage,
    written to CSV as numbers: agreement, :lo, :hi, :n = decisive pairs)."""
    from evaluate.reporting.cells import Cell

    if not np.isfinite(r["agreement"]):
        return Cell(reason="no decisive pair (every pair a majority tie or a split)", kind="rate")
    return Cell(float(r["agreement"]), float(r["lo"]), float(r["hi"]), int(r["decisive"]), kind="rate")


def _num(v: float | None, reason: str = "undefined") -> Cell | float:
    """A statistic as a plain number (CSV: a number), or an n/c Cell with the reason."""
    from evaluate.reporting.cells import Cell

    if v is None or not np.isfinite(v):
        return Cell(reason=reason)
    return float(v)


def _paper(data: Record | None = None) -> tuple[list[Record], dict[str, Record]]:
    """(Table 6/7 entries with a ``human`` spec, metric id -> {name, backbone})."""
    if data is None:
        from evaluate.reporting.paper import load_paper_numbers

        data = load_paper_numbers()
    by_id = {v["id"]: {"name": k, "backbone": v["backbone"]} for k, v in (data.get("metrics") or {}).items()}
    return [e for e in data["numbers"] if e.get("human")], by_id


def _paper_value(entries: list[Record], measure: str, name: str) -> str:
    for e in entries:
        h = e["human"]
        if h.get("measure") == measure and (h.get("metric") == name or h.get("dimension") == name):
            return f"{e['value']:g}"
    return ""


def _backbone_is_paper(key: str, by_id: Record) -> str:
    mid = key.split("[")[0]
    if mid not in by_id or "[" not in key:
        return ""
    ours, paper = key.split("[", 1)[1].rstrip("]").split("+"), by_id[mid]["backbone"].split("+")
    same = len(ours) == len(paper) and all(a.startswith(b) for a, b in zip(ours, paper))
    return "yes" if same else f"no (paper: {by_id[mid]['backbone']})"


def static_tables(res: Record, suffix: str = "", paper: Record | None = None) -> list[Table]:
    from evaluate.reporting.cells import plural
    from evaluate.reporting.tables import Column, Table

    entries, by_id = _paper(paper)
    t = Table(f"human_static{suffix}", "Human evaluation: static memory (blinded A/B pairs; paper Table 6)",
              f"{plural(res['items'], 'pair')}, {plural(res['votes'], 'vote')} by "
              f"{plural(len(res['annotators']), 'annotator')}. Agreement = share "
              "of the pairs with a decisive human majority (more than half of the votes for A or for B) whose "
              "majority side is the side the metric scores higher, with a 95 % percentile bootstrap interval over "
              "those pairs (" + f"{res['bootstrap']['n']} resamples, seed {res['bootstrap']['seed']}). Majority "
              "ties and splits (three-way A / Tie / B with three annotators) are not in the denominator; metric "
              "ties = decisive pairs the metric scored equal (never an agreement). Spearman rho: human vs automatic "
              "win rates (Win / Tie / Loss = 1 / 0.5 / 0; human from every raw vote) across the arms. Fleiss' "
              "kappa of the A / Tie / B votes over the pairs.",
              ["metric"], [Column("pairs", "pairs"), Column("complete", "fully voted"),
                           Column("decisive", "decisive"), Column("agree", "agree"),
                           Column("agreement", "agreement [95% CI]"), Column("majority_ties", "majority ties"),
                           Column("splits", "splits"), Column("metric_ties", "metric ties"),
                           Column("arms", "arms"), Column("spearman", "Spearman rho (arms)"),
                           Column("kappa", "Fleiss kappa"), Column("paper_agreement", "paper agreement [%]"),
                           Column("paper_rho", "paper rho"), Column("backbone", "paper's backbone")])
    for m, r in res["metrics"].items():
        name = by_id.get(r["metric_id"], {}).get("name", "")
        t.rows.append(((m,), {
            "pairs": r["pairs"], "complete": r["complete"], "decisive": r["decisive"], "agree": r["agree"],
            "agreement": _pct(r), "majority_ties": r["majority_ties"], "splits": r["splits"],
            "metric_ties": r["metric_ties"], "arms": len(r["win_rates"]),
            "spearman": _num(r["spearman"], r["spearman_reason"] or "undefined"),
            "kappa": _num(r["fleiss_kappa"], "undefined (fewer than two votes a pair, or one answer only)"),
            "paper_agreement": _paper_value(entries, "agreement_pct", name),
            "paper_rho": _paper_value(entries, "rho", name),
            "backbone": _backbone_is_paper(m, by_id)}))  # "" for ALL: it names no backbone
    w = Table(f"human_winrates{suffix}", "Human evaluation: win rates per arm",
              "Per metric and arm (model / context policy): the human win rate over every raw vote of its pairs and "
              "the automatic win rate over the same pairs (Win / Tie / Loss = 1 / 0.5 / 0).",
              ["metric", "arm"], [Column("human", "human win rate"), Column("auto", "automatic win rate"),
                                  Column("votes", "votes"), Column("pairs", "pairs")])
    for m, r in res["metrics"].items():
        for arm, x in sorted(r["win_rates"].items()):
            w.rows.append(((m, arm), {"human": _num(x["human"], "no vote"), "auto": _num(x["auto"]),
                                      "votes": x["votes"], "pairs": x["pairs"]}))
    return [t, w, ranking_table(res, suffix), attention_table(res, suffix)]


def attention_table(res: Record, suffix: str = "") -> Table:
    """Per annotator: the attention checks answered, passed and failed (the failed items named), and whether
    their votes were left out (``human report exclude=failed_checks``)."""
    from evaluate.reporting.tables import Column, Table

    att = res.get("attention") or {}
    excluded = set(res.get("excluded") or [])
    what = ("Attention checks look like any instance, but the clip is its first frame held still, so one answer "
            "is right: the event does not start." if res.get("kind") == DYNAMIC else
            "Attention checks look like any pair, but one clip is of another case than the first view, so one "
            "answer is right: the side of the matching case.")
    t = Table(f"human_attention{suffix}", "Attention checks per annotator",
              what + " They never enter the statistics above. A failed "
              "check is reported here; `human report exclude=failed_checks` leaves out every vote of an annotator "
              "who failed one (the statistics above then say how many annotators remain).",
              ["annotator"], [Column("checks", "checks answered"), Column("passed", "passed"),
                              Column("failed", "failed"), Column("failed_items", "failed items"),
                              Column("excluded", "votes excluded")])
    for a, r in sorted(att.items()):
        t.rows.append(((a,), {"checks": r["checks"], "passed": r["passed"], "failed": len(r["failed"]),
                              "failed_items": ", ".join(r["failed"]), "excluded": "yes" if a in excluded else "no"}))
    if not t.rows:
        t.notes.append("No attention check was planned (human plan ... checks=N) or none is answered yet.")
    return t


def ranking_table(res: Record, suffix: str = "") -> Table:
    """Beyond the paper: per metric, the arms ranked from the raw votes (Bradley-Terry, evaluate/human/ranking.py)
    with 95 % bootstrap intervals, beside the metric's own ranking and their Spearman agreement."""
    from evaluate.reporting.tables import Column, Table

    t = Table(f"human_ranking{suffix}", "A ranking from people: Bradley-Terry from the A/B votes (beyond the paper)",
              "Per metric's pairs: each arm's Bradley-Terry strength fitted to every raw vote (a vote for a side is a "
              "win, a tie half a win of each side; log-odds scale, mean 0: P(i preferred over j) = 1 / (1 + "
              "exp(-(s_i - s_j)))) with a 95 % percentile bootstrap interval over the pairs, its rank among the "
              "arms, and the metric's own rank of the same arms (by its automatic win rate over the same pairs). "
              "rho: Spearman's rho of the strengths and the automatic win rates across the arms (the agreement of "
              "the two rankings). n/c: no finite estimate (an arm won or lost every vote) or fewer than 3 arms.",
              ["metric", "arm"], [Column("score", "human strength [95% CI]"), Column("rank_human", "human rank"),
                                  Column("auto", "metric win rate"), Column("rank_metric", "metric rank"),
                                  Column("votes", "votes"), Column("rho", "rho (rankings agree)")])
    for m, r in res["metrics"].items():
        bt = r.get("bradley_terry")
        if not bt:
            continue
        from evaluate.reporting.cells import Cell

        rho = _num(bt["spearman"], bt["spearman_reason"] or "undefined")
        # unranked arms (no finite strength) last, however many arms are ranked
        by_rank = sorted(bt["arms"].items(), key=lambda kv: (kv[1]["rank_human"] is None, kv[1]["rank_human"], kv[0]))
        for arm, x in by_rank:
            if x["score"] is None:
                score = Cell(reason=bt["reason"] or "no estimate")
            else:  # the interval over pairs; n = the arm's votes
                lo, hi = (x["lo"], x["hi"]) if x["lo"] is not None else (float("nan"), float("nan"))
                score = Cell(x["score"], lo, hi, max(1, x["votes"]))
            t.rows.append(((m, arm), {"score": score, "rank_human": x["rank_human"],
                                      "auto": _num(x["auto_win_rate"]), "rank_metric": x["rank_metric"],
                                      "votes": x["votes"], "rho": rho}))
    return t


def _corr_cell(r: Record, col: str) -> Cell:
    """A correlation with its bootstrap interval as a Cell (n = instances), or n/c with the reason."""
    from evaluate.reporting.cells import Cell

    if r[col] is None or not np.isfinite(r[col]):
        return Cell(reason=r.get(f"{col}_reason") or "undefined")
    lo, hi = r.get(f"{col}_lo"), r.get(f"{col}_hi")
    return Cell(float(r[col]), float("nan") if lo is None else float(lo), float("nan") if hi is None else float(hi),
                int(r["n"]))


def dynamic_tables(res: Record, suffix: str = "", paper: Record | None = None) -> list[Table]:
    from evaluate.reporting.cells import plural
    from evaluate.reporting.tables import Column, Table

    entries, _ = _paper(paper)
    t = Table(f"human_dynamic{suffix}", "Human evaluation: dynamic memory checklist (paper Table 7)",
              f"{res['instances_voted']} of {plural(res['items'], 'instance')} voted ({plural(res['votes'], 'vote')} "
              f"by {plural(len(res['annotators']), 'annotator')}), {res['instances_judged']} with the judge's verdict "
              f"({res['judge']}). Each annotator's item scores are gated like the judge's (no event start in the "
              "initial hold: all eight 0; else 1 where the answer matches the reference); the per-item majority is "
              "the human label; human and judge scores are the satisfied fractions per instance (per aspect: its "
              "two items). Spearman rho and PLCC across instances, 95 % percentile bootstrap intervals over "
              "instances (resamples where a correlation is undefined are dropped).",
              ["dimension"], [Column("n", "instances"), Column("human_mean", "human mean"),
                              Column("vlm_mean", "judge mean"), Column("spearman", "Spearman rho [95% CI]"),
                              Column("plcc", "PLCC [95% CI]"), Column("paper_rho", "paper rho"),
                              Column("paper_plcc", "paper PLCC")])
    for d in ["overall", *ASPECTS]:
        r = res["dimensions"][d]
        rho, pl = _corr_cell(r, "spearman"), _corr_cell(r, "plcc")
        name = DIMENSIONS[d]
        t.rows.append(((name,), {"n": r["n"], "human_mean": _num(r["human_mean"], "no instance"),
                                 "vlm_mean": _num(r["vlm_mean"], "no instance"),
                                 "spearman": rho, "plcc": pl, "paper_rho": _paper_value(entries, "rho", name),
                                 "paper_plcc": _paper_value(entries, "plcc", name)}))
    a = Table(f"human_dynamic_agreement{suffix}", "Human evaluation: dynamic memory, annotator agreement",
              "Fleiss' kappa of the annotators' gate decisions (per instance) and of their gated item scores (per "
              "checklist item); how often the judge's gate and gated items equal the human majority; labels left "
              "undecided by an even split of votes.",
              ["measure"], [Column("value", "value")])
    for k, lab in (("fleiss_kappa_gate", "Fleiss kappa, event gate"), ("fleiss_kappa_items", "Fleiss kappa, items"),
                   ("gate_agreement", "judge gate = human majority"), ("item_agreement", "judge item = human label")):
        a.rows.append(((lab,), {"value": _num(res[k])}))
    a.rows.append((("undecided item labels",), {"value": res["tied_labels"]}))
    a.rows.append((("fully voted instances",), {"value": res["complete"]}))
    return [t, a, attention_table(res, suffix)]


def paper_table(res: Record, suffix: str = "", paper: Record | None = None) -> Table:
    """Every Table 6 / 7 number of the paper beside our counterpart (where we have the same metric)."""
    from evaluate.reporting.tables import Column, Table

    entries, by_id = _paper(paper)
    name_to_key = {}
    if res["kind"] != DYNAMIC:
        for m, r in res["metrics"].items():
            if r["metric_id"] in by_id:  # ALL's id ("all metrics") is never a metric's
                name_to_key[by_id[r["metric_id"]]["name"]] = m
    t = Table(f"human_paper{suffix}", "Human evaluation: ours vs the paper (Tables 6, 7)",
              "Each number of Tables 6 and 7 stated in the paper's text, with ours where this study has the same "
              "quantity (the paper: 504 pairs over six metrics and 50 dynamic instances, three annotators, nine "
              "models). 'paper's backbone' says whether our metric used the paper's backbone.",
              ["paper table", "row", "column"],
              [Column("paper", "paper"), Column("ours", "ours"), Column("metric", "our metric"),
               Column("backbone", "paper's backbone")])
    for e in entries:
        h = e["human"]
        if (e["table"] == "Table 7") != (res["kind"] == DYNAMIC):
            continue
        paper_val = f"{e['value']:g}" + (f" of {e['of']}" if "of" in e else "")
        ours, key = _ours(res, h, name_to_key)
        t.rows.append(((e["table"], e["row"], e["column"]), {
            "paper": paper_val, "ours": ours, "metric": key or "",
            "backbone": _backbone_is_paper(key, by_id) if key else ""}))
    return t


def _ours(res: Record, h: Record, name_to_key: Record) -> tuple[str, str | None]:
    measure = h["measure"]
    if res["kind"] == DYNAMIC:
        dim = h.get("dimension")
        if measure in ("rho", "plcc"):
            col = "spearman" if measure == "rho" else "plcc"
            if dim in ("min", "max"):
                vals = [(res["dimensions"][d][col], d) for d in ASPECTS if np.isfinite(res["dimensions"][d][col])]
                if not vals:
                    return "n/c", None
                v, d = (min if dim == "min" else max)(vals)
                return _f(v), f"dynamic.{d}"
            by_name: dict[Any, str] = {v: k for k, v in DIMENSIONS.items()}
            key = by_name.get(dim)
            if key is None:
                return "", None
            return _f(res["dimensions"][key][col]), f"dynamic.{key}"
        if measure == "instances":
            return str(res["instances_voted"]), None
        if measure == "items":
            return str(8 * res["instances_voted"]), None
        if measure == "judgements":
            return str(8 * res["votes"]), None
        return "", None
    m = h.get("metric")
    if measure in ("pairs", "judgements"):
        return str(res["metrics"][ALL]["pairs"] if measure == "pairs" else res["votes"]), None
    if measure in ("tasks", "judgements_per_metric"):
        # the paper's "tasks" are its pairs per metric (504 / 6 = 84) and its judgements per metric 3 x 84; ours
        # per metric exactly when every metric has the same count, else the mean and the range (never a floor)
        per = []
        for k, r in res["metrics"].items():
            if k == ALL:
                continue
            # every vote counts once for each of the pair's two arms in the win rates
            per.append(r["pairs"] if measure == "tasks" else sum(x["votes"] for x in r["win_rates"].values()) // 2)
        if not per:
            return "", None
        lo, hi = min(per), max(per)
        if lo == hi:
            return f"{lo} (pairs per metric)" if measure == "tasks" else str(lo), None
        what = "pairs" if measure == "tasks" else "votes"
        return f"{np.mean(per):.1f} {what} per metric on average ({lo} to {hi})", None
    if m in ("min", "max"):  # over the paper's six metrics only (a protocol extension is not one of them)
        from .design import PAPER_STATIC

        if measure != "agreement_pct":
            return "", None  # the paper states only the agreement's extremes
        vals = [(r["agreement"], k) for k, r in res["metrics"].items()
                if r["metric_id"] in PAPER_STATIC and np.isfinite(r["agreement"])]
        if not vals:
            return "n/c (no metric of the paper's six has a decisive pair here)", None
        v, k = (min if m == "min" else max)(vals)
        return _f(100 * v, 1), k
    key = name_to_key.get(str(m)) if m is not None else None
    if key is None:
        return "", None  # not in this study
    r = res["metrics"][key]
    if measure == "agreement_pct":
        return _f(100 * r["agreement"], 1), key
    if measure == "agreements":
        return f"{r['agree']} of {r['decisive']}", key
    if measure == "majority_ties":
        return str(r["majority_ties"]), key
    if measure == "splits":
        return str(r["splits"]), key
    if measure == "rho":
        return (_f(r["spearman"]) if np.isfinite(r["spearman"]) else f"n/c ({r['spearman_reason']})"), key
    return "", key


def study_tables(study_dir: Path, suffix: str = "", res: Record | None = None) -> list[Table]:
    """The tables of one study (for ``human report`` and the study report)."""
    res = res or analyse(study_dir)
    main = dynamic_tables(res, suffix) if res["kind"] == DYNAMIC else static_tables(res, suffix)
    return [*main, paper_table(res, suffix)]


def write_report(study_dir: Path, out_dir: Path | None = None, n_boot: int = 2000,
                 exclude_failed_checks: bool = False) -> dict[str, Any]:
    """Write ``agreement.md`` / ``agreement.json`` and every table (md, csv, tex) to ``<study>/report/``; returns
    ``{"out_dir", "markdown", "json", "tables": [ids], "results"}``. A closed study's report is final (``final``,
    ``closed_utc`` in the results); an open one's is interim and written at mode 0600 (it names the arms)."""
    from evaluate.reporting import render
    from harness.io import json_text, write_text

    from .store import closed_utc

    study_dir = Path(study_dir)
    res = analyse(study_dir, n_boot=n_boot, exclude_failed_checks=exclude_failed_checks)
    closed = closed_utc(study_dir)
    res["closed_utc"], res["final"] = closed, closed is not None
    tables = study_tables(study_dir, res=res)
    out = Path(out_dir) if out_dir else study_dir / REPORT_DIR
    # the tables name the arms: while votes may still come they are the organiser's only (0600, like key.json)
    mode = None if closed else 0o600
    for t in tables:
        write_text(out / "tables" / f"{t.id}.md", render.markdown(t), mode=mode)
        write_text(out / "tables" / f"{t.id}.csv", render.to_csv(t), mode=mode)
        write_text(out / "tables" / f"{t.id}.tex", render.latex(t), mode=mode)
    status = (f"Final: the study was closed at {closed} UTC; no vote can be added." if closed else
              "Interim: the study is open and votes may still come (close it with `python -m harness human close "
              "study=...`). These files name the arms, so they are the organiser's only (mode 0600) until then.")
    md = "\n".join([f"# Human study: {study_dir.name} ({res['kind']})", "", status, ""]
                   + [render.markdown(t) for t in tables])
    write_text(out / "agreement.md", md, mode=mode)
    write_text(out / "agreement.json", json_text(res), mode=mode)  # strict JSON: NaN as null
    return {"out_dir": str(out), "markdown": str(out / "agreement.md"), "json": str(out / "agreement.json"),
            "tables": [t.id for t in tables], "results": res, "text": md}

"""The verdict in words: what a page opens with, what ``analyses.md`` starts with and what the console prints.

Per comparison (the policies of a model, or the models) and per metric that separates two contenders (paired
interval excludes 0 and the difference reaches the metric's resolution): the contenders best first with ``≫``
(ten resolutions or more), ``>`` (separated) or ``≈`` (not) between neighbours, the best one's speedup vs FullKV,
and every paired difference with its interval. Metrics computed on
both sides that separate nothing are listed in one line. With one model under one policy there is nothing to
compare: the verdict says so and gives the headline numbers instead.
"""

from __future__ import annotations

from typing import Any

from ..catalog import direction, is_table2_key, spec_of
from .analyses import Analyses, Comparison, VerdictLine, chance_text
from .cells import Cell, fixed, fmt, plural

#: verdict lines shown per comparison before "also separating: ..." (the tables hold every metric)
MAX_LINES = 8
#: headline metrics of a single-contender page
MAX_HEADLINE = 6
#: what a single-contender verdict suggests; a caller whose command cannot follow it (a sweep job, external
#: videos) swaps it for its own (harness.app.cli)
NO_COMPARISON_HINT = "Run several (e.g. `-m context=fullkv,sliding,fov`) for a verdict."


def _num(c: Cell, signed: bool = False) -> str:
    """A cell as ``0.994 [0.992, 0.996] n=10`` (no interval below three units)."""
    return fmt(c, signed=signed)


def _arrow(key: str) -> str:
    d = direction(key)
    return "" if d is None else (" ↑" if d else " ↓")


def line_data(line: VerdictLine) -> dict[str, Any]:
    """One separating metric as data (the page's verdict table, ``analyses.json``)."""
    c, m = line.comparison, line.metric
    r = line.ranking
    speed = c.speedup.get(line.best) if line.best != "fullkv" else None  # FullKV's own speedup is 1
    return {"comparison": c.title, "metric": line.key, "direction": "higher" if m.higher_is_better else "lower",
            "paper_metric": is_table2_key(line.key), "chance": chance_text(line.key).strip(" ()") or None,
            "ranking": [{"name": n, "mean": m.means[n].mean, "text": _num(m.means[n])} for n in r],
            "relations": line.relations(), "best": line.best,
            "best_speedup": _num(speed) if speed is not None and speed.ok() else None,
            "diffs": [{"a": a, "b": b, "text": _num(m.diffs[(a, b)], signed=True), "separated": m.separated(a, b)}
                      for a, b in c.pairs]}


#: metric families whose scores measure how much of the world comes back (what "keeps more of the world" means)
MEMORY_FAMILIES = ("environment", "departure", "human", "object")


def answer(an: Analyses, c: Comparison) -> str | None:
    """The comparison's answer in one sentence, for the first screen: on its most telling memory metric (the
    verdict's order: paper metrics first, then by how clearly they separate), who keeps more of the world than
    whom, with the paired difference and its interval; None when no memory metric separates (the verdict says
    so). ``FoV keeps more of the world than Sliding on departure.return_visible[...] ↑: fov 1.000 vs sliding
    0.023, paired fov − sliding +0.977 [0.954, 0.997] n=4.``"""
    names = {"fov": "FoV", "sliding": "Sliding", "fullkv": "FullKV"} if c.kind == "policies" else {}
    for x in an.verdict.lines:
        sp = spec_of(x.key)
        if x.comparison is not c or sp is None or sp.family not in MEMORY_FAMILIES or not sp.higher_is_better:
            continue
        r, m = x.ranking, x.metric
        j = next(i for i in range(1, len(r)) if m.separated(r[0], r[i]))  # the verdict line separates someone
        top, rest = r[:j], [n for n in r[j:] if m.separated(r[0], n)]
        who = " and ".join(names.get(n, n) for n in top)
        verb = "keeps" if len(top) == 1 else "keep"
        d = m.diff(r[0], rest[0])
        return (f"{who} {verb} more of the world than {' and '.join(names.get(n, n) for n in rest)} on {x.key}"
                f"{_arrow(x.key)}: " + ", ".join(f"{n} {fixed(m.means[n].mean)}" for n in r) +
                f"; paired {r[0]} − {rest[0]} {_num(d, signed=True)} (95 % bootstrap interval over matched videos).")
    return None


def chain(line: VerdictLine) -> str:
    """``fullkv 0.994 ≈ fov 0.994 > sliding 0.732``."""
    r, rel, m = line.ranking, line.relations(), line.metric
    out = f"{r[0]} {fixed(m.means[r[0]].mean)}"
    for i, name in enumerate(r[1:]):
        out += f" {rel[i]} {name} {fixed(m.means[name].mean)}"
    return out


def latency_text(c: Comparison) -> str:
    parts = []
    for p in c.contenders:
        lat = c.latency.get(p)
        if lat is None or not lat.ok():
            continue
        sp = c.speedup.get(p)
        extra = f", {_num(sp)} vs FullKV" if sp is not None and sp.ok() and p != "fullkv" else ""
        parts.append(f"{p} {lat.mean:.2f} s{extra}")
    return ("generation time per video (wall clock of the generate call; a KV-context cost only for a model that "
            "attends over a KV cache, not for the CPU reference renderer): " + "; ".join(parts)) if parts else ""


def headline(an: Analyses) -> list[str]:
    """The computed headline numbers of a page without a comparison: the paper's metrics, else the memory
    variants (higher-is-better scores)."""
    s = an.study
    main = s.main_items()
    out = []
    for model, (ctx, its) in main.items():
        keys = [k for k in s.table2_keys if k in s.computed_keys]
        what = "paper metrics"
        if not keys:
            what = "variants (no paper metric computed: see the main table)"
            keys = [k for k in s.computed_keys if (sp := spec_of(k)) is not None and sp.higher_is_better
                    and sp.family in ("environment", "human", "object", "departure")]
        cells = [(k, s.metric_cell(its, k)) for k in keys]
        cells = [(k, c) for k, c in cells if c.ok()][:MAX_HEADLINE]
        if cells:
            out.append(f"{model} / {ctx}, {what}: " + "; ".join(f"{k}{_arrow(k)} {_num(c)}{chance_text(k)}"
                                                                 for k, c in cells))
    return out


def verdict_lines(an: Analyses) -> list[str]:
    """The verdict as plain lines (Markdown list items where ``- `` leads)."""
    v = an.verdict
    s = an.study
    if not v.comparisons:
        models = sorted({it.model for it in s.items})
        ctxs = sorted({it.context for it in s.items})
        head = (f"Nothing to compare: {', '.join(models)} under {', '.join(ctxs)} ({plural(len(s.items), 'video')}), no other "
                f"policy or model on the same videos. {NO_COMPARISON_HINT}")
        return [head] + [f"- {x}" for x in headline(an)]
    out = []
    for i, c in enumerate(v.comparisons):
        lines = [x for x in v.lines if x.comparison is c]
        out.append(f"{c.header}:")
        ans = answer(an, c)
        if ans:
            out.append(f"- answer: {ans}")
        if not lines:
            out.append("- no metric separates them (every paired 95 % interval includes 0, or fewer than 3 pairs)")
        for x in lines[:MAX_LINES]:
            d = line_data(x)
            diffs = "; ".join(f"{e['a']} - {e['b']} {e['text']}" for e in d["diffs"])
            sp = f" (speedup {d['best_speedup']})" if d["best_speedup"] else ""
            if x.comparison.kind == "policies" and x.best == "fullkv":
                sp = " (the FullKV baseline)"
            paper = "" if d["paper_metric"] else " [variant]"
            out.append(f"- {x.key}{_arrow(x.key)}{chance_text(x.key)}{paper}: {chain(x)}; best {x.best}{sp}; "
                       f"{diffs}")
        if len(lines) > MAX_LINES:
            out.append("- also separating: " + ", ".join(x.key for x in lines[MAX_LINES:]))
        if v.quiet.get(i):
            out.append("- not separating: " + ", ".join(v.quiet[i]))
        lat = latency_text(c)
        if lat:
            out.append(f"- {lat}")
    return out


def verdict_markdown(an: Analyses) -> str:
    return "\n".join(["## Verdict", "", *verdict_lines(an), ""])

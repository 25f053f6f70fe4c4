"""Analyses across items: multi-revisit decay, cross-axis excess degradation, departure/return qualification and
tracking-supported subsets (appendix G.1), and the context-policy comparison with latency (appendix H).

Beyond the paper: bootstrap intervals for every mean, paired comparisons between policies on matched items, and the
cross-departure consistency diagnostic (in the metric tables).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from .aggregate import bootstrap_ci, paired_bootstrap


def _per_revisit(m: dict) -> list[float] | None:
    """Per-revisit values of a metric entry (entity metrics: the mean over targets per revisit)."""
    if "per_revisit" in m:
        return [float(x) for x in m["per_revisit"]]
    if "per_target" in m and m["per_target"]:
        arr = np.array([v for v in m["per_target"].values()], dtype=float)
        return list(arr.mean(axis=0))
    return None


def _qualified(m: dict, k: int, dep_deg: float, tol: float) -> bool:
    q = m.get("qualification") or []
    return k < len(q) and q[k]["departure_deg"] >= dep_deg and q[k]["return_error_deg"] <= tol


def _tracked(m: dict, k: int) -> bool:
    ev = m.get("tracking_evidence") or {}
    return bool(ev) and all(e[k]["departed"] and e[k]["returned"] for e in ev.values() if k < len(e))


def multi_revisit(results: list[dict], boot: dict, dep_deg: float, tol: float) -> list[dict]:
    """Per (model, context, trajectory, metric): mean per revisit R1..RK and the decay R1 - RK, on all cases and on
    the fixed subset whose every revisit is qualified (pose for environment, tracking for entities)."""
    groups: dict[tuple, list[list[float]]] = defaultdict(list)
    qual: dict[tuple, list[list[float]]] = defaultdict(list)
    for r in results:
        it = r["item"]
        K = r["num_revisits"]
        if K < 2:
            continue
        for key, m in r["metrics"].items():
            pr = _per_revisit(m) if m["status"] == "computed" else None
            if not pr:
                continue
            g = (it["model"], it["context"], it["trajectory"], key)
            groups[g].append(pr)
            if all(_qualified(m, k, dep_deg, tol) or _tracked(m, k) for k in range(K)):
                qual[g].append(pr)
    out = []
    for g, vals in sorted(groups.items()):
        arr = np.array(vals)
        decay = arr[:, 0] - arr[:, -1]
        q = np.array(qual.get(g, []))
        out.append({"model": g[0], "context": g[1], "trajectory": g[2], "metric": g[3],
                    "per_revisit_mean": arr.mean(axis=0).tolist(), "decay_R1_minus_RK": bootstrap_ci(decay, **_b(boot)),
                    "qualified_n": int(len(q)),
                    "qualified_decay": bootstrap_ci(q[:, 0] - q[:, -1], **_b(boot)) if len(q) else None})
    return out


def _b(boot: dict) -> dict:
    return {"n_boot": int(boot.get("n", 2000)), "seed": int(boot.get("seed", 0))}


def cross_axis(results: list[dict], boot: dict, dep_deg: float = 30.0, tol: float = 30.0) -> list[dict]:
    """Δ_axis = d_LRUD - d_LRLR with d = R1 - R2, per case on the cases present in both, then averaged; also on the
    fixed subset where both revisits of both trajectories qualify (pose for environment, tracking for entities)."""
    d: dict[tuple, dict[str, dict]] = defaultdict(lambda: defaultdict(dict))
    ok: dict[tuple, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for r in results:
        it = r["item"]
        if it["trajectory"] not in ("lrlr", "lrud"):
            continue
        for key, m in r["metrics"].items():
            pr = _per_revisit(m) if m["status"] == "computed" else None
            if pr and len(pr) >= 2:
                g = (it["model"], it["context"], it["seed"], key)
                d[g][it["trajectory"]][it["case_id"]] = pr[0] - pr[1]
                if all(_qualified(m, k, dep_deg, tol) or _tracked(m, k) for k in (0, 1)):
                    ok[g][it["trajectory"]].add(it["case_id"])
    out = []
    for (model, ctx, seed, key), per in sorted(d.items()):
        cases = sorted(set(per.get("lrlr", {})) & set(per.get("lrud", {})))
        if not cases:
            continue
        a = [per["lrud"][c] for c in cases]
        b = [per["lrlr"][c] for c in cases]
        q = sorted(set(cases) & ok[(model, ctx, seed, key)]["lrlr"] & ok[(model, ctx, seed, key)]["lrud"])
        out.append({"model": model, "context": ctx, "seed": seed, "metric": key, "cases": cases,
                    "d_lrlr": float(np.mean(b)), "d_lrud": float(np.mean(a)),
                    "delta_axis": paired_bootstrap(a, b, **_b(boot)),
                    "qualified_cases": q,
                    "qualified_delta_axis": paired_bootstrap([per["lrud"][c] for c in q], [per["lrlr"][c] for c in q],
                                                             **_b(boot)) if q else None})
    return out


def qualification(results: list[dict], dep_deg: float, tolerances: tuple[float, ...]) -> list[dict]:
    """Coverage of pose-qualified environment returns and tracking-supported entity revisits."""
    acc: dict[tuple, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        it = r["item"]
        g = (it["model"], it["context"], it["trajectory"])
        seen_env = False
        for key, m in r["metrics"].items():
            if m["status"] != "computed":
                continue
            if m.get("qualification") and not seen_env:
                seen_env = True
                acc[g].setdefault("pose_source", set()).add(m.get("pose_source") or m.get("return_pose_estimator"))
                for k in range(r["num_revisits"]):
                    acc[g]["departure"].append(m["qualification"][k]["departure_deg"] >= dep_deg)
                    for tol in tolerances:
                        acc[g][f"Q{int(tol)}"].append(_qualified(m, k, dep_deg, tol))
            if m.get("tracking_evidence") and key.startswith(("object.geometry", "human.appearance")):
                for k in range(r["num_revisits"]):
                    acc[g]["tracking"].append(_tracked(m, k))
    return [{"model": g[0], "context": g[1], "trajectory": g[2],
             "pose_source": ", ".join(sorted(str(x) for x in vals.get("pose_source", ()))) or "-",
             **{k: {"rate": float(np.mean(v)), "n": len(v)} for k, v in sorted(vals.items()) if k != "pose_source"}}
            for g, vals in sorted(acc.items())]


def sources(results: list[dict]) -> dict[str, dict[str, list[str]]]:
    """Per metric key: the pose, depth and mask sources its values used (every analysis names its sources). Every
    computed metric is listed; one with none (its windows come from the prescribed path) has empty lists."""
    out: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for r in results:
        for key, m in r["metrics"].items():
            if m["status"] != "computed":
                continue
            used = out[key]  # created here, so a metric that used no estimator is listed too
            for s in ("pose_source", "depth_source", "mask_source"):
                if m.get(s):
                    used[s.split("_")[0]].add(str(m[s]))
    return {k: {s: sorted(v) for s, v in d.items()} for k, d in sorted(out.items())}


def context_policies(results: list[dict], boot: dict) -> list[dict]:
    """Per model with several policies: each metric per policy (matched items), paired differences vs FullKV (and,
    with Sliding in the run, of the other bounded policies vs Sliding: ``paired_vs_sliding``), and latency / speedup
    from the recorded generation timings."""
    by_model: dict[str, dict[str, dict[tuple, dict]]] = defaultdict(lambda: defaultdict(dict))
    for r in results:
        it = r["item"]
        by_model[it["model"]][it["context"]][(it["trajectory"], it["case_id"], it["seed"])] = r
    out = []
    for model, pols in sorted(by_model.items()):
        if len(pols) < 2:
            continue
        common = sorted(set.intersection(*[set(v) for v in pols.values()]))
        if not common:
            continue
        lat = {p: [float(pols[p][k].get("timings_generation", {}).get("generate_s", np.nan)) for k in common]
               for p in pols}
        entry: dict[str, Any] = {"model": model, "matched_items": len(common), "policies": sorted(pols),
                                 "latency_s": {p: bootstrap_ci(v, **_b(boot)) for p, v in lat.items()}}
        if "fullkv" in pols:
            f = np.nanmean(lat["fullkv"])
            entry["speedup_vs_fullkv"] = {p: float(f / np.nanmean(v)) for p, v in lat.items()}
        metrics = sorted({mk for p in pols for it in common for mk, m in pols[p][it]["metrics"].items()
                          if m["status"] == "computed"})
        table = {}
        for mk in metrics:
            vals = {p: [pols[p][it]["metrics"].get(mk, {}).get("value", np.nan) for it in common] for p in pols}
            row = {p: bootstrap_ci(v, **_b(boot)) for p, v in vals.items()}
            if "fullkv" in pols:
                row["paired_vs_fullkv"] = {p: paired_bootstrap(vals[p], vals["fullkv"], **_b(boot))
                                           for p in pols if p != "fullkv"}
            if "sliding" in pols:  # the other bounded policies against the recent-only window (same budget)
                others = [p for p in pols if p not in ("fullkv", "sliding")]
                if others:
                    row["paired_vs_sliding"] = {p: paired_bootstrap(vals[p], vals["sliding"], **_b(boot))
                                                for p in others}
            table[mk] = row
        entry["metrics"] = table
        out.append(entry)
    return out


def run_analyses(out_dir: Path, results: list[dict], ecfg: Any) -> dict[str, str]:
    """``analyses.{json,md}`` of a run; oracle entries are left out of every comparison."""
    from harness.io import write_json, write_text

    from .reporting.collect import drop_oracle

    results = [drop_oracle(r) for r in results]

    tol = ecfg.return_tolerances_deg[0]
    data = {
        "multi_revisit": multi_revisit(results, ecfg.bootstrap, ecfg.departure_deg, tol),
        "tolerance_sensitivity": {str(t): {"multi_revisit": multi_revisit(results, ecfg.bootstrap, ecfg.departure_deg, t),
                                           "cross_axis": cross_axis(results, ecfg.bootstrap, ecfg.departure_deg, t)}
                                  for t in ecfg.return_tolerances_deg[1:]},
        "cross_axis": cross_axis(results, ecfg.bootstrap, ecfg.departure_deg, tol),
        "qualification": qualification(results, ecfg.departure_deg, ecfg.return_tolerances_deg),
        "context_policies": context_policies(results, ecfg.bootstrap),
        "sources": sources(results),
    }
    write_json(out_dir / "analyses.json", data)
    write_text(out_dir / "analyses.md", analyses_markdown(data))
    return {"analyses": str(out_dir / "analyses.md")}


def _ci(c: dict | None) -> str:
    if not c or not np.isfinite(c.get("mean", c.get("diff", np.nan))):
        return "n/a"
    m = c.get("mean", c.get("diff"))
    return f"{m:.3f} [{c['lo']:.3f}, {c['hi']:.3f}]"


def analyses_markdown(data: dict) -> str:
    L = ["# Analyses", ""]
    if data.get("sources"):
        L += ["## Sources (pose / depth / mask source of every metric used below; ground truth never scores)", "",
              "'-': none (frames only; windows come from the prescribed path).", "",
              "| metric | poses | depth | masks |", "| --- | --- | --- | --- |"]
        for k, d in data["sources"].items():
            L.append(f"| {k} | {', '.join(d.get('pose', [])) or '-'} | {', '.join(d.get('depth', [])) or '-'} | "
                     f"{', '.join(d.get('mask', [])) or '-'} |")
        L.append("")
    if data["context_policies"]:
        L += ["## Context-policy comparison (matched items; paired differences vs FullKV and vs Sliding)", ""]
        for e in data["context_policies"]:
            pols = e["policies"]
            pairs = [(p, "fullkv") for p in pols if p != "fullkv"] if "fullkv" in pols else []
            if "sliding" in pols:
                pairs += [(p, "sliding") for p in pols if p not in ("fullkv", "sliding")]
            L += [f"### model={e['model']} ({e['matched_items']} matched items)", "",
                  "| metric | " + " | ".join(pols) + "".join(f" | {a} - {b}" for a, b in pairs) + " |",
                  "| --- |" + " --- |" * (len(pols) + len(pairs))]
            for mk, row in e["metrics"].items():
                diffs = [_ci(row.get(f"paired_vs_{b}", {}).get(a)) for a, b in pairs]
                L.append(f"| {mk} | " + " | ".join(_ci(row[p]) for p in pols) + "".join(f" | {d}" for d in diffs)
                         + " |")
            L.append("| latency [s] | " + " | ".join(_ci(e["latency_s"][p]) for p in pols) + " |")
            if "speedup_vs_fullkv" in e:
                L.append("| speedup vs FullKV | " + " | ".join(f"{e['speedup_vs_fullkv'][p]:.2f}x" for p in pols) + " |")
            L.append("")
    if data["multi_revisit"]:
        L += ["## Multi-revisit decay (R1 - RK; qualified = every revisit pose-qualified or tracking-supported)", "",
              "| model | context | trajectory | metric | per revisit | R1 - RK | qualified n | qualified R1 - RK |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for e in data["multi_revisit"]:
            pr = ", ".join(f"{x:.3f}" for x in e["per_revisit_mean"])
            L.append(f"| {e['model']} | {e['context']} | {e['trajectory']} | {e['metric']} | {pr} | "
                     f"{_ci(e['decay_R1_minus_RK'])} | {e['qualified_n']} | {_ci(e['qualified_decay'])} |")
        L.append("")
    if data["cross_axis"]:
        L += ["## Cross-axis excess degradation Δ_axis = d_LRUD - d_LRLR (d = R1 - R2, matched cases)", "",
              "| model | context | metric | d_LRLR | d_LRUD | Δ_axis | qualified n | qualified Δ_axis |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for e in data["cross_axis"]:
            L.append(f"| {e['model']} | {e['context']} | {e['metric']} | {e['d_lrlr']:.3f} | {e['d_lrud']:.3f} | "
                     f"{_ci(e['delta_axis'])} | {len(e['qualified_cases'])} | {_ci(e['qualified_delta_axis'])} |")
        L.append("")
    if data["qualification"]:
        L += ["## Departure / return coverage (appendix G.1)", ""]
        for e in data["qualification"]:
            rest = ", ".join(f"{k}: {v['rate']:.0%} of {v['n']}" for k, v in e.items()
                             if k not in ("model", "context", "trajectory", "pose_source"))
            L.append(f"- {e['model']} / {e['context']} / {e['trajectory']} (poses: {e.get('pose_source', '-')}): "
                     f"{rest}")
        L.append("")
    return "\n".join(L)

"""The study report (evaluate/reporting): the verdict, tables (the paper's Table 2 apart from the variants, folded
n/c columns), provenance, oracle and dynamic-case exclusion, paper numbers, figures and strips, CLI."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evaluate.reporting import build_report
from evaluate.reporting.cells import unit_value
from tests.support import ROOT
from tests.support.report_data import DEPARTURE, DYNAMIC_PSNR, LATENCY, make_run, per_revisit


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One synthetic run (2 models x 2 policies x 3 trajectories x 3 cases x 2 seeds), tables and page only."""
    root = tmp_path_factory.mktemp("runs")
    run = make_run(root, videos=False)
    out = build_report([run], strips=False, figures=False)
    return run, Path(out["out_dir"]), out


def _csv(out: Path, tid: str) -> list[dict]:
    return list(csv.DictReader((out / "tables" / f"{tid}.csv").open()))


def _row(rows: list[dict], **key) -> dict:
    hits = [r for r in rows if all(r[k] == str(v) for k, v in key.items())]
    assert len(hits) == 1, (key, len(hits))
    return hits[0]


def test_main_table_means_match_an_independent_computation(report):
    _, out, _ = report
    rows = _csv(out, "variants")  # pixel-thumb16 is a diagnostic: a variant, not a Table 2 column
    for model in ("evoke", "lingbot_v2"):
        r = _row(rows, model=model, context="fullkv")
        want = [np.mean(per_revisit(model, "fullkv", t, c, s)) for t in ("lrlr", "lrud", "lrlrlr") for c in (0, 1)
                for s in (1, 2)]
        assert float(r["environment.visible[pixel-thumb16]"]) == pytest.approx(np.mean(want), abs=1e-6)
        assert int(r["environment.visible[pixel-thumb16]:n"]) == len(want) == 12
        lo, hi = float(r["environment.visible[pixel-thumb16]:lo"]), float(r["environment.visible[pixel-thumb16]:hi"])
        assert lo <= np.mean(want) <= hi and lo < hi


def test_every_table_cell_traces_back_to_metrics_json(report):
    _, out, _ = report
    src = json.loads((out / "sources.json").read_text())
    checked = 0
    for tid, t in src["tables"].items():
        for row in t["rows"]:
            for col, cell in row["cells"].items():
                units = cell["units"]
                for u in units:  # each unit recomputed from the files it names
                    assert unit_value(out, u, src["files"]) == pytest.approx(u["value"], abs=1e-9), (tid, col)
                    assert all((out / src["files"][term["file"]]).name == "metrics.json" for term in u["terms"])
                if not units or cell["mean"] is None or not math.isfinite(cell["mean"]):
                    continue
                vals = [u["value"] for u in units]
                if cell["kind"] in ("mean", "rate"):
                    assert cell["mean"] == pytest.approx(np.mean(vals), abs=1e-9), (tid, col)
                elif cell["kind"] == "ratio":
                    ref = [u["value"] for u in units if u["role"] == "reference"]
                    pol = [u["value"] for u in units if u["role"] == "policy"]
                    assert cell["mean"] == pytest.approx(np.mean(ref) / np.mean(pol)), (tid, col)
                elif cell["kind"] in ("spread", "models_mean"):
                    groups: dict = {}
                    for u in units:
                        groups.setdefault(u["role"], []).append(u["value"])
                    assert cell["mean"] == pytest.approx(np.mean([np.mean(g) for g in groups.values()])), (tid, col)
                checked += 1
    assert checked > 100
    # the CSV numbers are the sources' numbers
    main = src["tables"]["variants"]["rows"]
    for r in _csv(out, "variants"):
        cell = next(x for x in main if x["key"] == [r["model"], r["context"]])["cells"]["camera.rpe_rot[classical-opencv]"]
        assert float(r["camera.rpe_rot[classical-opencv]"]) == pytest.approx(cell["mean"], rel=1e-5)


def test_oracle_entries_never_reach_tables_sources_or_page(report):
    run, out, _ = report
    assert "[oracle]" in (run / "lingbot_v2/fullkv/seed-1/lrlr/env_0/metrics.json").read_text()  # input has them
    files = list((out / "tables").iterdir()) + [out / "report.md", out / "sources.json", out / "index.html",
                                                out / "tables.tex"]
    for f in files:
        assert "oracle]" not in f.read_text(), f


def test_not_computed_cells_say_why_and_are_never_zero(report):
    _, out, _ = report
    r = _row(_csv(out, "main"), model="evoke", context="fullkv")  # the CSV keeps every column, with the reason
    assert r["environment.visible[dinov2]"] == "" and "not available" in r["environment.visible[dinov2]:note"]
    # a cell without a value in some rows only: n/c with a footnote (LRLR has no third window)
    md = (out / "tables" / "multi_revisit.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("| evoke | fullkv | lrlr | environment.visible"))
    k = line.split("n/c[")[1].split("]")[0]
    assert f"[{k}] environment.visible[pixel-thumb16] has 2 windows on lrlr" in md
    tex = (out / "tables" / "multi_revisit.tex").read_text()
    assert rf"n/c$^{{{k}}}$" in tex


def test_best_and_second_best_follow_each_metric_direction(report):
    _, out, _ = report
    for tid, marked in (("main", 1), ("variants", 2)):  # main: dynamic; variants: visible (↑) and RPE (↓)
        md = (out / "tables" / f"{tid}.md").read_text()
        evoke = next(x for x in md.splitlines() if x.startswith("| evoke"))
        lingbot = next(x for x in md.splitlines() if x.startswith("| lingbot_v2"))
        assert evoke.count("**") == 2 * marked and lingbot.count("**") == 0, tid
    assert "camera.rpe_rot[classical-opencv] ↓" in md
    tex = (out / "tables" / "variants.tex").read_text()
    # two rows: the best in bold, nothing underlined (a "second best" of two would only restate the loser)
    assert r"\textbf{0.771}" in tex and r"\underline" not in tex and "0.571" in tex


def test_main_table_has_the_paper_metrics_only_and_folds_what_no_row_has(report):
    from evaluate.catalog import TABLE2_ORDER, is_table2_key

    _, out, _ = report
    head = next(csv.reader((out / "tables" / "main.csv").open()))
    cols = [c for c in head if ":" not in c and c not in ("model", "context", "videos")]
    assert len(cols) == len(TABLE2_ORDER) and all(is_table2_key(c) for c in cols)  # one column per metric
    variants = next(csv.reader((out / "tables" / "variants.csv").open()))
    assert "environment.visible[pixel-thumb16]" in variants and not any(is_table2_key(c) for c in variants)
    md = (out / "tables" / "main.md").read_text()
    header = next(x for x in md.splitlines() if x.startswith("| model"))
    assert header.count("[") == 1 and "dynamic.overall[Qwen/Qwen3.8-27B]" in header  # the one computed column
    fold = next(x for x in md.splitlines() if "environment.visible[dinov2]" in x)
    assert fold.startswith("- Not computed in any row:") and "backbone 'dinov2' is not available" in fold
    assert "n/c" not in md  # every n/c column is folded, none is printed cell by cell


def test_context_table_latency_and_speedup(report):
    _, out, _ = report
    rows = _csv(out, "context")
    per = {ctx: LATENCY[ctx] + np.mean([0.1 * c + 0.05 * s for c in range(3) for s in (1, 2)]) for ctx in LATENCY}
    for ctx in ("fullkv", "fov"):
        r = _row(rows, model="lingbot_v2", context=ctx)
        assert float(r["latency_s"]) == pytest.approx(per[ctx])
        assert float(r["speedup"]) == pytest.approx(per["fullkv"] / per[ctx], rel=1e-5)
        assert int(r["videos"]) == 18
    paired = _row(_csv(out, "context_paired"), model="evoke", context="fov", vs="fullkv")
    assert float(paired["environment.visible[pixel-thumb16]"]) == pytest.approx(0.02, abs=1e-6)


def test_multi_revisit_cross_axis_and_qualified_subsets(report):
    _, out, _ = report
    mr = _row(_csv(out, "multi_revisit"), model="evoke", context="fullkv", trajectory="lrlrlr",
              metric="environment.visible[pixel-thumb16]")
    assert float(mr["decay"]) == pytest.approx(0.1) and int(mr["decay:n"]) == 4
    assert int(mr["decay_q:n"]) == 2  # only case 0 returns within 30 deg at every revisit
    assert float(mr["w3"]) < float(mr["w2"]) < float(mr["w1"]) and mr["windows"] == "R1, R2, R3"
    ca = _row(_csv(out, "cross_axis"), model="evoke", context="fullkv", metric="environment.visible[pixel-thumb16]")
    assert float(ca["delta"]) == pytest.approx(0.05) and int(ca["delta:n"]) == 4 and int(ca["delta_q:n"]) == 2
    cov = _row(_csv(out, "coverage"), model="evoke", context="fullkv", trajectory="lrlrlr")
    assert float(cov["D"]) == 1.0 and float(cov["Q30"]) == pytest.approx(8 / 12)
    assert cov["tracking"] == "" and "no entity target" in cov["tracking:note"]


def test_dynamic_decomposition(report):
    _, out, _ = report
    r = _row(_csv(out, "dynamic"), model="lingbot_v2", context="fullkv", metric="dynamic.overall[Qwen/Qwen3.8-27B]")
    assert float(r["started"]) == 3 and float(r["p_start"]) == pytest.approx(0.5)
    assert float(r["s_cond"]) == pytest.approx(0.5) and float(r["s_gated"]) == pytest.approx(0.25)
    assert float(r["s_gated"]) == pytest.approx(float(r["p_start"]) * float(r["s_cond"]))


def test_group_summary_and_seed_spread(report):
    _, out, _ = report
    g = _row(_csv(out, "groups"), model="evoke", context="fov", trajectory="lrud", seed=2)
    assert int(g["videos"]) == 3 and int(g["environment.visible[pixel-thumb16]:n"]) == 2
    s = _row(_csv(out, "seed_spread"), model="evoke", context="fov", trajectory="lrud")
    seed_means = [np.mean([np.mean(per_revisit("evoke", "fov", "lrud", c, sd)) for c in (0, 1)]) for sd in (1, 2)]
    assert float(s["environment.visible[pixel-thumb16]"]) == pytest.approx(np.mean(seed_means))
    assert float(s["environment.visible[pixel-thumb16]:lo"]) == pytest.approx(min(seed_means))
    md = (out / "tables" / "seed_spread.md").read_text()
    assert f"± {np.std(seed_means, ddof=1):.3f}" in md


def test_paper_numbers_file_and_ours_vs_paper(report):
    from evaluate.reporting.paper import load_paper_numbers

    data = load_paper_numbers()
    nums = {(e["table"], e["row"], e["column"]): e["value"] for e in data["numbers"]}
    assert nums[("Table 12(a)", "Environment Visible", "Qualified")] == 0.152
    assert nums[("Table 3 (Sec. 5.5)", "FullKV", "latency [s]")] == 322.2
    assert nums[("Table 5 (App. D.2)", "HY-WorldPlay", "S_gated")] == 0.294
    assert not [k for k in nums if k[0].startswith("Table 2")]  # Table 2's values are not in the paper's text
    _, out, _ = report
    rows = _csv(out, "paper")
    lat = _row(rows, **{"paper table": "Table 3 (Sec. 5.5)", "row": "FullKV", "column": "latency [s]"})
    assert float(lat["diff"]) == pytest.approx(float(lat["ours"]) - 322.2, abs=1e-3)
    vis = _row(rows, **{"paper table": "Table 12(a)", "row": "Environment Visible", "column": "All cases",
                        "metric": "environment.visible[pixel-thumb16]"})
    assert float(vis["ours"]) == pytest.approx(0.1) and vis["same_backbone"].startswith("no")
    pos = _row(rows, **{"paper table": "Table 12(a)", "row": "Environment Visible", "column": "Positive",
                        "metric": "environment.visible[pixel-thumb16]"})
    assert float(pos["ours"]) == 2
    missing = _row(rows, **{"paper table": "Table 7", "row": "Overall", "column": "PLCC"})
    assert missing["ours"] == "" and missing["diff"] == "" and "no counterpart" in missing["ours:note"]


def test_report_files_are_readable_by_others_on_a_shared_filesystem(report):
    import os
    import stat

    _, out, _ = report
    mask = os.umask(0)
    os.umask(mask)
    if mask & 0o044:
        pytest.skip("this umask hides files from group/others by choice")
    for f in [out / "index.html", out / "sources.json", out / "tables" / "main.csv"]:
        assert f.stat().st_mode & stat.S_IROTH, f  # atomic writes must not leave mkstemp's 0600


def test_page_links_are_relative_and_local(report):
    _, out, _ = report
    page = (out / "index.html").read_text()
    assert "http://" not in page and "https://" not in page
    assert "../../lingbot_v2/fullkv/seed-1/lrlr/env_0/meta.json" in page
    assert "../../lingbot_v2/fullkv/seed-1/lrlr/env_0/context_trace.json" in page
    assert "../../lingbot_v2/fullkv/seed-1/lrlr/env_0/controls" in page
    assert page.count("<table class='sortable'") >= 10


def test_axis_floor_is_the_metric_floor():
    from evaluate.reporting.plots import metric_range

    lo, hi, cap = metric_range("environment.visible[pixel-thumb16]", [0.99998, 0.99999])
    assert (lo, hi) == (0.0, 1.0) and "0" in cap and "floor" in cap
    lo, hi, _ = metric_range("camera.rpe_rot[classical-opencv]", [0.02, 0.03])
    assert lo == 0.0 and hi >= 0.03
    assert metric_range("environment.depth[x]", [-0.2, 0.5])[0] == -1.0


@pytest.mark.slow
def test_figures_and_strips_are_written(tmp_path):
    run = make_run(tmp_path, models=("evoke",), contexts=("fullkv", "fov"), trajectories=("lrlrlr",), cases=1,
                   seeds=(1,))
    out = build_report([run])
    figs = out["figures"]
    for name in ("Per-window decay", "Model profile", "Latency vs memory on the metrics that separate the policies"):
        assert {Path(p).suffix for p in figs[name]} == {".png", ".svg"}, name
        assert all(Path(p).stat().st_size > 1000 for p in figs[name])
    strips = sorted((Path(out["out_dir"]) / "strips").glob("*.png"))
    assert len(strips) == 2  # the environment item of each policy (the dynamic item records no return frames)
    from PIL import Image

    w, h = Image.open(strips[0]).size
    assert w > 2 * h  # frame 0 + three return frames side by side
    assert "strips/" in (Path(out["out_dir"]) / "index.html").read_text()


def _harness(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_cli_report_of_two_runs_and_bad_run(tmp_path):
    make_run(tmp_path / "outputs", "a", models=("evoke",), contexts=("fullkv",), trajectories=("lrlr",), cases=1,
             seeds=(1,), videos=False)
    make_run(tmp_path / "outputs", "b", models=("lingbot_v2",), contexts=("fullkv",), trajectories=("lrlr",), cases=1,
             seeds=(1,), videos=False)
    p = _harness("report", "run=a", "run=b", "report_figures=false", "report_strips=false", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = tmp_path / "outputs" / "reports" / "a+b"
    main = (out / "tables" / "main.csv").read_text()
    assert "evoke" in main and "lingbot_v2" in main
    bad = _harness("report", "run=nope", cwd=tmp_path)
    assert bad.returncode == 2 and "run=nope" in bad.stderr


def test_an_item_in_two_runs_counts_once(tmp_path):
    a = make_run(tmp_path, "a", models=("evoke",), contexts=("fullkv",), trajectories=("lrlr",), cases=1, seeds=(1,),
                 videos=False)
    b = make_run(tmp_path, "b", models=("evoke",), contexts=("fullkv", "fov"), trajectories=("lrlr",), cases=1,
                 seeds=(1,), videos=False)
    out = build_report([a, b], tmp_path / "rep", strips=False, figures=False)
    assert out["items"] == 4  # a: env_0 + dynamic_0 under fullkv; b adds its two fov items, not its fullkv copies
    r = _row(_csv(Path(out["out_dir"]), "main"), model="evoke", context="fullkv")
    assert int(r["videos"]) == 2
    assert "2 already in an earlier run" in (Path(out["out_dir"]) / "index.html").read_text()


def test_models_each_at_their_own_seed_are_compared_on_the_same_cases(tmp_path):
    """The nine-model study and an imported release run every model at its own frozen seed: the models are then
    matched on case and trajectory (with a shared seed they are matched on it, as before)."""
    from evaluate.reporting.study import Study

    a = make_run(tmp_path, "a", models=("evoke",), contexts=("fullkv",), trajectories=("lrlr",), cases=2, seeds=(44,),
                 videos=False)
    b = make_run(tmp_path, "b", models=("lingbot_v2",), contexts=("fullkv",), trajectories=("lrlr",), cases=2,
                 seeds=(1,), videos=False)
    from evaluate.reporting.collect import load_items

    items, _ = load_items([a, b])
    models, per = Study(items, {"n": 10, "seed": 0}, str, main_context="fullkv").matched_models()
    assert models == ["evoke", "lingbot_v2"]
    assert sorted(per["evoke"]) == sorted(per["lingbot_v2"]) == [("lrlr", "dynamic_0", -1), ("lrlr", "env_0", -1),
                                                                 ("lrlr", "env_1", -1)]
    assert {it.seed for it in per["evoke"].values()} == {44}
    c = make_run(tmp_path, "c", models=("lingbot_v2",), contexts=("fullkv",), trajectories=("lrlr",), cases=2,
                 seeds=(1, 44), videos=False)
    items, _ = load_items([a, c])
    _, per = Study(items, {"n": 10, "seed": 0}, str, main_context="fullkv").matched_models()
    assert sorted(per["evoke"]) == [("lrlr", "dynamic_0", 44), ("lrlr", "env_0", 44), ("lrlr", "env_1", 44)]


# -- the verdict, windows, colours, strips, dynamic cases, chance -------------------------------------------------


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """One model under FullKV, Sliding and FoV with the departure metrics (Sliding forgets the away view)."""
    run = make_run(tmp_path_factory.mktemp("study"), models=("evoke",), contexts=("fullkv", "sliding", "fov"),
                   trajectories=("lrlr", "lrlrlr"), cases=2, seeds=(1, 2), extras=True)
    out = build_report([run], figures=True, strips=False)
    return run, Path(out["out_dir"]), out


@pytest.mark.slow
def test_the_page_opens_with_the_verdict(study):
    from evaluate.catalog import chance_level

    _, out, rep = study
    page = (out / "index.html").read_text()
    assert page.index("id='verdict'") < page.index("id='t-main'") < page.index("id='cases'")
    v = rep["analyses"].verdict
    lines = {x.key: x for x in v.lines}
    rv = lines["departure.return_visible[pixel-thumb16]"]
    # FoV is 0.005 below FullKV on every video: a real difference, below the metric's resolution (a tie)
    assert rv.ranking == ["fullkv", "fov", "sliding"] and rv.relations() == ["≈", "≫"]
    fs = rv.metric.diff("fov", "sliding")
    assert fs.mean == pytest.approx(DEPARTURE["fov"] - DEPARTURE["sliding"]) and fs.lo > 0 and fs.n == 8
    # the most separating metrics come first; Environment Visible separates FoV from the rest by 0.02 only
    assert v.metrics.index("departure.return_visible[pixel-thumb16]") < v.metrics.index(
        "environment.visible[pixel-thumb16]")
    env = lines["environment.visible[pixel-thumb16]"]
    assert env.best == "fov" and env.relations() == [">", "≈"]
    assert "data-metric='departure.return_visible[pixel-thumb16]' data-best='fullkv'" in page
    assert "fov − sliding +0.575" in page  # FoV - Sliding, with its interval, at the top of the page
    md = (out / "report.md").read_text()
    assert md.index("## Verdict") < md.index("### Main results")
    mean = {p: DEPARTURE[p] + 0.004 * 0.5 + 0.002 * 1.5 for p in DEPARTURE}  # over cases 0, 1 and seeds 1, 2
    chance = chance_level("departure.return_visible[pixel-thumb16]").value
    assert (f"departure.return_visible[pixel-thumb16] ↑ (chance ≈ {chance:.2f}) [variant]: "
            f"fullkv {mean['fullkv']:.3f} ≈ fov {mean['fov']:.3f} ≫ sliding {mean['sliding']:.3f}") in md


def test_emphasis_follows_the_verdict_never_a_tie(study):
    """The policy table bolds a cell only where the verdict separates that policy from every other one: FullKV is
    0.005 above FoV on departure.return_visible (a tie below the metric's resolution), so that column has no bold
    although FullKV has the highest mean; Environment Visible separates FoV (+0.02 on every video): bold."""
    _, out, rep = study
    t = next(x for x in rep["tables_built"] if x.id == "context")
    comp = next(c for c in rep["analyses"].comparisons if c.kind == "policies")
    ranks = t.ranks()
    marked = {(t.rows[i][0][1], k): r for (i, k), r in ranks.items()}
    assert ("fov", "environment.visible[pixel-thumb16]") in marked
    rv = "departure.return_visible[pixel-thumb16]"
    means = {p: t.rows[i][1][rv].mean for i, p in enumerate(r[0][1] for r in t.rows)}
    assert max(means, key=means.get) == "fullkv"  # the highest mean ...
    assert not any(k == rv for (_, k) in marked)  # ... is not bold: it ties with FoV
    for (ctx, key), r in marked.items():  # every mark is a verdict separation from every row below it
        m = comp.metrics[key]
        others = [p for p in comp.contenders if p != ctx and m.means[p].ok()]
        below = [p for p in others if (m.means[p].mean < m.means[ctx].mean) == bool(m.higher_is_better)]
        assert below and all(m.separated(ctx, p) for p in below), (ctx, key)
        if r == 1:
            assert below == others
    page = (out / "index.html").read_text()
    sec = page[page.index("id='t-context'"):page.index("</section>", page.index("id='t-context'"))]
    assert sec.count("class='best") == sum(1 for r in ranks.values() if r == 1)


def test_the_first_screen_states_who_keeps_more_of_the_world(study):
    """The answer sentence opens the verdict: FullKV and FoV tie (0.005 apart, below the resolution), both keep
    more of the away view than Sliding; the paired difference is FullKV - Sliding over the 8 matched static videos."""
    _, out, rep = study
    page = (out / "index.html").read_text()
    sec = page[page.index("id='verdict'"):]
    i = sec.index("<p class='answer'")
    assert i < sec.index("<table class='verdict'")  # before the tables that back it
    text = sec[i:sec.index("</p>", i)]
    assert "FullKV and FoV keep more of the world than Sliding on departure.return_visible[pixel-thumb16] ↑" in text
    d = rep["analyses"].verdict.lines[0].metric.diff("fullkv", "sliding")
    assert d.mean == pytest.approx(DEPARTURE["fullkv"] - DEPARTURE["sliding"]) and d.n == 8 and d.lo > 0
    assert f"paired fullkv − sliding +{d.mean:.3f} [{d.lo:.3f}, {d.hi:.3f}] n=8" in text
    md = (out / "report.md").read_text()
    assert "- answer: FullKV and FoV keep more of the world than Sliding" in md


def test_columns_without_weights_fold_into_one_line():
    from evaluate.reporting.cells import Cell
    from evaluate.reporting.render import folded_lines
    from evaluate.reporting.tables import Column, Table

    def nc(key: str, why: str) -> Cell:
        return Cell(reason=f"{key}: {why}")

    miss = "backbone {!r} (x): weights not found at /w/{} (missing a.pt); fetch them with: python -m harness weights fetch {}"
    cols = [Column(k, k, True) for k in ("a[dinov2]", "b[laion]", "c[sam2]", "d")]
    row = {"a[dinov2]": nc("a[dinov2]", miss.format("dinov2", "dinov2", "dinov2")),
           "b[laion]": nc("b[laion]", miss.format("laion", "laion", "laion")),
           "c[sam2]": nc("c[sam2]", miss.format("sam2", "sam2", "sam2")), "d": nc("d", "no dynamic case")}
    lines = folded_lines(Table("t", "t", "", ["m"], cols, [(("x",), row)], fold=True))
    assert len(lines) == 2  # three backbones without weights: one line; the other reason stays
    assert "a[dinov2], b[laion], c[sam2]" in lines[0] and "python -m harness weights list" in lines[0]
    assert "under /w" in lines[0] and lines[1].endswith("d: no dynamic case")


def test_ranks_mark_nothing_without_a_separation():
    from evaluate.reporting.cells import Cell
    from evaluate.reporting.tables import Column, Table

    def cell(mean: float, n: int = 5) -> Cell:
        return Cell(mean, mean - 0.1, mean + 0.1, n, [])

    cols = [Column("a", "a", True), Column("b", "b", False), Column("c", "c", True)]
    rows = [(("x",), {"a": cell(0.9), "b": cell(0.2), "c": cell(0.5)}),
            (("y",), {"a": cell(0.5), "b": cell(0.2), "c": cell(0.4)}),
            (("z",), {"a": cell(0.1), "b": cell(0.7), "c": cell(0.3)})]
    # a hand-written verdict: on a, every pair separates; on b nothing (x and y tie); on c only x vs z
    sep = {"a": {frozenset("xy"), frozenset("xz"), frozenset("yz")}, "b": set(), "c": {frozenset("xz")}}
    t = Table("t", "t", "", ["m"], cols, rows, mark_best=True,
              separated=lambda a, b, k: frozenset(a[0] + b[0]) in sep[k])
    assert t.ranks() == {(0, "a"): 1, (1, "a"): 2}  # b: tie at the top; c: x not separated from y
    assert Table("t", "t", "", ["m"], cols, rows, mark_best=True).ranks() == {}  # no paired rule: no emphasis


def test_windows_are_named_after_the_trajectory(study):
    _, out, _ = study
    rows = _csv(out, "multi_revisit")
    sweep = {r["trajectory"]: r for r in rows if r["metric"] == "departure.sweep_visible[pixel-thumb16]"
             and r["context"] == "fullkv"}
    assert sweep["lrlr"]["windows"] == "R1, D2, R2" and sweep["lrlrlr"]["windows"] == "R1, D2, R2, D3, R3"
    assert sweep["lrlr"]["w4"] == "" and "3 windows on lrlr" in sweep["lrlr"]["w4:note"]
    env = next(r for r in rows if r["metric"] == "environment.visible[pixel-thumb16]" and r["trajectory"] == "lrlr")
    assert env["windows"] == "R1, R2"
    figs = json.loads((out / "figures" / "figures.json").read_text())
    panel = next(p for p in figs["figures"]["decay"] if p["metric"] == "departure.sweep_visible[pixel-thumb16]"
                 and p["trajectory"] == "lrlr")
    assert panel["windows"] == ["R1", "D2", "R2"]


def test_one_colour_per_policy_in_every_panel(study):
    _, out, rep = study
    figs = json.loads((out / "figures" / "figures.json").read_text())
    colours = figs["colours"]
    assert sorted(colours) == ["fov", "fullkv", "sliding"] and len(set(colours.values())) == 3
    seen = 0
    for fid, panels in figs["figures"].items():
        for p in panels:
            for s in p["series"]:
                assert s["colour"] == colours[s["name"]], (fid, p.get("metric"), s)
                seen += 1
    assert seen > 20
    page = (out / "index.html").read_text()
    for name, colour in colours.items():  # the page's colour key is the figures' mapping
        assert f"data-name='{name}' data-colour='{colour}'" in page
    # latency vs memory plots the metrics that separate the policies, the verdict's, most telling first
    lat = figs["figures"]["latency_vs_memory"]
    assert [p["metric"] for p in lat] == rep["analyses"].verdict.metrics[:4] and all(p["separates"] for p in lat)


@pytest.mark.slow
def test_strips_show_each_metrics_own_frames(tmp_path):
    """Frame i of the synthetic videos is a solid colour of its own: a strip panel shows the frame it claims."""
    from PIL import Image

    from evaluate.reporting.strips import strip_rows
    from tests.support.report_data import departure_windows, frame_colour

    run = make_run(tmp_path, models=("evoke",), contexts=("sliding",), trajectories=("lrlr",), cases=1, seeds=(1,),
                   extras=True)
    rep = build_report([run], figures=False)
    out = Path(rep["out_dir"])
    (it,) = [i for i in rep["analyses"].study.items if i.case_id == "env_0"]
    rows = {tuple(r.scores): r for r in strip_rows(it)}
    away, returns, sweep = departure_windows("lrlr")
    env = next(r for k, r in rows.items() if "environment.visible[pixel-thumb16]" in k)
    assert (env.reference, env.frames, env.labels) == (0, it.entry("environment.visible[pixel-thumb16]").get(
        "return_frames"), ["R1", "R2"])
    dep = rows[("departure.return_visible[pixel-thumb16]",)]
    assert (dep.reference, dep.frames, dep.labels) == (away, returns, ["D2"])  # the away view, not frame 0
    sw = rows[("departure.sweep_visible[pixel-thumb16]",)]
    assert sw.frames == [w[len(w) // 2] for w in sweep] and sw.labels == ["R1", "D2", "R2"]
    png = out / "strips" / "synth__evoke__sliding__seed-1__lrlr__env_0.png"
    img = np.asarray(Image.open(png).convert("RGB")).astype(int)

    def pixels(i: int) -> int:
        return int((np.abs(img - np.array(frame_colour(i))).max(axis=2) <= 12).sum())

    shown = {0, away, *returns, *env.frames, *sw.frames, sw.reference}
    assert all(pixels(i) > 2000 for i in shown), {i: pixels(i) for i in shown}
    assert all(pixels(i) < 200 for i in set(range(12)) - shown - {4, 8}), "a frame no metric scored is shown"
    page = (out / "index.html").read_text()
    assert "data-strip='" in page and "&quot;reference&quot;: 3" in page


def test_dynamic_cases_stay_out_of_static_metrics(study):
    run, out, _ = study
    m = json.loads((run / "evoke/sliding/seed-1/lrlr/dynamic_0/metrics.json").read_text())["metrics"]
    assert m["diagnostic.revisit_psnr[pixels]"]["value"] == DYNAMIC_PSNR  # recorded for the video ...
    for f in [*(out / "tables").iterdir(), out / "report.md", out / "index.html"]:
        assert "revisit_psnr" not in f.read_text(), f  # ... and in no table: the cat moves on purpose


def test_fewer_than_three_units_print_no_interval():
    from evaluate.reporting.cells import Unit, fmt, mean_cell

    two = mean_cell([Unit(0.008, []), Unit(0.008, [])], {"n": 200, "seed": 0})
    assert fmt(two) == "0.008 (n=2)"
    three = mean_cell([Unit(x, []) for x in (0.1, 0.2, 0.3)], {"n": 200, "seed": 0})
    assert fmt(three).startswith("0.200 [") and fmt(three).endswith("n=3")


def test_paper_comparison_folds_away_when_nothing_is_comparable(tmp_path, report):
    import yaml

    from evaluate.reporting.paper import PAPER_FILE

    _, out, _ = report
    md = (out / "report.md").read_text()
    part = md[md.index("### Ours vs paper"):]
    assert "Nothing comparable with the paper" in part and "| Table 12(a)" not in part
    assert (out / "tables" / "paper.md").read_text().count("| Table 12(a)") > 10  # the full table stays
    # a published number computed with the paper's backbone keeps the table open
    data = yaml.safe_load(PAPER_FILE.read_text())
    data["metrics"]["Environment Visible"]["backbone"] = "pixel-thumb16"
    p = tmp_path / "paper.yaml"
    p.write_text(yaml.safe_dump(data))
    run = make_run(tmp_path, models=("evoke",), trajectories=("lrlrlr",), videos=False)
    md = Path(build_report([run], tmp_path / "rep", strips=False, figures=False, paper_numbers=p)["markdown"])
    assert "Nothing comparable" not in md.read_text()

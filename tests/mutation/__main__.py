"""Mutation testing of the core logic: ``python -m tests.mutation [options]`` (see docs/contributing.md).

Reads ``tests/mutation/targets.toml`` (module -> the test files that cover it, and its group) and
``tests/mutation/equivalent.yaml`` (known equivalent mutants with the reason, not counted), generates every mutant
of the selected modules (:mod:`tests.mutation.mutants`), runs each against its module's tests
(:mod:`tests.mutation.runner`) and prints the score per module and per group and every survivor.

Exit status: 0 when every selected group reaches ``--fail-under`` (default 90 %), 1 otherwise, 2 for a bad
configuration (unknown module, a test file that does not exist, unmutated tests that fail).
"""

from __future__ import annotations

import argparse
import fnmatch
import glob
import json
import os
import random
import sys
import tempfile
import time
import zlib
from collections import defaultdict
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency tomli is the same parser
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TARGETS = HERE / "targets.toml"
EQUIVALENT = HERE / "equivalent.yaml"


def load_exempt(path: Path = TARGETS) -> dict[str, str]:
    """``[exempt]`` of the targets file: source module -> the one-line reason it is not mutated."""
    return dict(tomllib.loads(path.read_text()).get("exempt", {}))


def load_targets(path: Path = TARGETS) -> list[dict]:
    """[{module, group, tests, preload}] with module globs expanded (relative to the repository root); a module of
    ``[exempt]`` is never a target, whatever glob matches it."""
    cfg = tomllib.loads(path.read_text())
    exempt = set(cfg.get("exempt", {}))
    out = []
    for t in cfg["target"]:
        files = sorted({os.path.relpath(f, ROOT) for pat in t["modules"] for f in glob.glob(str(ROOT / pat))})
        skip = set(t.get("exclude", {})) | exempt
        if not files:
            raise SystemExit(f"targets.toml: {t['modules']} matches no file")
        for f in files:
            if f in skip:
                continue
            out.append({"module": f, "group": t["group"], "tests": list(t["tests"]),
                        "preload": tuple(t.get("preload", ())), "timeout_factor": float(t.get("timeout_factor", 3))})
    return out


def load_equivalents(path: Path = EQUIVALENT) -> dict[str, dict[str, str]]:
    """file -> {mutant id: reason}."""
    import yaml

    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    for f, entries in data.items():
        for k, why in (entries or {}).items():
            if not isinstance(why, str) or not why.strip():
                raise SystemExit(f"equivalent.yaml: {f}: {k!r} needs a one-line reason")
    return {f: dict(e or {}) for f, e in data.items()}


def _select(targets, args) -> list[dict]:
    sel = targets
    if args.module:
        sel = [t for t in sel if any(fnmatch.fnmatch(t["module"], m) for m in args.module)]
    if args.group:
        sel = [t for t in sel if t["group"] in args.group]
    if not sel:
        raise SystemExit("no module selected (see tests/mutation/targets.toml)")
    return sel


def main(argv=None) -> int:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")  # one thread per mutant: --jobs sets the parallelism
    ap = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", "-m", action="append", help="module file (glob) to mutate; repeatable")
    ap.add_argument("--group", "-g", action="append", help="group of targets.toml; repeatable")
    ap.add_argument("--jobs", "-j", type=int, default=2, help="mutants run side by side (default 2)")
    ap.add_argument("--sample", type=int, help="run a seeded random sample of this many mutants per module")
    ap.add_argument("--seed", type=int, default=0, help="seed of --sample")
    ap.add_argument("--match", action="append", help="only mutants whose id contains this text")
    ap.add_argument("--rerun", type=Path, help="only the mutants a previous --json report lists as surviving")
    ap.add_argument("--resume", type=Path, help="a --json report of a run stopped part way: its outcomes are kept, "
                    "only the mutants it has none for are run")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit (nothing is run)")
    ap.add_argument("--fail-under", type=float, default=90.0, help="per-group score required (percent)")
    ap.add_argument("--json", type=Path, help="write the full report (every mutant and its outcome) here")
    ap.add_argument("--logs", type=Path, help="keep each surviving mutant's pytest output in this folder")
    ap.add_argument("--equivalents", type=Path, default=EQUIVALENT, help="file of known equivalent mutants")
    ap.add_argument("--targets", type=Path, default=TARGETS, help="the targets file (default targets.toml)")
    ap.add_argument("--no-preload", action="store_true",
                    help="do not import the heavy libraries up front (faster for a handful of mutants)")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from .mutants import generate
    from .runner import Pool, preload, run_imported, serve

    targets = _select(load_targets(args.targets), args)
    equivalents = load_equivalents(args.equivalents)
    missing = [f for t in targets for f in t["tests"] if not glob.glob(str(ROOT / f.split("::")[0]))]
    if missing:
        print(f"targets.toml names test files that do not exist: {sorted(set(missing))}", file=sys.stderr)
        return 2
    done: dict[tuple[str, str], dict] = {}
    if args.resume:
        done = {(m["file"], m["id"]): m for m in json.loads(args.resume.read_text())["mutants"]
                if m["status"] in ("killed", "timeout", "survived")}
    rerun = None
    if args.rerun:
        rep = json.loads(args.rerun.read_text())
        rerun = {(m["file"], m["id"]) for m in rep["mutants"] if m["status"] == "survived"}

    plan = []  # (target, mutant, source)
    stale: list[str] = []
    for t in targets:
        src = (ROOT / t["module"]).read_text()
        muts = generate(t["module"], src)
        ids = {m.id for m in muts}
        stale += [f"{t['module']}: {k}" for k in equivalents.get(t["module"], {}) if k not in ids]
        if args.match:
            muts = [m for m in muts if any(s in m.id for s in args.match)]
        if rerun is not None:
            muts = [m for m in muts if (m.file, m.id) in rerun]
        if args.sample is not None and len(muts) > args.sample:
            muts = sorted(random.Random(f"{args.seed}:{t['module']}").sample(muts, args.sample),
                          key=lambda m: (m.line, m.id))
        plan += [(t, m, src) for m in muts]

    if args.list:
        for t, m, _ in plan:
            eq = equivalents.get(m.file, {}).get(m.id)
            print(f"{m.file}:{m.line} [{m.operator}] {m.id}" + (f"   (equivalent: {eq})" if eq else ""))
        print(f"{len(plan)} mutants")
        return 0

    if not args.no_preload:
        preload(tuple(sorted({p for t in targets for p in t["preload"]})))
    started = time.monotonic()
    tree_before = tree_state()
    results: dict[tuple[str, str], dict] = {}
    todo = []
    for t, m, src in plan:
        row = {"file": m.file, "id": m.id, "line": m.line, "operator": m.operator}
        reason = equivalents.get(m.file, {}).get(m.id)
        if reason:
            results[(m.file, m.id)] = {**row, "status": "equivalent", "reason": reason}
        elif (m.file, m.id) in done:  # --resume: measured before (its line may have moved)
            results[(m.file, m.id)] = {**done[(m.file, m.id)], "line": m.line}
        else:
            todo.append((t, m, src, row))
    if args.resume:
        kept = sum(k in done for k in results)
        print(f"resumed: {kept} outcomes kept from {args.resume}, {len(todo)} mutants to run", flush=True)

    def save_partial() -> None:
        """The report so far (``"partial": true``): a run stopped part way keeps what it measured (--resume)."""
        if args.json:
            write_report(args.json, results, time.monotonic() - started, partial=True)

    def log_of(m):
        if not args.logs:
            return None
        args.logs.mkdir(parents=True, exist_ok=True)
        return args.logs / f"{m.file.replace('/', '_')}.{m.line}.{zlib.crc32(m.id.encode()):08x}.log"

    def record(row, status, seconds, unreached=False):
        results[(row["file"], row["id"])] = {**row, "status": status, "seconds": round(seconds, 2),
                                             **({"unreached": True} if unreached else {})}
        if status == "survived":
            print(f"  survived  {row['file']}:{row['line']} [{row['operator']}] {row['id']}{_UNREACHED * unreached}",
                  flush=True)

    # 1. Per test list, a server process: collect once, trace once, run the mutants inside functions by code swap.
    by_tests: dict[tuple, list] = defaultdict(list)
    for item in todo:
        by_tests[tuple(item[0]["tests"])].append(item)
    slow = []
    durations: dict[tuple, dict[str, float]] = {}  # per test list, each test's traced time
    with tempfile.TemporaryDirectory() as tmp:
        for n, (tests, items) in enumerate(by_tests.items()):
            files = sorted({t["module"] for t, _, _, _ in items})
            print(f"[{time.monotonic() - started:5.0f} s] {len(items)} mutants of {', '.join(files)}", flush=True)
            swap = [(str(i), m, src, t["timeout_factor"], log_of(m)) for i, (t, m, src, _) in enumerate(items)
                    if m.function is not None]
            slow += [(t, m, src, row) for t, m, src, row in items if m.function is None]
            out = Path(tmp) / f"server{n}.json"
            srv = Pool(1)
            srv.submit("server", 24 * 3600, lambda tests=tests, files=files, swap=swap, out=out: serve(
                ROOT, list(tests), files, args.jobs, swap, covering_tests, out))
            last = time.monotonic()
            while srv.running:
                srv._reap()
                time.sleep(0.5)
                if time.monotonic() - last > 60 and out.with_suffix(".progress").exists():
                    last = time.monotonic()
                    print(f"[{last - started:5.0f} s]   {out.with_suffix('.progress').read_text()}/{len(swap)}",
                          flush=True)
                    partial = out.with_suffix(".partial.json")
                    if args.json and partial.exists():
                        for i, r in json.loads(partial.read_text()).items():
                            _, m, _, row = items[int(i)]
                            if r["status"] != "slow-path" and (m.file, m.id) not in results:
                                record(row, r["status"], r["seconds"], r.get("unreached", False))
                        save_partial()
            ((_, o),) = srv.drain()
            data = json.loads(out.read_text()) if out.exists() else {"error": f"server {o.status} ({o.exit_code})"}
            if "error" in data:
                print(f"{' '.join(tests)}: {data['error']}", file=sys.stderr)
                return 2
            for i, (t, m, src, row) in enumerate(items):
                r = data["results"].get(str(i))
                if r is None:
                    continue
                if r["status"] == "slow-path":
                    slow.append((t, m, src, row))
                elif (m.file, m.id) not in results:  # not already taken from the partial results
                    record(row, r["status"], r["seconds"], r.get("unreached", False))
            trace = data["trace"]
            durations[tests] = trace["durations"]
            for t, m, src, row in items:
                row.setdefault("_timeout", t["timeout_factor"] * (sum(trace["durations"].values())
                                                                  + trace["overhead"]) + 30)

    # 2. Mutants outside functions (and any the swap could not take): a fresh import of the mutated module.
    if slow:
        print(f"[{time.monotonic() - started:5.0f} s] {len(slow)} mutants at module level (fresh imports)", flush=True)
    pool = Pool(args.jobs)
    for t, m, src, row in slow:
        pool.submit(row, row["_timeout"], lambda t=t, m=m, src=src: run_imported(
            ROOT, t["tests"], m, src, log_of(m), durations.get(tuple(t["tests"]))))
        for r, o in pool.collect():
            record(r, o.status, o.seconds)
            save_partial()
    for r, o in pool.drain():
        record(r, o.status, o.seconds)
    for r in results.values():
        r.pop("_timeout", None)
    if args.logs:  # keep the output of survivors only
        keep_logs = {log_of(argparse.Namespace(**r)).name for r in results.values() if r["status"] == "survived"}
        for p in args.logs.glob("*.log"):
            if p.name not in keep_logs:
                p.unlink()

    changed = sorted(set(tree_state()) - set(tree_before))
    if changed:  # the mutants run in this checkout: a mutant can send a test's output into the tree
        print(f"warning: {len(changed)} path(s) of the working tree changed during the run (a mutant's test may "
              f"have written there, or someone edited them): {', '.join(changed[:10])}; check with git diff",
              file=sys.stderr, flush=True)
    return report(targets, results, stale, args, time.monotonic() - started)


def tree_state() -> list[str]:
    """``git status --porcelain`` lines of the project's checkout (``[]`` outside git): what a run may have changed."""
    import subprocess

    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return out.splitlines()


#: the mark of a survivor whose code no listed test runs (it was not run)
_UNREACHED = "  (no listed test runs this line)"


def covering_tests(data: dict, file: str, line: int, end_line: int,
                   code_lines: frozenset[int] | None = None) -> set[str] | None:
    """The node ids of the tests that execute a line in ``[line, end_line]`` of ``file``; None = every test (the line
    runs when the module is imported: a module constant, a default argument, a class body). A line run by a
    fixture's setup selects every test of that test file (a module-scoped fixture runs in the first test only).
    An empty set: the edit lies in a function's body on ``code_lines`` (lines holding code the trace records when
    it runs) and no test ran any of them, so no test can see it (it survives without a run)."""
    span = set(range(line, end_line + 1))
    if span & set(data["lines"].get("<import>", {}).get(file, ())):
        return None
    keep = {t for t, files in data["lines"].items() if span & set(files.get(file, ()))}
    for t, files in data["setup"].items():
        if span & set(files.get(file, ())):
            test_file = t.split("::")[0]
            keep |= {n for n in data["durations"] if n.split("::")[0] == test_file}
    keep.discard("<import>")
    if not keep and code_lines:
        # A conservative rule: code a test runs in a forked child is not traced, so such an edit counts as a
        # survivor (never as killed).
        return set()
    # Nothing records the span (a default argument on a continuation line of a signature, say): run everything.
    return keep or None


def score(rows) -> tuple[int, int, int, float]:
    """(killed, survived, equivalent, percent killed of the non-equivalent)."""
    killed = sum(r["status"] in ("killed", "timeout") for r in rows)
    survived = sum(r["status"] == "survived" for r in rows)
    eq = sum(r["status"] == "equivalent" for r in rows)
    n = killed + survived
    return killed, survived, eq, (100.0 * killed / n if n else 100.0)


def write_report(path: Path, results: dict, seconds: float, partial: bool = False) -> None:
    """The JSON report: every mutant measured and its outcome; ``partial`` while the run goes on (written whole
    each time, through a temporary file, so a run killed mid-write leaves the previous report)."""
    rows = [{k: v for k, v in r.items() if not k.startswith("_")} for r in results.values()]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"mutants": rows, "seconds": round(seconds, 1), "partial": partial}, indent=1))
    os.replace(tmp, path)


def report(targets, results, stale, args, seconds) -> int:
    rows = list(results.values())
    by_mod = defaultdict(list)
    for r in rows:
        by_mod[r["file"]].append(r)
    group_of = {t["module"]: t["group"] for t in targets}
    print(f"\n{'module':44s} {'mutants':>7s} {'killed':>7s} {'survived':>8s} {'equiv.':>7s} {'score':>7s}")
    by_group = defaultdict(list)
    for mod in sorted(by_mod):
        k, s, e, pct = score(by_mod[mod])
        by_group[group_of[mod]] += by_mod[mod]
        print(f"{mod:44s} {len(by_mod[mod]):7d} {k:7d} {s:8d} {e:7d} {pct:6.1f}%")
    print()
    ok = True
    for g in sorted(by_group):
        k, s, e, pct = score(by_group[g])
        ok &= pct >= args.fail_under
        print(f"group {g:38s} {len(by_group[g]):7d} {k:7d} {s:8d} {e:7d} {pct:6.1f}%")
    k, s, e, pct = score(rows)
    print(f"{'all':44s} {len(rows):7d} {k:7d} {s:8d} {e:7d} {pct:6.1f}%   ({seconds / 60:.1f} min)")
    surv = sorted((r for r in rows if r["status"] == "survived"), key=lambda r: (r["file"], r["line"]))
    if surv:
        print(f"\n{len(surv)} surviving mutants (kill them with a test, or list them in {args.equivalents.name} with the "
              "reason they are equivalent):")
        for r in surv:
            print(f"  {r['file']}:{r['line']} [{r['operator']}] {r['id']}{_UNREACHED * r.get('unreached', False)}")
        unreached = sum(r.get("unreached", False) for r in surv)
        if unreached:
            print(f"{unreached} of them on lines no listed test runs (not run: a test that runs the line is the first "
                  "thing to add)")
    if stale:
        print(f"\n{len(stale)} entries of {args.equivalents.name} match no mutant any more (remove them):")
        for s_ in stale:
            print(f"  {s_}")
    if args.json:
        write_report(args.json, results, seconds)
    print(f"\nscore {pct:.1f}% ({'ok' if ok else 'below'} --fail-under {args.fail_under:g}% per group)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

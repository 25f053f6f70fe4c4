"""Which tests exercise which source module: ``python -m tests.mutation.exercise`` (docs/contributing.md).

A mutation score is only as good as the test list it is measured with: a target whose listed tests never call its
code scores 0 % and says nothing about the code; a target whose tests run in a subprocess (``python -m harness``)
exercise the unmutated files. This tool measures, with coverage.py (per-test contexts, the fast tier, in process),
for every source module:

- its **body statements**: the statements that run when the module is *used*, not when it is imported (a ``def``
  line, a class body, a module constant run at import; those are left out of both sides of the share);
- the share of them the **target's test files** execute (``tests/mutation/targets.toml``);
- for modules you name (``--suggest``), every fast-tier test file that executes their body, most lines first: the
  ``tests`` of a new ``[[target]]`` (a mutant runs only the listed tests that execute its line, fastest first, so a
  long list costs one traced run, not a run per mutant; a file that only executes a line does not kill its mutants,
  the assertions do: keep every file that executes the code, not the fewest that cover it).

It writes ``tests/mutation/exercised.json`` (the record ``tests/test_mutation.py`` reads: every target's share, and
the digest of the test list it was measured with, so a changed list asks for a new record) and prints the table.

    python -m tests.mutation.exercise                       # run the fast tier under coverage, record, print
    python -m tests.mutation.exercise --data /tmp/cov.db    # the same, keeping (or reusing) the coverage data
    python -m tests.mutation.exercise --suggest 'adapters/served/*.py'   # test lists for modules
"""

from __future__ import annotations

import argparse
import datetime as _dt
import fnmatch
import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RECORD = HERE / "exercised.json"
SOURCE_DIRS = ("harness", "adapters", "trajectories", "evaluate", "hydra_plugins")
#: a target's test files must execute at least this share of its module's body statements
MIN_SHARE = 0.5


def source_modules(root: Path = ROOT) -> list[str]:
    """Every Python module of the project's source, relative to the repository root (sorted)."""
    return sorted(os.path.relpath(f, root) for d in SOURCE_DIRS
                  for f in glob.glob(str(root / d / "**" / "*.py"), recursive=True))


def tests_digest(tests: list[str]) -> str:
    """A short digest of a target's test list (order and duplicates do not matter)."""
    return hashlib.sha256("\n".join(sorted(set(tests))).encode()).hexdigest()[:16]


def run_coverage(data: Path, jobs: int) -> None:
    """The fast tier under coverage.py, one context per test (pytest-cov's ``--cov-context=test``)."""
    env = {**os.environ, "COVERAGE_FILE": str(data)}
    # at least one xdist worker: pytest-cov records per-test contexts in workers (with -n 0 everything lands in "")
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "not slow", "-n", str(max(1, jobs)), "-p", "no:cacheprovider",
           *[f"--cov={d}" for d in SOURCE_DIRS], "--cov-context=test", "--cov-report=", "tests"]
    print("running:", " ".join(cmd), flush=True)
    code = subprocess.call(cmd, cwd=ROOT, env=env)
    if code not in (0, 1) or not data.exists():  # 1: some test failed; the coverage data still holds
        raise SystemExit(f"the coverage run failed (exit {code}); no data at {data}")


class Exercise:
    """Per module: body statements and, per test file, the body statements it executes."""

    def __init__(self, data: Path, root: Path = ROOT):
        import coverage

        self.root = root
        self.cov = coverage.Coverage(data_file=str(data))
        self.cov.load()
        self.data = self.cov.get_data()
        self._by_file = {os.path.relpath(f, root): f for f in self.data.measured_files()}

    def module(self, rel: str) -> tuple[set[int], dict[str, set[int]]]:
        """(body statements, {test file: the body statements it executes}) of ``rel``."""
        absolute = self._by_file.get(rel, str(self.root / rel))
        _, statements, excluded, _, _ = self.cov.analysis2(absolute)
        by_line = self.data.contexts_by_lineno(absolute) if rel in self._by_file else {}
        at_import = {ln for ln, ctxs in by_line.items() if "" in ctxs}
        body = set(statements) - set(excluded) - at_import
        per_test: dict[str, set[int]] = defaultdict(set)
        for ln, ctxs in by_line.items():
            if ln in body:
                for c in ctxs:
                    if c:
                        per_test[c.split("::")[0]].add(ln)
        return body, dict(per_test)


def share(body: set[int], per_test: dict[str, set[int]], tests: list[str]) -> tuple[int, float]:
    """(body statements executed by ``tests``, their share of ``body``; 1.0 for a module with no body)."""
    files = {t.split("::")[0] for t in tests}
    hit = set().union(*(per_test.get(f, set()) for f in files)) if files else set()
    return len(hit), (len(hit) / len(body) if body else 1.0)


def executing_files(modules: list[tuple[set[int], dict[str, set[int]]]]) -> list[str]:
    """Every test file that executes a body statement of one of ``modules`` ((body, per test file) pairs), most
    statements first."""
    count: dict[str, int] = defaultdict(int)
    for body, per_test in modules:
        for f, lines in per_test.items():
            count[f] += len(lines & body)
    return sorted((f for f, n in count.items() if n), key=lambda f: (-count[f], f))


def record(ex: Exercise, targets: list[dict], out: Path) -> list[tuple[str, int, int, float, bool]]:
    """Write the record of every target module; return its rows (module, body, executed, share, ok)."""
    rows, modules = [], {}
    for t in sorted(targets, key=lambda t: t["module"]):
        body, per_test = ex.module(t["module"])
        n, frac = share(body, per_test, t["tests"])
        modules[t["module"]] = {"body_statements": len(body), "executed": n, "share": round(frac, 4),
                                "tests_digest": tests_digest(t["tests"])}
        rows.append((t["module"], len(body), n, frac, frac >= MIN_SHARE))
    payload = {"measured": _dt.date.today().isoformat(), "min_share": MIN_SHARE,
               "command": "python -m tests.mutation.exercise", "modules": modules}
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, out)  # atomic: a reader never sees half a record
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.mutation.exercise", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, help="coverage data file: reused when it exists, else made and kept")
    ap.add_argument("--jobs", "-j", type=int, default=2, help="pytest-xdist workers of the coverage run")
    ap.add_argument("--suggest", action="append", help="print a test list for these modules (globs); no record")
    ap.add_argument("--record", type=Path, default=RECORD, help="where the record is written")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from tests.mutation.__main__ import load_targets

    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or Path(tmp) / "coverage.db"
        if not data.exists():
            run_coverage(data.resolve(), args.jobs)
        ex = Exercise(data)
        if args.suggest:
            chosen = [rel for rel in source_modules() if any(fnmatch.fnmatch(rel, g) for g in args.suggest)]
            measured = [ex.module(rel) for rel in chosen]
            tests = executing_files(measured)
            for rel, (body, per_test) in zip(chosen, measured):
                n, frac = share(body, per_test, tests)
                print(f"# {rel}: {n} of {len(body)} body statements executed by the fast tier ({100 * frac:.0f} %)")
            print(f"tests = {json.dumps(sorted(tests))}")
            return 0
        rows = record(ex, load_targets(), args.record)
    print(f"{'module':52s} {'body':>6s} {'run':>6s} {'share':>7s}")
    for mod, body_n, n, frac, ok in rows:
        print(f"{mod:52s} {body_n:6d} {n:6d} {100 * frac:6.1f}%{'' if ok else '  < ' + str(int(MIN_SHARE * 100)) + ' %'}")
    low = [r for r in rows if not r[4]]
    print(f"\n{len(rows)} target modules; {len(low)} below {MIN_SHARE:.0%}; record: {args.record}")
    return 1 if low else 0


if __name__ == "__main__":
    sys.exit(main())

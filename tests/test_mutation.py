"""The mutation-testing tool (tests/mutation): its operators, stable ids, the code swap that runs a mutant without
rewriting files, the per-mutant test selection, the configuration, and (slow) one small run end to end."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

from tests.mutation import mutants as mt
from tests.mutation.__main__ import EQUIVALENT, covering_tests, load_equivalents, load_exempt, load_targets, score
from tests.support import ROOT

SOURCE = textwrap.dedent('''
    """Module docstring: never mutated."""
    import os

    LIMIT = 3


    def f(a, b=2):
        """Docstring."""
        if a < LIMIT and b:
            return a + b * 2
        if os.sep:
            print(f"{a} is big")
        x = [a, b][0]
        assert a, "message"
        log.info("never")
        cleanup(a)
        return max(a, -b) if a & b else x


    class C:
        def m(self, x: int = 0) -> int:
            raise ValueError(f"bad {x}")


    def g():
        def inner(y):
            return y - 1
        return inner
''')


def _ids():
    return {m.id: m for m in mt.generate("demo.py", SOURCE)}


def test_every_operator_and_nothing_in_strings_raises_asserts_or_logging():
    ids = _ids()
    expected = [
        "f: a < LIMIT -> a <= LIMIT",                        # compare
        "f: a < LIMIT and b -> a < LIMIT or b",              # bool
        "f: a < LIMIT and b -> b",                           # bool: an operand dropped
        "f: a + b * 2 -> a - b * 2",                         # arith
        "f: b * 2 -> b / 2",
        "f: b * 2 -> b * 3",                                 # number
        "f: os.sep -> not os.sep",                           # negate
        "f: [a, b][0] -> [a, b][-1]",                        # index
        "f: cleanup(a) -> pass",                             # statement
        "f: max(a, -b) -> min(a, -b)",                       # call
        "f: -b -> b",                                        # sign
        "f: a & b -> a | b", "f: a & b -> a", "f: a & b -> b",  # mask
        "<module>: LIMIT = 3 -> LIMIT = 4",
        "f: 2 -> 3",                                         # a default argument
        "C.m: 0 -> 1",
        "g.inner: y - 1 -> y + 1",
    ]
    missing = [e for e in expected if e not in ids]
    assert not missing, (missing, sorted(ids))
    text = " ".join(ids)
    assert "message" not in text and "never" not in text and "is big" not in text and "bad" not in text
    assert "int" not in text  # annotations are not edited
    assert ids["f: a < LIMIT -> a <= LIMIT"].function == ("f",)
    assert ids["C.m: 0 -> 1"].function == ("C", "m") and ids["g.inner: y - 1 -> y + 1"].function == ("g",)
    assert ids["<module>: LIMIT = 3 -> LIMIT = 4"].function is None


def test_ids_do_not_depend_on_line_numbers_and_repeats_are_numbered():
    shifted = mt.generate("demo.py", "\n\n# a comment\n\n" + SOURCE.replace('"""Module docstring: never mutated."""', ""))
    assert {m.id for m in shifted} == set(_ids())
    rep = mt.generate("r.py", "def h(x):\n    return x + 1 + (x + 1)\n")
    assert [m.id for m in rep if m.operator == "arith"][:3] == ["h: x + 1 + (x + 1) -> x + 1 - (x + 1)",
                                                                 "h: x + 1 -> x - 1", "h: x + 1 -> x - 1 #2"]


def test_a_mutant_is_the_edited_module_and_compiles():
    m = _ids()["f: a < LIMIT -> a <= LIMIT"]
    tree = m.module_ast(ast.parse(SOURCE))
    assert "if a <= LIMIT and b:" in ast.unparse(tree) and "if a < LIMIT and b:" in SOURCE
    for mutant in mt.generate("demo.py", SOURCE):
        mt.mutated_code(mutant, SOURCE, "demo.py")  # every mutant compiles
    ids = _ids()
    # the lines of the edit's span that hold function code (a closure's too); none for a default argument (run
    # when the def runs) or a module constant
    assert ids["f: a < LIMIT -> a <= LIMIT"].code_lines == {10}
    assert ids["g.inner: y - 1 -> y + 1"].code_lines == {28}
    assert ids["C.m: 0 -> 1"].code_lines is None and ids["<module>: LIMIT = 3 -> LIMIT = 4"].code_lines is None
    assert mt.runtime_lines("X = 1\nclass K:\n    y = 2\n    def m(self):\n        return [i for i in\n"
                            "            range(3)]\n") == {4, 5, 6}  # the method (its call) and comprehension, no body


def test_the_code_swap_changes_the_function_everywhere_it_is_referenced(tmp_path, monkeypatch):
    """The real module keeps its objects; the function holding the edit, and every closure a factory made from it
    before the swap, runs the mutated code."""
    from tests.mutation.runner import swap_in

    src = textwrap.dedent('''
        def add(a, b=1):
            return a + b


        def make(k):
            def scaled(x):
                return x * k
            return scaled


        TWICE = make(2)
    ''')
    (tmp_path / "mutdemo_swap.py").write_text(src)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("mutdemo_swap")
    from mutdemo_swap import add  # a reference taken before the swap

    ms = {m.id: m for m in mt.generate("mutdemo_swap.py", src)}
    swap_in(ms["add: a + b -> a - b"], src, tmp_path)
    assert add(5) == 4 and mod.add(5, 2) == 3
    swap_in(ms["add: 1 -> 2"], src, tmp_path)
    assert add(5) == 7  # the default argument too
    swap_in(ms["make.scaled: x * k -> x / k"], src, tmp_path)
    assert mod.TWICE(8) == 4.0  # made at import, before the swap
    with pytest.raises(LookupError):
        swap_in(ms["<module>: make(2) -> make(3)"], src, tmp_path)  # module level: the import hook's job
    sys.modules.pop("mutdemo_swap", None)


def test_covering_tests_selects_by_line_and_falls_back_to_everything():
    data = {"lines": {"<import>": {"m.py": [1, 2]}, "t.py::a": {"m.py": [5, 6]}, "t.py::b": {"m.py": [6, 9]}},
            "setup": {"u.py::c": {"m.py": [12]}},
            "durations": {"t.py::a": 1.0, "t.py::b": 1.0, "u.py::c": 1.0, "u.py::d": 1.0}}
    assert covering_tests(data, "m.py", 6, 6) == {"t.py::a", "t.py::b"}
    assert covering_tests(data, "m.py", 9, 10) == {"t.py::b"}
    assert covering_tests(data, "m.py", 12, 12) == {"u.py::c", "u.py::d"}  # a fixture's line: its whole file
    assert covering_tests(data, "m.py", 2, 3) is None  # runs at import: every test
    assert covering_tests(data, "m.py", 30, 30) is None  # nothing recorded: every test
    # in a function's body: nothing to run when no test runs a line of the span that holds code; everything when
    # the span holds no code the trace records (nothing can be concluded); a fixture's line counts as run
    assert covering_tests(data, "m.py", 30, 31, code_lines=frozenset({31})) == set()
    assert covering_tests(data, "m.py", 30, 30, code_lines=frozenset()) is None
    assert covering_tests(data, "m.py", 12, 12, code_lines=frozenset({12})) == {"u.py::c", "u.py::d"}
    assert score([{"status": s} for s in ("killed", "timeout", "survived", "equivalent")])[3] == pytest.approx(200 / 3)


def test_the_targets_cover_the_modules_the_score_is_promised_for_and_name_existing_tests():
    targets = load_targets()
    mods = {t["module"] for t in targets}
    for f in ("evaluate/camera.py", "evaluate/memory.py", "evaluate/aggregate.py", "evaluate/dynamic.py",
              "evaluate/protocol.py", "evaluate/judge/parse.py", "evaluate/judge/prompt.py", "harness/locks.py",
              "harness/io.py", "harness/fingerprint.py", "trajectories/builders.py", "trajectories/conventions.py",
              "harness/context/fov.py", "harness/context/policies.py", "adapters/matrix_game3/controls.py",
              "adapters/yume/controls.py", "adapters/hy_worldplay/controls.py", "harness/secrets.py",
              "harness/outputs.py", "harness/app/verify.py", "adapters/conformance.py", "adapters/contracts/validation.py",
              "adapters/contracts/launch.py", "harness/app/setup.py"):
        assert f in mods, f
    assert {p.relative_to(ROOT).as_posix() for p in (ROOT / "evaluate" / "families").glob("*.py")} <= mods
    human = {p.relative_to(ROOT).as_posix() for d in ("evaluate/human", "harness/app/human") for p in (ROOT / d).glob("*.py")}
    assert human | {"harness/app/slurm.py"} <= mods  # the human study and the Slurm launcher (groups human, slurm)
    for t in targets:
        assert (ROOT / t["module"]).is_file()
        for test in t["tests"]:
            assert (ROOT / test.split("::")[0]).is_file(), test  # a file, or one test of it (file::test)


def test_every_source_module_is_a_target_or_exempt_with_a_reason_and_exemptions_stay_small():
    """A new module is mutated, or exempted with its reason; the exempt ones hold under 15 % of source lines."""
    from tests.mutation.exercise import source_modules

    targets = [t["module"] for t in load_targets()]
    exempt = load_exempt()
    source = source_modules()
    missing = [m for m in source if m not in targets and m not in exempt]
    assert not missing, (f"add each to a [[target]] of tests/mutation/targets.toml with the tests that exercise it "
                         f"(python -m tests.mutation.exercise --suggest <module>), or to [exempt] with its reason: "
                         f"{missing}")
    assert len(targets) == len(set(targets)), "a module in two targets would be scored twice"
    assert not set(exempt) - set(source), f"[exempt] names modules that do not exist: {set(exempt) - set(source)}"
    assert all(isinstance(why, str) and len(why.strip()) > 20 for why in exempt.values())

    def lines(rel: str) -> int:
        return len((ROOT / rel).read_text().splitlines())

    total = sum(lines(m) for m in source)
    assert sum(lines(m) for m in exempt) < 0.15 * total
    assert sum(lines(m) for m in set(targets)) >= 0.85 * total


def test_every_target_module_is_exercised_by_its_listed_tests():
    """``tests/mutation/exercised.json`` (``python -m tests.mutation.exercise``): for every target module, the share of
    its body statements its target's test files execute (coverage.py, per-test contexts), measured with the list
    as it is now. A module whose tests do not run its code would score nothing worth reading."""
    from tests.mutation.exercise import MIN_SHARE, RECORD, tests_digest

    record = json.loads(RECORD.read_text())["modules"]
    rerun = "run python -m tests.mutation.exercise (about 30 min on 2 cores) and commit tests/mutation/exercised.json"
    for t in load_targets():
        entry = record.get(t["module"])
        assert entry is not None, f"{t['module']}: not measured; {rerun}"
        assert entry["tests_digest"] == tests_digest(t["tests"]), f"{t['module']}: its test list changed; {rerun}"
        assert entry["share"] >= MIN_SHARE, (f"{t['module']}: its target's tests execute {entry['share']:.0%} of its "
                                             f"body (at least {MIN_SHARE:.0%}): list the tests that exercise it")


def test_the_exercise_tool_measures_body_statements_per_test_file(tmp_path):
    """The tool's arithmetic on a small coverage database made here: import-time lines leave both sides, a test
    file's share is its body lines over the module's, a test list's share is the union of its files."""
    import coverage

    from tests.mutation.exercise import Exercise, executing_files, share

    mod = tmp_path / "harness" / "m.py"
    mod.parent.mkdir()
    mod.write_text("def f(x):\n    if x:\n        return 1\n    return 2\n\n\ndef g():\n    return 3\n")
    data = tmp_path / "cov.db"
    cov = coverage.Coverage(data_file=str(data), source=[str(tmp_path / "harness")])
    cov.start()
    try:
        spec = importlib.util.spec_from_file_location("exercise_demo_m", mod)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)  # import time: the empty context
        cov.switch_context("tests/test_a.py::test_one|run")
        m.f(1)
        cov.switch_context("tests/test_b.py::test_two|run")
        m.f(0)
    finally:
        cov.stop()
        cov.save()
    body, per_test = Exercise(data, root=tmp_path).module("harness/m.py")
    assert body == {2, 3, 4, 8}  # def lines ran at import
    assert per_test == {"tests/test_a.py": {2, 3}, "tests/test_b.py": {2, 4}}
    assert share(body, per_test, ["tests/test_a.py"]) == (2, 0.5)
    assert share(body, per_test, ["tests/test_a.py::test_one", "tests/test_b.py"]) == (3, 0.75)
    assert share(set(), {}, []) == (0, 1.0)
    assert executing_files([(body, per_test)]) == ["tests/test_a.py", "tests/test_b.py"]


def test_every_known_equivalent_has_a_reason_and_still_exists():
    eq = load_equivalents()
    for file, entries in eq.items():
        ids = {m.id for m in mt.generate(file, (ROOT / file).read_text())}
        stale = [k for k in entries if k not in ids]
        assert not stale, f"{EQUIVALENT.name}: {file}: no such mutant any more: {stale}"
        assert all(isinstance(v, str) and len(v.strip()) > 10 for v in entries.values())


def test_the_tool_kills_a_tested_mutant_and_reports_an_untested_one(tmp_path):
    """The smoke run CI can afford (fast tier): the demo module of tests/mutation/demo, whose ``clamp`` is tested and
    whose ``shift`` deliberately is not. ``min -> max`` in ``clamp`` is killed, both mutants of ``shift`` survive
    and are printed with file and line, the listed equivalent is not run, and the score (1 of 3) is below the
    default --fail-under, so the exit status is 1."""
    out = tmp_path / "report.json"
    demo = "tests/mutation/demo"
    r = subprocess.run([sys.executable, "-m", "tests.mutation", "--targets", f"{demo}/targets.toml",
                        "--equivalents", f"{demo}/equivalent.yaml", "--no-preload", "--json", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    status = {m["id"]: m["status"] for m in json.loads(out.read_text())["mutants"]}
    assert status == {"clamp: min(x, hi) -> max(x, hi)": "killed", "clamp: x < lo -> x <= lo": "equivalent",
                      "shift: x + 1 -> x - 1": "survived", "shift: x + 1 -> x + 2": "survived"}
    assert f"{demo}/clamp.py:12 [arith] shift: x + 1 -> x - 1  (no listed test runs this line)" in r.stdout
    assert "2 of them on lines no listed test runs" in r.stdout
    unreached = {m["id"] for m in json.loads(out.read_text())["mutants"] if m.get("unreached")}
    assert unreached == {"shift: x + 1 -> x - 1", "shift: x + 1 -> x + 2"}  # not run: nothing can see them
    assert "group demo" in r.stdout and "score 33.3% (below --fail-under 90% per group)" in r.stdout


def test_a_resumed_run_keeps_the_outcomes_it_is_given_and_runs_the_rest(tmp_path):
    """``--resume``: a report of a run stopped part way (``"partial": true``) keeps its outcomes, the mutants it has
    none for are run, and the final report is whole. The kept outcome here is one a run would not give (``min ->
    max`` is killed by the demo's test), so keeping it shows it was not run again."""
    demo = "tests/mutation/demo"
    before, out = tmp_path / "partial.json", tmp_path / "report.json"
    kept = {"file": f"{demo}/clamp.py", "id": "clamp: min(x, hi) -> max(x, hi)", "line": 1, "operator": "call",
            "status": "survived", "seconds": 1.5}
    before.write_text(json.dumps({"mutants": [kept, {**kept, "id": "shift: x + 1 -> x + 2", "status": "failed"}],
                                  "partial": True}))
    r = subprocess.run([sys.executable, "-m", "tests.mutation", "--targets", f"{demo}/targets.toml",
                        "--equivalents", f"{demo}/equivalent.yaml", "--no-preload", "--json", str(out),
                        "--resume", str(before)], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert "resumed: 1 outcomes kept" in r.stdout and "2 mutants to run" in r.stdout, r.stdout[-3000:] + r.stderr
    report = json.loads(out.read_text())
    assert report["partial"] is False
    rows = {m["id"]: m for m in report["mutants"]}
    assert rows["clamp: min(x, hi) -> max(x, hi)"] == {**kept, "line": 8}  # kept, at the line the mutant is now
    assert {i: m["status"] for i, m in rows.items()} == {
        "clamp: min(x, hi) -> max(x, hi)": "survived", "clamp: x < lo -> x <= lo": "equivalent",
        "shift: x + 1 -> x - 1": "survived", "shift: x + 1 -> x + 2": "survived"}  # an unknown status is run again


@pytest.mark.slow
def test_a_small_mutation_run_reports_its_score_and_survivors(tmp_path):
    out = tmp_path / "report.json"
    r = subprocess.run([sys.executable, "-m", "tests.mutation", "-m", "trajectories/phases.py", "--sample", "6",
                        "--jobs", "2", "--json", str(out), "--fail-under", "0"], cwd=ROOT, capture_output=True,
                       text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = json.loads(out.read_text())["mutants"]
    assert len(rows) == 6 and {x["status"] for x in rows} <= {"killed", "timeout", "survived", "equivalent"}
    assert sum(x["status"] in ("killed", "timeout") for x in rows) >= 3
    assert "trajectories/phases.py" in r.stdout and "score " in r.stdout and "group trajectories" in r.stdout


@pytest.mark.slow
def test_unmutated_tests_that_fail_are_named(tmp_path):
    """A list whose tests fail without any mutant scores nothing: the run says so and names the failing tests."""
    (tmp_path / "test_fails.py").write_text(textwrap.dedent("""
        from trajectories.phases import departure


        def test_ok():
            assert departure(1) == "D1"


        def test_broken():
            assert departure(1) == "nope"
    """))
    targets = tmp_path / "targets.toml"
    targets.write_text(f'[[target]]\ngroup = "g"\nmodules = ["trajectories/phases.py"]\n'
                       f'tests = ["{tmp_path / "test_fails.py"}"]\n')
    r = subprocess.run([sys.executable, "-m", "tests.mutation", "--targets", str(targets), "--sample", "2", "--jobs",
                        "1"], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    out = r.stdout + r.stderr
    assert "the unmutated tests fail (killed, exit 1): " in out and "test_fails.py::test_broken" in out
    assert "test_ok" not in out.split("the unmutated tests fail")[1]


def test_the_tree_state_lists_what_changed_in_the_checkout(tmp_path, monkeypatch):
    """What a run compares before and after: ``git status`` of the checkout, untracked files one by one."""
    from tests.mutation import __main__ as tool

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    assert tool.tree_state() == []
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "written.json").write_text("{}")
    assert tool.tree_state() == ["?? out/written.json"]
    monkeypatch.setattr(tool, "ROOT", tmp_path / "missing")  # not a folder: nothing to compare, no error
    assert tool.tree_state() == []


def test_a_run_that_changed_the_checkout_says_which_paths(tmp_path, monkeypatch, capsys):
    """A mutant can send a test's output into the source tree (it runs in this checkout): the run names the paths."""
    from tests.mutation import __main__ as tool

    states = iter([[" M keep.py"], [" M keep.py", " M adapters/x/upstream_tree.json"]])
    monkeypatch.setattr(tool, "tree_state", lambda: next(states))
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # main sets them for its mutants
        monkeypatch.setenv(var, "1")
    demo = "tests/mutation/demo"
    monkeypatch.chdir(ROOT)
    tool.main(["--targets", f"{demo}/targets.toml", "--equivalents", f"{demo}/equivalent.yaml", "--no-preload",
               "--json", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert ("warning: 1 path(s) of the working tree changed during the run (a mutant's test may have written there, "
            "or someone edited them):  M adapters/x/upstream_tree.json; check with git diff") in err

"""Run mutants against the tests that cover their module, without touching the working tree.

Every run is a ``fork``; nothing on disk is rewritten, so an interrupted run leaves nothing behind and several
mutants run side by side.

* The top process imports the heavy third-party libraries once (numpy, scipy, OpenCV, pytest, ...) and never the
  project.
* Per test list it forks a *server* that collects those tests once (importing the project and the test modules),
  then makes a traced run of them (which test executes which line of the modules under test, and how long each
  test takes), then runs each mutant that lies inside a function in a fork of itself: the child swaps the code
  object (and the default arguments) of that one function for the mutated one, clears the memo caches and runs
  ``pytest -x`` on just the tests that execute the mutated lines, fastest first.
* A mutant outside any function (a module constant, a class body, a dataclass default) cannot be swapped in: it
  runs in a fork of the top process with an import hook that serves the mutated module (compiled from the edited
  AST under the real file name) and the whole test list.

Exit status 0 of pytest = the mutant survived; a failing test, an error or a timeout = killed. Subprocesses started
by a test (``python -m harness ...``) would import the unmutated files, so the test lists in ``targets.toml`` name
in-process tests only.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .mutants import Mutant, mutated_code

#: third-party modules imported once in the top process (a child that needs them finds them loaded)
PRELOAD = ("numpy", "scipy", "scipy.spatial.transform", "scipy.stats", "scipy.ndimage", "cv2", "pytest",
           "_pytest", "hypothesis", "yaml", "pydantic", "omegaconf", "hydra", "PIL", "skimage", "av")
PROJECT = ("evaluate", "harness", "trajectories", "adapters", "tests", "conf")
#: pytest's exit status when the code swap of a mutant could not be done (the mutant then runs the slow way)
CANNOT_SWAP = 86


def preload(extra: tuple[str, ...] = ()) -> None:
    import importlib

    for name in PRELOAD + tuple(extra):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S110 - optional speed-up only
            pass


def module_name(file: str) -> str:
    parts = Path(file).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@dataclass
class Outcome:
    status: str  # killed | survived | timeout | error (no test ran) | slow-path (the code swap was not possible)
    seconds: float
    exit_code: int | None


def _outcome(code: int, seconds: float) -> Outcome:
    if code == 0:
        return Outcome("survived", seconds, code)
    if code == CANNOT_SWAP:
        return Outcome("slow-path", seconds, code)
    if code in (1, 2, 3, 4) or code < 0:
        return Outcome("killed", seconds, code)  # failed / interrupted (import error) / internal / child error
    return Outcome("error", seconds, code)  # 5: no tests collected


class Pool:
    """Up to ``jobs`` forked children at a time; ``submit(key, timeout, fn)`` runs ``fn()`` (an exit status) in one."""

    def __init__(self, jobs: int):
        self.jobs = max(1, jobs)
        self.running: dict[int, tuple[object, float, float]] = {}  # pid -> (key, start, timeout)
        self.done: list[tuple[object, Outcome]] = []

    def submit(self, key, timeout: float, fn: Callable[[], int]) -> None:
        while len(self.running) >= self.jobs:
            self._reap()
            if len(self.running) >= self.jobs:
                time.sleep(0.02)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 4
            try:
                os.setpgid(0, 0)  # its own group, so a timeout also stops what the tests started
                code = fn()
            except BaseException:  # noqa: BLE001 - the child reports through its exit code
                import traceback

                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        self.running[pid] = (key, time.monotonic(), timeout)

    def _reap(self) -> None:
        now = time.monotonic()
        for pid, (key, start, limit) in list(self.running.items()):
            got, status = os.waitpid(pid, os.WNOHANG)
            if got:
                del self.running[pid]
                self.done.append((key, _outcome(os.waitstatus_to_exitcode(status), now - start)))
            elif now - start > limit:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                os.waitpid(pid, 0)
                del self.running[pid]
                self.done.append((key, Outcome("timeout", now - start, None)))

    def collect(self):
        self._reap()
        out, self.done = self.done, []
        return out

    def drain(self):
        while self.running:
            self._reap()
            if self.running:
                time.sleep(0.02)
        out, self.done = self.done, []
        return out


# -- inside a child -------------------------------------------------------------------------------------------------

def _enter(root: Path, log: Path | None) -> None:
    os.chdir(root)
    if str(root) not in sys.path[:1]:
        sys.path.insert(0, str(root))
    os.environ["PYTHONPATH"] = str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")
    fd = os.open(log if log else os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)


def _pytest(tests: list[str], plugins: list, extra: list[str] = ()) -> int:
    import pytest

    return int(pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", "-m", "not slow",
                            "-W", "ignore::DeprecationWarning", *extra, *tests], plugins=plugins))


class _Select:
    """pytest plugin: keep only the given node ids, fastest first (a mutant is killed as early as possible)."""

    def __init__(self, keep: set[str] | None, order: dict[str, float]):
        self.keep, self.order = keep, order

    def pytest_collection_modifyitems(self, session, config, items):
        kept = [i for i in items if self.keep is None or i.nodeid in self.keep]
        kept.sort(key=lambda i: self.order.get(i.nodeid, 1e9))
        items[:] = kept


class _Trace:
    """pytest plugin + tracer: which lines of ``files`` each test executes. Lines run while a test is set up are
    kept apart (a module-scoped fixture runs in the setup of the first test that uses it only)."""

    def __init__(self, files: set[str]):
        self.files = files
        self.current = "<import>"
        self.phase = "import"
        self.lines: dict[str, dict[str, set[int]]] = {}
        self.setup_lines: dict[str, dict[str, set[int]]] = {}
        self.durations: dict[str, float] = {}
        self.failed: list[str] = []  # named when the unmutated tests fail

    def _local(self, frame, event, arg):
        if event in ("line", "call"):
            bucket = self.setup_lines if self.phase == "setup" else self.lines
            bucket.setdefault(self.current, {}).setdefault(frame.f_code.co_filename, set()).add(frame.f_lineno)
        return self._local

    def tracer(self, frame, event, arg):
        if frame.f_code.co_filename in self.files:
            return self._local(frame, event, arg)
        return None

    def pytest_runtest_setup(self, item):
        self.current, self.phase = item.nodeid, "setup"
        # a memo hit would hide the lines a test runs (an earlier test computed the same call): each test of the
        # traced run starts with empty caches, so it is chosen for every line it depends on
        _clear_caches()

    def pytest_runtest_call(self, item):
        self.phase = "call"

    def pytest_runtest_teardown(self, item):
        self.phase = "call"

    def pytest_runtest_logreport(self, report):
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        if report.failed and report.nodeid not in self.failed:
            self.failed.append(report.nodeid)

    def dump(self) -> dict:
        def plain(d):
            return {t: {f: sorted(v) for f, v in fl.items()} for t, fl in d.items()}

        return {"lines": plain(self.lines), "setup": plain(self.setup_lines), "durations": self.durations,
                "failed": self.failed}


def _clear_caches() -> None:
    """Forget what the server computed before the fork (``@memo`` and ``lru_cache`` results of unmutated code)."""
    for name, mod in list(sys.modules.items()):
        if not mod or name.split(".")[0] not in PROJECT:
            continue
        for obj in list(vars(mod).values()):
            clear = getattr(obj, "cache_clear", None)
            if callable(clear):
                try:
                    clear()
                except Exception:  # noqa: BLE001, S110 - a cache that cannot be cleared keeps its values
                    pass
    memo = sys.modules.get("adapters.memo")
    if memo is not None:
        memo.clear()


def _unwrap(obj):
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property):
        obj = obj.fget
    while hasattr(obj, "__wrapped__"):
        obj = obj.__wrapped__
    return obj


def swap_in(mutant: Mutant, source: str, root: Path) -> None:
    """Make the imported module run ``mutant``: the mutated module is executed in a scratch namespace and the code
    object and defaults of the one function that holds the edit replace the real function's (every reference to
    it, ``from x import f`` included, then runs the mutant). Raises LookupError / ValueError when that is not
    possible (the caller then uses the import hook)."""
    if mutant.function is None:
        raise LookupError("not inside a function")
    name = module_name(mutant.file)
    real = sys.modules.get(name)
    if real is None:
        import importlib

        real = importlib.import_module(name)
    path = root / mutant.file
    ns = {"__name__": name, "__file__": str(path), "__package__": real.__package__, "__spec__": real.__spec__,
          "__builtins__": __builtins__}
    if path.name == "__init__.py":
        ns["__path__"] = list(getattr(real, "__path__", []))
    exec(mutated_code(mutant, source, str(path)), ns)  # noqa: S102 - the mutant, compiled from our own AST
    a, b = real, ns
    for part in mutant.function:
        a = vars(a)[part] if not isinstance(a, dict) else a[part]
        b = vars(b)[part] if not isinstance(b, dict) else b[part]
    fa, fb = _unwrap(a), _unwrap(b)
    if not (hasattr(fa, "__code__") and hasattr(fb, "__code__")):
        raise LookupError(f"{'.'.join(mutant.function)} is not a plain function")
    old_nested, new_nested = _nested_codes(fa.__code__), _nested_codes(fb.__code__)
    if [c.co_name for c in old_nested] != [c.co_name for c in new_nested]:
        raise LookupError("the edit changes the nested functions")
    fa.__code__ = fb.__code__  # ValueError when the closures differ
    fa.__defaults__, fa.__kwdefaults__ = fb.__defaults__, fb.__kwdefaults__
    # Closures the function made before the fork (a factory called at import: ``visible = _eq4_metric(...)``) run
    # the old nested code: give every live function made from it the mutated nested code.
    if old_nested:
        import gc
        import types
        import warnings

        index = {id(c): n for n, c in enumerate(old_nested)}
        with warnings.catch_warnings():  # isinstance() on some lazy module attributes warns
            warnings.simplefilter("ignore")
            for obj in gc.get_objects():
                if type(obj) is types.FunctionType and id(obj.__code__) in index:
                    obj.__code__ = new_nested[index[id(obj.__code__)]]


def _nested_codes(code) -> list:
    """The code objects defined inside ``code`` (nested functions, lambdas, comprehensions), depth first."""
    out = []
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            out.append(c)
            out += _nested_codes(c)
    return out


class _MutantFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the mutated code for one module name (the slow path, in a process that has not imported it)."""

    def __init__(self, name: str, path: Path, code):
        self.name, self.path, self.code = name, path, code

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        pkg = [str(self.path.parent)] if self.path.name == "__init__.py" else None
        return importlib.util.spec_from_file_location(fullname, self.path, loader=self,
                                                      submodule_search_locations=pkg)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(self.code, module.__dict__)  # noqa: S102 - the mutated module, compiled from our own AST


def run_swapped(root: Path, tests: list[str], mutant: Mutant, source: str, keep, order, log) -> int:
    _enter(root, log)
    try:
        swap_in(mutant, source, root)
    except (LookupError, ValueError, KeyError, TypeError) as exc:
        print(f"cannot swap: {exc}")
        return CANNOT_SWAP
    _clear_caches()
    return _pytest(tests, [_Select(keep, order)], ["-x"])


def run_imported(root: Path, tests: list[str], mutant: Mutant, source: str, log,
                 order: dict[str, float] | None = None) -> int:
    """Every test of the list (a module-level edit can reach any of them), fastest first by ``order`` (the traced
    durations) so that a killed mutant stops early."""
    _enter(root, log)
    path = root / mutant.file
    sys.meta_path.insert(0, _MutantFinder(module_name(mutant.file), path, mutated_code(mutant, source, str(path))))
    return _pytest(tests, [_Select(None, order or {})], ["-x"])


def serve(root: Path, tests: list[str], files: list[str], jobs: int, items: list[tuple], covering, out: Path) -> int:
    """The server of one test list (runs in a fork of the top process): collect once, trace once, then run every
    ``(mutant, source, timeout_factor)`` of ``items`` with the code swap. Writes ``{trace, results}`` to ``out``."""
    _enter(root, None)
    _pytest(tests, [], ["--collect-only"])  # imports the project and the test modules once
    pool = Pool(jobs)
    trace_file = out.with_suffix(".trace.json")

    def traced() -> int:
        import threading

        tr = _Trace({str(root / f) for f in files})
        sys.settrace(tr.tracer)
        threading.settrace(tr.tracer)
        code = _pytest(tests, [tr])
        sys.settrace(None)
        trace_file.write_text(json.dumps(tr.dump()))
        return code

    pool.submit("trace", 3600, traced)
    ((_, base),) = pool.drain()
    if base.status != "survived":
        failed = json.loads(trace_file.read_text()).get("failed", []) if trace_file.is_file() else []
        which = f": {', '.join(failed[:5])}{' ...' if len(failed) > 5 else ''}" if failed else ""
        out.write_text(json.dumps({"error": f"the unmutated tests fail ({base.status}, exit {base.exit_code})"
                                            f"{which}"}))
        return 1
    data = json.loads(trace_file.read_text())
    data["overhead"] = max(0.0, base.seconds - sum(data["durations"].values()))
    results = {}
    done = 0

    def record(batch):
        nonlocal done
        for key, o in batch:
            results[key] = {"status": o.status, "seconds": round(o.seconds, 2)}
            done += 1
        if batch:
            with open(out.with_suffix(".progress"), "w") as f:
                f.write(str(done))
            partial = out.with_suffix(".partial.json")  # read by the top process for its partial report
            tmp = partial.with_name(partial.name + ".tmp")
            tmp.write_text(json.dumps(results))
            os.replace(tmp, partial)

    for key, mutant, source, factor, log in items:
        keep = covering(data, str(root / mutant.file), mutant.line, mutant.end_line, mutant.code_lines)
        if keep == set():  # no test runs its line: nothing to run
            results[key] = {"status": "survived", "seconds": 0.0, "unreached": True}
            done += 1
            continue
        d = data["durations"]
        run_time = sum(d.values()) if keep is None else sum(d.get(k, 0.0) for k in keep)
        timeout = factor * (run_time + data["overhead"]) + 20
        pool.submit(key, timeout, lambda m=mutant, s=source, k=keep, lg=log:
                    run_swapped(root, tests, m, s, k, data["durations"], lg))
        record(pool.collect())
    record(pool.drain())
    out.write_text(json.dumps({"trace": data, "results": results}))
    return 0

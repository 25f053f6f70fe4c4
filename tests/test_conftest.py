"""The suite's own guards (tests/conftest.py), run on a small test file of their own in a separate pytest."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pytest(tmp_path: Path, body: str) -> str:
    (tmp_path / "test_probe.py").write_text(textwrap.dedent(body))
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-o", "addopts=", "-p",
                        "no:cacheprovider", "-rA", "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False, env=_env())
    return r.stdout + r.stderr


def _env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("WORLDMEM_PROBE")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_a_test_that_leaves_the_environment_changed_fails_and_the_next_one_finds_it_as_before(tmp_path):
    out = _pytest(tmp_path, """
        import os

        def test_a_sets(monkeypatch):
            monkeypatch.delenv("WORLDMEM_PROBE_A", raising=False)  # absent: nothing recorded to undo
            os.environ["WORLDMEM_PROBE_A"] = "1"

        def test_b_sees_it_gone():
            assert "WORLDMEM_PROBE_A" not in os.environ

        def test_c_kept(restore_env):
            restore_env("WORLDMEM_PROBE_C")
            os.environ["WORLDMEM_PROBE_C"] = "1"

        def test_d_sees_it_gone():
            assert "WORLDMEM_PROBE_C" not in os.environ

        def test_e_monkeypatched(monkeypatch):
            monkeypatch.setenv("WORLDMEM_PROBE_E", "1")
    """)
    assert "ERROR at teardown of test_a_sets" in out, out
    assert "Failed: the test left os.environ changed: WORLDMEM_PROBE_A (use monkeypatch.setenv" in out, out
    for name in ("test_b_sees_it_gone", "test_c_kept", "test_d_sees_it_gone", "test_e_monkeypatched"):
        assert f"PASSED test_probe.py::{name}" in out, out
    assert "5 passed, 1 error" in out, out  # test_a passes its call and errs at teardown


def test_restore_env_puts_back_a_value_that_was_set(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLDMEM_KEEP_PROBE", "before")
    out = _pytest(tmp_path, """
        import os

        def test_changes(restore_env):
            restore_env("WORLDMEM_KEEP_PROBE")
            assert os.environ["WORLDMEM_KEEP_PROBE"] == "before"  # not changed by restore_env itself
            os.environ["WORLDMEM_KEEP_PROBE"] = "after"

        def test_sees_the_old_value():
            assert os.environ["WORLDMEM_KEEP_PROBE"] == "before"
    """)
    assert "2 passed in" in out and "ERROR" not in out, out

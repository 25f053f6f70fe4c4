"""One write path: every file the harness writes goes through ``harness.io`` (contained, atomic, never through a
symlink). A static walk over the source finds any writer that goes around it; probes show a planted symlink is
never written through."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from tests.support import ROOT

SOURCES = ("harness", "adapters", "evaluate", "trajectories")
#: files allowed a raw writer, each with its reason (kept short: a new entry needs a reason a reviewer accepts)
ALLOWED = {
    "harness/io.py": "the one write path",
    # the layer below harness.io (docs/architecture.md import table): harness callers check containment first
    "trajectories/path.py": "atomic_target: the trajectories layer may not import harness.io",
    # runs inside the model's own environment (not the harness process), writing into upstream's work folder
    "adapters/matrix_game35/runner.py": "a shim run by upstream's interpreter",
}
_WRITE_MODES = set("wax+")


def _mode(call: ast.Call, pos: int) -> str | None:
    if len(call.args) > pos and isinstance(call.args[pos], ast.Constant) and isinstance(call.args[pos].value, str):
        return call.args[pos].value
    for kw in call.keywords:
        if kw.arg == "mode" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value
    return None


def raw_writers(source: str, filename: str = "<src>") -> list[tuple[int, str]]:
    """(line, what) of every raw writer in ``source``: ``open(..., "w"/"a"/"x"/"+")`` (and ``Path.open``),
    ``.write_text(``, ``.write_bytes(``, ``shutil.copy*``, ``os.replace`` / ``os.rename``. A call on a name bound
    to ``harness.io`` (``io.write_text``) is the write path itself."""
    tree = ast.parse(source, filename=filename)
    io_names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "harness":
            io_names |= {a.asname or a.name for a in node.names if a.name == "io"}
        elif isinstance(node, ast.Import):
            io_names |= {a.asname for a in node.names if a.name == "harness.io" and a.asname}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == "open":
            m = _mode(node, 1)
            if m and _WRITE_MODES & set(m):
                out.append((node.lineno, f"open(..., {m!r})"))
        elif isinstance(f, ast.Attribute):
            base = f.value.id if isinstance(f.value, ast.Name) else None
            if f.attr in ("write_text", "write_bytes") and base not in io_names:
                out.append((node.lineno, f".{f.attr}("))
            elif f.attr == "open" and base not in ("os", "io", "gzip", "tarfile", "zipfile", "h5py", "av"):
                m = _mode(node, 0)
                if m and _WRITE_MODES & set(m):
                    out.append((node.lineno, f".open({m!r})"))
            elif base == "shutil" and f.attr.startswith("copy"):
                out.append((node.lineno, f"shutil.{f.attr}"))
            elif base == "os" and f.attr in ("replace", "rename"):
                out.append((node.lineno, f"os.{f.attr}"))
    return out


def test_the_walk_finds_every_kind_of_raw_writer():
    """The check can fail: each form is caught, the write path itself and reads are not."""
    src = ("import os, shutil\nfrom pathlib import Path\nfrom harness import io\n"
           "open('a', 'w')\nopen('a', mode='ab')\nopen('a')\nopen('a', 'rb')\nPath('a').write_text('x')\n"
           "Path('a').write_bytes(b'')\nshutil.copyfile('a', 'b')\nshutil.copy2('a', 'b')\nos.replace('a', 'b')\n"
           "Path('a').open('a')\nio.write_text('a', 'x')\nos.rename('a', 'b')\nPath('a').read_text()\n")
    assert [line for line, _ in raw_writers(src)] == [4, 5, 8, 9, 10, 11, 12, 13, 15]


def test_no_raw_writer_outside_harness_io():
    bad = []
    for pkg in SOURCES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            rel = f.relative_to(ROOT).as_posix()
            if rel in ALLOWED:
                continue
            bad += [f"{rel}:{line}: {what}" for line, what in raw_writers(f.read_text(), rel)]
    assert not bad, "raw writers outside harness.io (use harness.io.write_text / write_bytes / copy_file / " \
                    "atomic_path / open_stream):\n" + "\n".join(bad)


def test_every_allowed_file_still_needs_its_exception():
    """An allowlist entry whose file no longer writes raw is removed (the list only shrinks)."""
    for rel in ALLOWED:
        if rel != "harness/io.py":
            assert raw_writers((ROOT / rel).read_text(), rel), f"{rel} writes through harness.io now: drop it"


# -- symlinks are never written through -------------------------------------------------------------------------
def test_io_writers_replace_a_planted_symlink_instead_of_writing_through_it(tmp_path):
    from harness import io

    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    run = tmp_path / "run"
    run.mkdir()
    with io.confine(run):
        for name, write in (("a.txt", lambda p: io.write_text(p, "new")),
                            ("b.bin", lambda p: io.write_bytes(p, b"new")),
                            ("c.txt", lambda p: io.copy_file(run / "src", p))):
            (run / "src").write_text("new")
            (run / name).symlink_to(outside)
            write(run / name)
            assert outside.read_text() == "precious", name
            assert not (run / name).is_symlink() and (run / name).read_text() == "new"
        (run / "log.txt").symlink_to(outside)
        with pytest.raises(io.ContainmentError, match="symlink"):
            io.append_text(run / "log.txt", "appended")
    assert outside.read_text() == "precious"


def test_a_symlinked_folder_that_leaves_the_run_is_refused(tmp_path):
    from harness import io

    (tmp_path / "elsewhere").mkdir()
    run = tmp_path / "run"
    run.mkdir()
    (run / "controls").symlink_to(tmp_path / "elsewhere")
    with io.confine(run), pytest.raises(io.ContainmentError, match="outside the run directory"):
        io.write_text(run / "controls" / "prompt.txt", "x")
    assert not list((tmp_path / "elsewhere").iterdir())


def test_a_symlink_planted_in_controls_is_not_written_through_on_the_next_run(harness, tmp_path):
    """The probe: ``prompt.txt`` (``write_text``) and ``image.png`` (``shutil.copyfile`` of the memoised canvas)
    were written through a symlink in an item's ``controls/`` on a ``dry_run=true`` rerun."""
    from tests.hostile.conftest import SMALL

    args = ["run=s", *SMALL, "model=lingbot_v2", "model.num_frames=61", "dry_run=true"]
    r = harness(*args)
    assert r.code == 0, r.err
    controls = next((tmp_path / "outputs" / "s").glob("lingbot_v2/*/seed-*/*/*/controls"))
    assert (controls / "prompt.txt").is_file(), sorted(os.listdir(controls))
    victims = {}
    for name in ("prompt.txt", "image.png"):
        victim = tmp_path / f"victim-{name}"
        victim.write_bytes(b"precious")
        (controls / name).unlink()
        (controls / name).symlink_to(victim)
        victims[name] = victim
    r = harness(*args)
    assert r.code in (0, 2), r.err
    for name, victim in victims.items():
        assert victim.read_bytes() == b"precious", name


def test_upstreams_log_is_never_opened_through_a_symlink(tmp_path):
    """``run_logged`` (upstream.log) opens its log with ``O_NOFOLLOW``: a planted link is refused, not followed."""
    import sys

    from harness import io
    from harness.io import run_logged

    victim = tmp_path / "victim"
    victim.write_text("precious")
    log = tmp_path / "upstream.log"
    log.symlink_to(victim)
    with pytest.raises(io.ContainmentError, match="symlink"):
        run_logged([sys.executable, "-c", "print('hi')"], log)
    assert victim.read_text() == "precious"
    assert Path(log).is_symlink()


@pytest.mark.slow
def test_a_rerun_replaces_planted_links_in_an_item_folder_and_writes_nothing_outside(harness, run_copy, tmp_path):
    """Links at ``meta.json``, ``video.mp4`` and ``camera.npz`` of a finished item (an own probe of the class): the
    redo replaces each link by the item's own file; the files the links pointed at keep their bytes."""
    from tests.hostile.conftest import SMALL

    victims = {}
    for name in ("meta.json", "video.mp4", "camera.npz"):
        victim = tmp_path / f"victim-{name}"
        victim.write_bytes(b"precious")
        (run_copy / name).unlink()
        (run_copy / name).symlink_to(victim)
        victims[name] = victim
    r = harness("run=h", *SMALL)
    assert r.code == 0, r.err
    for name, victim in victims.items():
        assert victim.read_bytes() == b"precious", name
        assert not (run_copy / name).is_symlink() and (run_copy / name).stat().st_size > 8, name
    assert harness("verify", "run=h", *SMALL).code == 0

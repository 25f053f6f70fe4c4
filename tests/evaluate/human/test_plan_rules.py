"""Rules of planning a study folder (evaluate/human/design.py: annotator ids and tokens, ``add_annotators``,
``plan_study``, the clearing of a killed planner's partial folder), each at the input where it matters. Tiny
studies planned in tmp_path from the synthetic runs of tests/support/human_data.py."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from evaluate.human import design
from evaluate.human.common import ORGANISER_FILE, TOKENS_FILE, StudyError, token_hash
from evaluate.human.design import (
    DYNAMIC_INSTRUCTIONS,
    STATIC_INSTRUCTIONS,
    PlanRequest,
    add_annotators,
    check_annotator_ids,
    plan_study,
    write_organiser_token,
)
from tests.evaluate.human.test_design import read
from tests.support.human_data import make_runs

URLSAFE = re.compile(r"^[A-Za-z0-9_-]+$")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("runs"))


def plan(runs, out, **kw):
    kw.setdefault("metrics", ["object.geometry"])  # 2 pairs: the smallest static study of these runs
    kw.setdefault("seed", 0)
    kw.setdefault("annotators", ["a1"])
    return plan_study(PlanRequest(runs=list(runs), **kw), out)


def tokens(d: Path) -> dict[str, str]:
    return dict(line.split("\t", 1) for line in (d / TOKENS_FILE).read_text().splitlines())


def partials(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".partial"))


# ------------------------------------------------------------------------------------------------ annotator ids
def test_no_annotator_is_refused():
    with pytest.raises(StudyError, match="annotators=: give a count") as exc:
        check_annotator_ids([])
    assert "bad:" not in str(exc.value)  # nothing to name: no id was bad


def test_a_bad_id_is_named():
    with pytest.raises(StudyError, match=r"\(up to 32 characters, e\.g\. annotators=ann1,ann2,ann3\); bad: b a d$"):
        check_annotator_ids(["ok", "b a d"])
    assert check_annotator_ids(("x", "y")) == ["x", "y"]


# --------------------------------------------------------------------------------------------------- tokens
def test_tokens_secret_and_organiser_token_have_their_lengths(runs, tmp_path):
    """token_urlsafe(24): 32 characters; the study secret token_hex(16): 32 hex digits; the organiser's
    token_urlsafe(32): 43 characters."""
    d = Path(plan(runs, tmp_path / "s", annotators=["a1", "a2"])["dir"])
    toks = tokens(d)
    assert sorted(toks) == ["a1", "a2"]
    assert all(len(t) == 32 and URLSAFE.match(t) for t in toks.values()), toks
    assert re.fullmatch(r"[0-9a-f]{32}", read(d, "key.json")["design"]["secret"])
    org = (d / ORGANISER_FILE).read_text()
    assert org.endswith("\n") and len(org.strip()) == 43 and URLSAFE.match(org.strip())
    new = add_annotators(d, ["a3"])
    assert len(new["a3"]) == 32 and tokens(d)["a3"] == new["a3"]
    again = write_organiser_token(d)
    assert len(again) == 43 and (d / ORGANISER_FILE).read_text() == again + "\n"


def test_a_token_shaped_like_a_credential_is_written_verbatim(runs, tmp_path, monkeypatch):
    """The tokens are random: one may hold ``sk-...`` or ``hf_...``, which the secret scrubber of ordinary writes
    redacts. tokens.txt and organiser.txt must hold them as they are, or nobody could log in with them."""
    from harness.secrets import scrub

    shapes = iter([f"sk-{n}" + "Q" * 29 for n in range(10)])
    monkeypatch.setattr(design.secrets, "token_urlsafe", lambda nbytes=None: next(shapes))
    assert scrub("sk-0" + "Q" * 29) != "sk-0" + "Q" * 29  # what an ordinary write would do to it
    d = Path(plan(runs, tmp_path / "s", annotators=["a1", "a2"])["dir"])
    toks = tokens(d)
    assert toks == {"a1": "sk-0" + "Q" * 29, "a2": "sk-1" + "Q" * 29}
    ann = {a["id"]: a["token_sha256"] for a in read(d, "annotators.json")["annotators"]}
    assert ann == {a: token_hash(t) for a, t in toks.items()}
    assert (d / ORGANISER_FILE).read_text() == "sk-2" + "Q" * 29 + "\n"
    assert write_organiser_token(d) == "sk-3" + "Q" * 29
    assert (d / ORGANISER_FILE).read_text() == "sk-3" + "Q" * 29 + "\n"


def test_added_annotators_keep_every_old_token_line_as_it_is(runs, tmp_path):
    """An old line is ``<id>\\t<token>``: everything after the first tab is the token, kept verbatim (a token with
    a tab in it, written by hand, too)."""
    from harness.io import write_text

    d = Path(plan(runs, tmp_path / "s")["dir"])
    old = (d / TOKENS_FILE).read_text()
    write_text(d / TOKENS_FILE, old + "hand\tx\ty\n", scrubbed=True, mode=0o600)
    new = add_annotators(d, ["a2"])
    assert (d / TOKENS_FILE).read_text() == old + "hand\tx\ty\n" + f"a2\t{new['a2']}\n"


# ----------------------------------------------------------------------------------------------- the plan
def test_static_ids_are_p_and_three_digits_from_001_with_the_static_instructions(runs, tmp_path):
    d = Path(plan(runs, tmp_path / "s")["dir"])
    st = read(d, "study.json")
    assert sorted(i["id"] for i in st["items"]) == ["p001", "p002"]
    assert sorted(i["id"] for i in read(d, "key.json")["items"]) == ["p001", "p002"]
    assert st["kind"] == "static" and st["instructions"] == STATIC_INSTRUCTIONS
    assert sorted(os.listdir(d / "media"))[:2] == ["p001-a.mp4", "p001-b.mp4"]


def test_dynamic_ids_are_d_and_three_digits_with_the_dynamic_instructions(runs, tmp_path):
    d = Path(plan(runs, tmp_path / "d", metrics=["dynamic"], instances=1)["dir"])
    st = read(d, "study.json")
    assert [i["id"] for i in st["items"]] == ["d001"] and st["items"][0]["clip"] == "d001.mp4"
    assert st["kind"] == "dynamic" and st["instructions"] == DYNAMIC_INSTRUCTIONS


def test_a_static_study_may_have_practice_without_checks(runs, tmp_path):
    d = Path(plan(runs, tmp_path / "s", metrics=["environment.visible"], pairs=2, practice=1)["dir"])
    key = read(d, "key.json")
    assert sum(1 for i in key["items"] if i.get("practice")) == 1
    assert len(key["items"]) == 3  # 2 pairs and the practice pair; no attention check
    assert not any(i.get("check") and not i.get("practice") for i in key["items"])
    practice = next(i["id"] for i in key["items"] if i.get("practice"))
    assert read(d, "annotators.json")["annotators"][0]["order"][0] == practice


def test_missing_parent_folders_are_created(runs, tmp_path):
    out = plan(runs, tmp_path / "a" / "b" / "s")
    assert Path(out["dir"]) == (tmp_path / "a" / "b" / "s").resolve() and (tmp_path / "a/b/s/study.json").is_file()
    assert os.listdir(tmp_path / "a" / "b") == ["s"]


def test_a_file_in_the_parent_folders_place_is_refused_before_anything_is_written(runs, tmp_path):
    (tmp_path / "studies").write_text("a file")
    for out in (tmp_path / "studies" / "s", tmp_path / "studies" / "deeper" / "s"):
        with pytest.raises(StudyError, match=r"studies is a file, not a folder; choose another name= or output_root="):
            plan(runs, out)
    assert (tmp_path / "studies").read_text() == "a file" and os.listdir(tmp_path) == ["studies"]


def test_a_failure_while_writing_media_leaves_no_partial_folder(runs, tmp_path, monkeypatch):
    real, calls = design._static_media, []

    def second_fails(rec, sid, media):
        calls.append(sid)
        if len(calls) == 2:
            raise RuntimeError("the encoder died")
        return real(rec, sid, media)

    monkeypatch.setattr(design, "_static_media", second_fails)
    with pytest.raises(RuntimeError, match="encoder died"):
        plan(runs, tmp_path / "s")
    assert calls == ["p001", "p002"] and os.listdir(tmp_path) == []


def test_a_failure_before_the_partial_folder_exists_is_raised_as_it_is(runs, tmp_path, monkeypatch):
    """A full disk when the partial folder is made: the planner's own error, not the clean-up's complaint about a
    folder that was never made."""
    real = Path.mkdir

    def full(self, *a, **kw):
        if self.name == design.MEDIA_DIR and self.parent.name.endswith(".partial"):
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, *a, **kw)

    monkeypatch.setattr(Path, "mkdir", full)
    with pytest.raises(OSError, match="No space left") as exc:
        plan(runs, tmp_path / "s")
    assert exc.value.errno == errno.ENOSPC and os.listdir(tmp_path) == []


def test_a_leftover_partial_of_this_very_process_never_enters_a_study(runs, tmp_path):
    """A partial folder with this process's tag (a killed planner whose pid this process now has): it is cleared
    before the plan writes (its stale files never join the study)."""
    from harness.io import temp_tag

    left = tmp_path / f".s.{temp_tag()}.partial"
    (left / "media").mkdir(parents=True)
    (left / "media" / "p999-a.mp4").write_bytes(b"stale")
    d = Path(plan(runs, tmp_path / "s")["dir"])
    assert "p999-a.mp4" not in os.listdir(d / "media") and os.listdir(tmp_path) == ["s"]


# -------------------------------------------------------------------------------------- a killed planner's partial
def dead_on_this_host(monkeypatch):
    import harness.io

    monkeypatch.setattr(harness.io, "pid_alive", lambda pid, start=None: pid == os.getpid())
    return lambda name: tmp_name(name, harness.io.host_tag())


def tmp_name(name: str, host: str, pid: int = 4242) -> str:
    return f".{name}.{host}-{pid}.partial"


def test_only_a_dead_planners_partial_folder_on_this_host_is_cleared(runs, tmp_path, monkeypatch):
    from harness.io import host_tag

    dead = dead_on_this_host(monkeypatch)
    (tmp_path / dead("s") / "media").mkdir(parents=True)
    other_host = tmp_path / tmp_name("s", "000000" if host_tag() != "000000" else "111111")
    other_host.mkdir()
    unowned = tmp_path / ".s.junk.partial"  # the name of no planner: no host, no pid
    unowned.mkdir()
    (tmp_path / dead("t")).mkdir()  # another study's
    plan(runs, tmp_path / "s")
    assert partials(tmp_path) == sorted([other_host.name, unowned.name, dead("t")])


def test_a_file_or_a_symlink_named_like_a_dead_partial_is_kept(runs, tmp_path, monkeypatch):
    dead = dead_on_this_host(monkeypatch)
    (tmp_path / dead("s")).write_text("not a folder")
    target = tmp_path / "elsewhere"
    (target / "media").mkdir(parents=True)
    os.symlink(target, tmp_path / dead("s").replace("4242", "4243"))
    plan(runs, tmp_path / "s")
    assert (tmp_path / dead("s")).read_text() == "not a folder"
    assert os.path.islink(tmp_path / dead("s").replace("4242", "4243")) and os.listdir(target) == ["media"]


def test_a_partial_folder_that_could_not_be_cleared_is_never_written_into(runs, tmp_path, monkeypatch):
    from harness.io import temp_tag

    monkeypatch.setattr(design, "_remove_dead_partials", lambda out_dir: None)  # as if removing it had failed
    left = tmp_path / f".s.{temp_tag()}.partial"
    (left / "media").mkdir(parents=True)
    (left / "media" / "p999-a.mp4").write_bytes(b"stale")
    with pytest.raises(FileExistsError):
        plan(runs, tmp_path / "s")
    assert not (tmp_path / "s").exists()

"""The ``human`` command line in-process (harness.app.human.cli): its ``key=value`` parsing and exact refusals,
integer and boolean options at their bounds, the exit codes of ``main``, and ``plan``'s refusals and output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.app import human
from harness.app.human import cli
from harness.app.human.cli import HumanArgError, parse_args
from tests.support.human_data import make_runs


def test_the_package_re_exports_the_cli():
    assert human.main is cli.main and human.parse_args is cli.parse_args and human.COMMANDS is cli.COMMANDS


def test_parse_args_rules():
    assert parse_args("plan", []) == {"run": []}
    assert parse_args("status", []) == {}
    assert parse_args("plan", ["run=a", "run=b=c", "seed=3"]) == {"run": ["a", "b=c"], "seed": "3"}
    assert parse_args("report", ["study=s", "output_root=o"]) == {"study": "s", "output_root": "o"}
    with pytest.raises(HumanArgError, match=r"^human plan: 'seed' is not key=value; usage:\n    human plan"):
        parse_args("plan", ["seed"])
    with pytest.raises(HumanArgError, match=r"^human status: unknown option run=; use output_root, study$"):
        parse_args("status", ["run=x"])
    with pytest.raises(HumanArgError, match=r"^human serve: port= given twice$"):
        parse_args("serve", ["port=1", "port=2"])


def test_integer_options_at_their_bounds():
    assert cli._int({}, "seed", 7) == 7 and cli._int({"seed": "0"}, "seed", 7) == 0
    assert cli._int({"pairs": "all"}, "pairs", None, 1) is None and cli._int({"instances": "all"}, "instances", 5) == 5
    assert cli._int({"port": "65535"}, "port", 1, 0, 65535) == 65535 and cli._int({"port": "0"}, "port", 1, 0, 9) == 0
    for bad in ("-1", "65536", "x", "all", "1.5"):
        with pytest.raises(HumanArgError, match=rf"^port={bad}: must be an integer in \[0, 65535\]$"):
            cli._int({"port": bad}, "port", 1, 0, 65535)
    with pytest.raises(HumanArgError, match=r"^seed=all: must be an integer in \[0, 4294967295\]$"):
        cli._int({"seed": "all"}, "seed", 0)
    assert cli._int({"seed": str(2**32 - 1)}, "seed", 0) == 2**32 - 1


def test_boolean_options():
    for v in ("true", "TRUE", "yes", "1"):
        assert cli._bool({"unblind": v}, "unblind", False) is True
    for v in ("false", "No", "0"):
        assert cli._bool({"unblind": v}, "unblind", True) is False
    assert cli._bool({}, "unblind", True) is True and cli._bool({}, "unblind", False) is False
    with pytest.raises(HumanArgError, match=r"^unblind=maybe: use true or false$"):
        cli._bool({"unblind": "maybe"}, "unblind", True)


def test_main_exit_codes(capsys, monkeypatch):
    assert cli.main([]) == 2 and "human plan" in capsys.readouterr().out
    for h in ("-h", "--help", "help"):
        assert cli.main([h]) == 0 and capsys.readouterr().out.startswith("``python -m harness human")
    assert cli.main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: human frobnicate: unknown command; use one of plan, serve, report, export, "
                          "tokens, close, status\n")
    assert cli.main(["status", "bogus=1"]) == 2
    assert capsys.readouterr().err == "error: human status: unknown option bogus=; use output_root, study\n"

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "status", interrupted)
    assert cli.main(["status"]) == 130


def test_report_and_tokens_refuse_their_options_before_reading_the_study(tmp_path, capsys):
    assert cli.main(["report", "study=nowhere", "exclude=all"]) == 2
    assert "exclude=all: use exclude=failed_checks" in capsys.readouterr().err
    assert cli.main(["tokens", "study=nowhere", "organiser=old"]) == 2
    assert "organiser=old: use organiser=new" in capsys.readouterr().err
    assert cli.main(["tokens", "study=nowhere"]) == 2
    assert "human tokens: add=<id>[,<id>...] names the annotators to add" in capsys.readouterr().err
    assert cli.main(["tokens", "study=nowhere", "add=a9"]) == 2
    assert "study=nowhere: no study.json" in capsys.readouterr().err
    assert cli.main(["status", "study="]) == 2
    assert "study=: give the study's name" in capsys.readouterr().err


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("runs"))


def test_plan_refusals(runs, tmp_path, capsys):
    r = [f"run={x}" for x in runs]
    root = f"output_root={tmp_path}"
    cases = [([root], "human plan: give the evaluated runs"),
             ([*r, root, "metric= , "], "metric=: name static, dynamic or metric ids"),
             ([*r, root, "name=a", f"out={tmp_path / 'o'}"], "human plan: give name= or out=, not both"),
             ([*r, root, "name=../x"], "name="),
             ([*r, root, "name=a b"], "name='a b': not a plain name"),
             ([*r, root, "name=a,b"], "name=a,b: use letters, digits and _ . + = - (up to 100 characters)"),
             ([*r, root, "annotators=0"], "annotators=0: must be an integer in [1, 100]"),
             ([*r, root, "annotators=101"], "annotators=101: must be an integer in [1, 100]"),
             ([*r, root, "pairs=0"], "pairs=0: must be an integer in [1, 1000000]"),
             ([*r, root, "checks=1001"], "checks=1001: must be an integer in [0, 1000]"),
             ([*r, root, "practice=101"], "practice=101: must be an integer in [0, 100]"),
             ([*r, root, "require_judge=perhaps"], "require_judge=perhaps: use true or false")]
    for args, needle in cases:
        assert cli.main(["plan", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error: ") and needle in err, (args, err)
    assert not (tmp_path / "studies").exists()  # nothing planned by a refused command


def test_plan_names_its_study_and_prints_what_it_planned(runs, tmp_path, capsys):
    args = ["plan", *[f"run={x}" for x in runs], f"output_root={tmp_path}", "metric=environment.visible",
            "seed=5", "annotators=x1,x2"]
    assert cli.main(args) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    names = "+".join(Path(x).name for x in runs)
    study = tmp_path / "studies" / f"static-{names}-seed5"
    assert (study / "study.json").is_file()
    assert out.startswith("planned static study: ") and f"-> {study}" in out.splitlines()[0]
    assert "annotators: x1, x2;" in out and f"next: python -m harness human serve study={study}" in out
    assert json.loads((study / "annotators.json").read_text())  # the annotators named, each with a token
    assert cli.main([*args[:-2], "annotators=2", "name=two"]) == 0
    assert "annotators: a1, a2;" in capsys.readouterr().out
    assert cli.main(["plan", *[f"run={x}" for x in runs], f"out={tmp_path / 'elsewhere'}",
                     "metric=environment.visible"]) == 0
    assert (tmp_path / "elsewhere" / "study.json").is_file()


def test_the_organisers_commands_on_a_planned_study(runs, tmp_path, capsys):
    """status (the progress table), export (blinded or not), tokens (new annotators, a new organiser token) and
    report, each on a small planned study with three votes."""
    from evaluate.human.store import VoteStore, study_hash

    root = f"output_root={tmp_path}"
    assert cli.main(["plan", *[f"run={x}" for x in runs], root, "metric=environment.visible", "name=s1"]) == 0
    study = tmp_path / "studies" / "s1"
    orders = {a["id"]: a["order"] for a in json.loads((study / "annotators.json").read_text())["annotators"]}
    store = VoteStore(study / "votes.sqlite", study_hash(study / "study.json"))
    for item in orders["a1"][:3]:
        store.record("a1", item, "static", {"choice": "A"})
    capsys.readouterr()
    assert cli.main(["status", "study=s1", root]) == 0
    lines = capsys.readouterr().out.splitlines()
    total = sum(len(o) for o in orders.values())
    assert lines[0] == f"study s1: 3 of {total} answers in; open"
    assert lines[1] == "  annotator           done last vote (UTC)      changed checks ok median s  agree w/ metric"
    assert lines[2].startswith(f"  a1           {'3 / ' + str(len(orders['a1'])):>11} 20") and " % of " in lines[2]
    assert lines[3] == f"  a2           {'0 / ' + str(len(orders['a2'])):>11} -                          0         -" \
                       "        -                -"
    assert cli.main(["export", "study=s1", root]) == 0  # blind by default
    assert capsys.readouterr().out == (f"exported 3 votes: {study / 'exports' / 'votes.csv'}  "
                                       f"{study / 'exports' / 'votes.jsonl'} (blind: what was clicked and each "
                                       "item's role; unblind=true adds the arms)\n")
    assert "arm_A" not in (study / "exports" / "votes.csv").read_text().splitlines()[0]
    assert cli.main(["export", "study=s1", root, f"out={tmp_path / 'ex'}", "unblind=true"]) == 0
    assert "arm_A" in (tmp_path / "ex" / "votes-unblinded.csv").read_text().splitlines()[0]
    assert (tmp_path / "ex" / "votes-unblinded.csv").stat().st_mode & 0o777 == 0o600
    capsys.readouterr()
    assert cli.main(["tokens", "study=s1", root, "add=z9,z8"]) == 0
    assert capsys.readouterr().out == (f"added z9, z8; their tokens are in {study / 'tokens.txt'} (restart human "
                                       "serve to admit them)\n")
    before = (study / "organiser.txt").read_text()
    assert cli.main(["tokens", "study=s1", root, "organiser=new"]) == 0
    assert capsys.readouterr().out.startswith(f"new organiser token in {study / 'organiser.txt'} (mode 0600;")
    assert (study / "organiser.txt").read_text() != before
    assert cli.main(["report", "study=s1", root, "n_boot=100"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "# Human study: s1 (static)"
    assert out[-2] == (f"report: {study / 'report' / 'agreement.md'}  {study / 'report' / 'agreement.json'}  "
                       f"tables: {study / 'report' / 'tables'}")
    assert out[-1].startswith("interim report: the study is open")  # open: the files are the organiser's only
    assert "(100 resamples, seed 0)" in "\n".join(out)
    assert (study / "report" / "agreement.json").stat().st_mode & 0o777 == 0o600
    assert cli.main(["report", "study=s1", root, "n_boot=99"]) == 2
    assert "n_boot=99: must be an integer in [100, 1000000]" in capsys.readouterr().err
    _revoke_and_close(study, root, orders, store, capsys)


def _revoke_and_close(study, root, orders, store, capsys):
    """revoke= takes a token out (sessions end, its line leaves tokens.txt, its votes stay); close refuses every
    later vote and makes the report final, readable like any result."""
    from evaluate.human.store import StudyClosed, TokenRevoked

    sid = store.new_session("a2")
    assert cli.main(["tokens", "study=s1", root, "revoke=a2"]) == 0
    assert capsys.readouterr().out.startswith("revoked a2: their sessions ended")
    assert store.session(sid) is None and "a2\t" not in (study / "tokens.txt").read_text()
    assert "a1\t" in (study / "tokens.txt").read_text()
    with pytest.raises(TokenRevoked):
        store.record("a2", orders["a2"][0], "static", {"choice": "A"})
    with pytest.raises(TokenRevoked):
        store.new_session("a2")
    assert cli.main(["tokens", "study=s1", root, "revoke=nobody"]) == 2
    assert "revoke=nobody: nobody not in s1" in capsys.readouterr().err
    assert cli.main(["close", "study=s1", root]) == 0
    assert capsys.readouterr().out.startswith("closed study s1 at ")
    with pytest.raises(StudyClosed):
        store.record("a1", orders["a1"][3], "static", {"choice": "A"})
    assert len(store.votes()) == 3  # nothing was added, nothing taken away
    assert cli.main(["status", "study=s1", root]) == 0
    out = capsys.readouterr().out
    assert "; closed at " in out.splitlines()[0] and "warning: a2's token was revoked" in out
    assert cli.main(["report", "study=s1", root, "n_boot=100"]) == 0
    assert "Final: the study was closed at" in capsys.readouterr().out
    assert json.loads((study / "report" / "agreement.json").read_text())["final"] is True


def test_serve_hands_the_study_host_and_port_to_the_server(runs, tmp_path, capsys, monkeypatch):
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    from harness.app.human import server

    root = f"output_root={tmp_path}"
    assert cli.main(["plan", *[f"run={x}" for x in runs], root, "metric=environment.visible", "name=s2"]) == 0
    calls = []
    monkeypatch.setattr(server, "serve", lambda study, host, port, announce: calls.append((study, host, port)))
    capsys.readouterr()
    assert cli.main(["serve", "study=s2", root]) == 0
    assert calls == [((tmp_path / "studies" / "s2").resolve(), "127.0.0.1", 8765)]
    assert capsys.readouterr().err == ""  # loopback: no warning
    assert cli.main(["serve", "study=s2", root, "host=0.0.0.0", "port=0"]) == 0
    assert calls[-1][1:] == ("0.0.0.0", 0)
    assert capsys.readouterr().err.startswith("warning: host=0.0.0.0 exposes the study beyond this machine")
    assert cli.main(["serve", "study=s2", root, "port=65536"]) == 2


def test_plan_defaults(runs, tmp_path, capsys):
    """Seed 0, three annotators, no attention checks, no practice items; a named metric plans without a warning,
    metric=static warns about the paper metrics it leaves out."""
    assert cli.main(["plan", *[f"run={x}" for x in runs], f"output_root={tmp_path}",
                     "metric=environment.visible"]) == 0
    out = capsys.readouterr().out
    names = "+".join(Path(x).name for x in runs)
    study = tmp_path / "studies" / f"static-{names}-seed0"
    items = json.loads((study / "study.json").read_text())["items"]
    pairs = int(out.splitlines()[1].split(": ")[1].split(" of ")[0])
    assert out.startswith(f"planned static study: {pairs} item(s)") and len(items) == pairs
    assert "annotators: a1, a2, a3;" in out and "attention checks" not in out and "warning" not in out
    assert cli.main(["plan", *[f"run={x}" for x in runs], f"output_root={tmp_path}", "metric=static", "name=st"]) == 0
    assert "warning: metric=static plans" in capsys.readouterr().out
    for opt, bounds in (("instances", "[1, 1000000]"), ("pairs", "[1, 1000000]")):
        assert cli.main(["plan", *[f"run={x}" for x in runs], f"output_root={tmp_path}", f"{opt}=0"]) == 2
        assert f"{opt}=0: must be an integer in {bounds}" in capsys.readouterr().err


def test_report_default_resamples_and_leaving_out_failed_checks(runs, tmp_path, capsys):
    from evaluate.human.store import VoteStore, study_hash

    root = f"output_root={tmp_path}"
    assert cli.main(["plan", *[f"run={x}" for x in runs], root, "metric=environment.visible", "name=c1",
                     "checks=1"]) == 0
    assert "  attention checks: 1 (mixed among the items; never in the statistics)" in capsys.readouterr().out
    study = tmp_path / "studies" / "c1"
    check = next(i for i in json.loads((study / "key.json").read_text())["items"] if i.get("check"))
    wrong = "B" if check["check"]["expected"] == "A" else "A"
    VoteStore(study / "votes.sqlite", study_hash(study / "study.json")).record("a1", check["id"], "static",
                                                                               {"choice": wrong})
    assert cli.main(["report", "study=c1", root]) == 0
    assert "(2000 resamples, seed 0)" in capsys.readouterr().out
    assert json.loads((study / "report" / "agreement.json").read_text())["excluded"] == []
    assert cli.main(["report", "study=c1", root, "exclude=failed_checks", "n_boot=100"]) == 0
    assert json.loads((study / "report" / "agreement.json").read_text())["excluded"] == ["a1"]


def test_a_closed_pipe_ends_quietly_with_1(monkeypatch):
    import io
    import os
    import sys

    class Out(io.StringIO):
        def fileno(self) -> int:
            return 99

    calls = []
    monkeypatch.setattr(sys, "stdout", Out())
    monkeypatch.setattr(os, "open", lambda path, flags: calls.append(("open", path, flags)) or 42)
    monkeypatch.setattr(os, "dup2", lambda a, b: calls.append(("dup2", a, b)))

    def closed(args):
        raise BrokenPipeError

    monkeypatch.setitem(cli.COMMANDS, "status", closed)
    assert cli.main(["status"]) == 1
    assert calls == [("open", os.devnull, os.O_WRONLY), ("dup2", 42, 99)]  # stdout now writes to /dev/null


def test_plan_requires_the_named_judge_by_default(runs, tmp_path, capsys):
    args = ["plan", *[f"run={x}" for x in runs], f"output_root={tmp_path}", "metric=dynamic", "judge=nosuch"]
    assert cli.main(args) == 2
    assert "judge=nosuch: no dynamic video of these runs has its verdict" in capsys.readouterr().err
    assert cli.main([*args, "require_judge=false"]) == 0  # human labels without a comparison

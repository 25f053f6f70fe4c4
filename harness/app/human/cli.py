"""``python -m harness human <plan|serve|report|export|tokens|close|status> key=value ...``: human evaluation of the metrics
(WorldMemBench appendix F; docs/human-study.md).

    human plan   run=A [run=B ...] [metric=static|dynamic|<id>[,<id>...]] [pairs=N | instances=N] [seed=0] [secret=S]
                 [annotators=3 | annotators=ann1,ann2,...] [name=NAME | out=DIR] [judge=NAME] [require_judge=true]
                 [checks=N] [practice=N]  (attention checks mixed in; practice items first)
    human serve  study=NAME|DIR [host=127.0.0.1] [port=8765]
    human report study=NAME|DIR [n_boot=2000] [exclude=failed_checks]
    human export study=NAME|DIR [out=DIR] [unblind=false]  (unblind=true: the arms too, mode 0600)
    human tokens study=NAME|DIR add=ann4[,ann5] | revoke=ann2[,...] | organiser=new
    human close  study=NAME|DIR            (no more votes: the server refuses them, the report is final)
    human status study=NAME|DIR            (the organiser's view: progress, checks, speed, agreement)

``output_root=`` (default ``outputs``) places studies under ``<output_root>/studies/``. Plain ``key=value``
arguments (no Hydra: nothing here needs the run configuration); a bad one is a one-line error with exit code 2.
The web framework is imported only by ``serve``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.errors import UserError

USAGE = __doc__.split("\n\n")[1]
_COMMON = {"output_root"}
KEYS = {"plan": {"run", "metric", "pairs", "instances", "seed", "annotators", "name", "out", "judge", "require_judge",
                 "secret", "checks", "practice"},
        "serve": {"study", "host", "port"}, "report": {"study", "n_boot", "exclude"},
        "export": {"study", "out", "unblind"}, "close": {"study"},
        "tokens": {"study", "add", "revoke", "organiser"}, "status": {"study"}}


class HumanArgError(UserError):
    """A bad ``human`` argument; the message names it and the fix."""


def parse_args(cmd: str, argv: list[str]) -> dict[str, Any]:
    """``key=value`` arguments of ``cmd``: ``run`` may repeat (a list), every other key once."""
    allowed = KEYS[cmd] | _COMMON
    out: dict[str, Any] = {"run": []} if cmd == "plan" else {}
    for a in argv:
        if "=" not in a:
            raise HumanArgError(f"human {cmd}: {a!r} is not key=value; usage:\n{USAGE}")
        k, v = a.split("=", 1)
        if k not in allowed:
            raise HumanArgError(f"human {cmd}: unknown option {k}=; use {', '.join(sorted(allowed))}")
        if k == "run":
            out["run"].append(v)
        elif k in out:
            raise HumanArgError(f"human {cmd}: {k}= given twice")
        else:
            out[k] = v
    return out


def _int(args: dict[str, Any], key: str, default: Any, lo: int = 0, hi: int = 2**32 - 1) -> Any:
    v = args.get(key)
    if v is None or v == "all" and key in ("pairs", "instances"):
        return default
    try:
        n = int(v)
    except ValueError:
        raise HumanArgError(f"{key}={v}: must be an integer in [{lo}, {hi}]") from None
    if not lo <= n <= hi:
        raise HumanArgError(f"{key}={v}: must be an integer in [{lo}, {hi}]")
    return n


def _bool(args: dict[str, Any], key: str, default: bool) -> bool:
    v = args.get(key)
    if v is None:
        return default
    if v.lower() in ("true", "yes", "1"):
        return True
    if v.lower() in ("false", "no", "0"):
        return False
    raise HumanArgError(f"{key}={v}: use true or false")


def _study(args: dict[str, Any]) -> Path:
    from evaluate.human.common import resolve_study

    return resolve_study(args.get("study", ""), args.get("output_root", "outputs"))


def cmd_plan(args: dict[str, Any]) -> int:
    from evaluate.human.common import STUDY_NAME
    from evaluate.human.design import PlanRequest, check_request_runs, plan_study

    root = args.get("output_root", "outputs")
    if not args["run"]:
        raise HumanArgError("human plan: give the evaluated runs, e.g. human plan run=A run=B metric=static")
    runs = check_request_runs(args["run"], root)
    metrics = [m.strip() for m in args.get("metric", "static").split(",") if m.strip()]
    if not metrics:
        raise HumanArgError("metric=: name static, dynamic or metric ids")
    seed = _int(args, "seed", 0)
    ann = args.get("annotators", "3")
    ids = [f"a{i}" for i in range(1, _int({"annotators": ann}, "annotators", 3, 1, 100) + 1)] if ann.isdigit() \
        else ann.split(",")
    req = PlanRequest(runs=runs, metrics=metrics, seed=seed, pairs=_int(args, "pairs", None, 1, 10**6),
                      instances=_int(args, "instances", None, 1, 10**6), annotators=ids, judge=args.get("judge"),
                      require_judge=_bool(args, "require_judge", True), secret=args.get("secret"),
                      checks=_int(args, "checks", 0, 0, 1000), practice=_int(args, "practice", 0, 0, 100))
    if "out" in args and "name" in args:
        raise HumanArgError("human plan: give name= or out=, not both")
    if "out" in args:
        out = Path(args["out"])
    else:
        name = args.get("name") or f"{req.kind}-{'+'.join(r.name for r in runs)}-seed{seed}"
        from harness.outputs import PlanError, check_name

        try:  # the one name rule of every name that becomes a folder (harness.outputs.check_name)
            check_name("name", name, "it becomes the study's folder under output_root/studies/")
        except PlanError as exc:
            raise HumanArgError(str(exc)) from None
        if not STUDY_NAME.match(name):
            raise HumanArgError(f"name={name}: use letters, digits and _ . + = - (up to 100 characters)")
        out = Path(root) / "studies" / name
    r = plan_study(req, out)
    print(f"planned {r['kind']} study: {r['items']} item(s) -> {r['dir']}")
    for k, c in r["counts"].items():
        n = c.get("pairs", c.get("instances"))
        print(f"  {k}: {n} of {c['candidates']} candidate(s)" + (" (fewer than asked: every candidate is in)"
                                                                   if c.get("short") else ""))
    if r.get("dropped"):  # metric=static without some of the paper's six: say so, never silently
        print(f"warning: metric=static plans {len(r['counts'])} of the paper's six static metrics; not in this "
              f"study (not computed in these runs): " + "; ".join(f"{d['metric']} ({d['reason']})"
                                                                   for d in r["dropped"]) +
              ". Fetch the missing weights (python -m harness weights list), evaluate again and plan anew to "
              "include them.")
    if r.get("checks"):
        print(f"  attention checks: {r['checks']} (mixed among the items; never in the statistics)")
    print(f"  annotators: {', '.join(r['annotators'])}; their tokens are in {r['tokens_file']} (mode 0600: hand each "
          "annotator their own line)")
    print(f"  organiser page: /organiser of the app; its token is in {r['organiser_file']} (mode 0600: keep it, "
          "annotators never get it)")
    print(f"next: python -m harness human serve study={r['dir']}")
    return 0


def cmd_serve(args: dict[str, Any]) -> int:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        from harness.errors import MissingDependencyError

        raise MissingDependencyError("human serve (the annotation web app)", "human",
                                     "starlette and uvicorn") from None
    from harness.app.human.server import LOOPBACK, serve

    host = args.get("host", "127.0.0.1")
    if host not in LOOPBACK:
        print(f"warning: host={host} exposes the study beyond this machine; it speaks plain HTTP, so put it behind "
              "a TLS reverse proxy and hand out tokens privately", file=sys.stderr)
    serve(_study(args), host, _int(args, "port", 8765, 0, 65535), announce=lambda s: print(s, flush=True))
    return 0


def cmd_report(args: dict[str, Any]) -> int:
    from evaluate.human.report import write_report

    exclude = args.get("exclude", "none")
    if exclude not in ("none", "failed_checks"):
        raise HumanArgError(f"exclude={exclude}: use exclude=failed_checks (leave out annotators who failed an "
                            "attention check) or exclude=none")
    out = write_report(_study(args), n_boot=_int(args, "n_boot", 2000, 100, 10**6),
                       exclude_failed_checks=exclude == "failed_checks")
    print(out["text"])
    print(f"report: {out['markdown']}  {out['json']}  tables: {Path(out['out_dir']) / 'tables'}")
    if not out["results"]["final"]:
        print("interim report: the study is open (python -m harness human close study=... makes it final); its files "
              "name the arms, so they are written for you only (mode 0600)")
    return 0


def cmd_export(args: dict[str, Any]) -> int:
    from evaluate.human.analysis import export_votes

    unblind = _bool(args, "unblind", False)
    out = export_votes(_study(args), Path(args["out"]) if args.get("out") else None, unblind)
    n = int(out["votes"])
    print(f"exported {n} vote{'' if n == 1 else 's'}: {out['csv']}  {out['jsonl']}" +
          (" (unblinded: the arms of every vote; mode 0600, keep them like key.json)" if unblind else
           " (blind: what was clicked and each item's role; unblind=true adds the arms)"))
    return 0


def cmd_tokens(args: dict[str, Any]) -> int:
    from evaluate.human.common import ORGANISER_FILE, TOKENS_FILE
    from evaluate.human.design import add_annotators, write_organiser_token

    if "organiser" in args and args["organiser"] != "new":
        raise HumanArgError(f"organiser={args['organiser']}: use organiser=new (a fresh organiser token, replacing "
                            "the old one)")
    if not args.get("add") and not args.get("revoke") and "organiser" not in args:
        raise HumanArgError("human tokens: add=<id>[,<id>...] names the annotators to add, revoke=<id>[,<id>...] "
                            "the tokens to revoke; organiser=new makes a new organiser token")
    study = _study(args)
    if args.get("revoke"):
        from evaluate.human.design import revoke_annotators

        gone = revoke_annotators(study, [a.strip() for a in args["revoke"].split(",") if a.strip()])
        print(f"revoked {', '.join(gone)}: their sessions ended and the server refuses their logins and votes from "
              f"now on (no restart needed); their votes so far stay; their lines left {study / TOKENS_FILE}")
    if args.get("add"):
        new = add_annotators(study, args["add"].split(","))
        print(f"added {', '.join(new)}; their tokens are in {study / TOKENS_FILE} (restart human serve to admit them)")
    if "organiser" in args:
        write_organiser_token(study)
        print(f"new organiser token in {study / ORGANISER_FILE} (mode 0600; restart human serve to use it, the old "
              "one no longer opens /organiser)")
    return 0


def cmd_close(args: dict[str, Any]) -> int:
    """Close a study: the running server refuses every later vote, and ``human report`` is final."""
    from evaluate.human.store import close_study, read_votes

    study = _study(args)
    when = close_study(study)
    n = len(read_votes(study))
    print(f"closed study {study.name} at {when} UTC: {n} vote{'' if n == 1 else 's'} final; the server refuses new "
          f"votes from now on (no restart needed). Next: python -m harness human report study={study}")
    return 0


def cmd_status(args: dict[str, Any]) -> int:
    """The organiser's view of a running study (reads the vote store; the server may be running)."""
    from evaluate.human.analysis import flags, progress
    from evaluate.human.store import closed_utc

    study = _study(args)
    rows = progress(study)
    closed = closed_utc(study)
    print(f"study {study.name}: {sum(r['done'] for r in rows)} of {sum(r['total'] for r in rows)} answers in; "
          + (f"closed at {closed} UTC" if closed else "open"))
    print(f"  {'annotator':<12} {'done':>11} {'last vote (UTC)':<20} {'changed':>7} {'checks ok':>9} "
          f"{'median s':>8} {'agree w/ metric':>16}")
    for r in rows:
        ag = "-" if r["agree_with_metric"] is None else f"{100 * r['agree_with_metric']:.0f} % of {r['decisive_votes']}"
        ck = f"{r['checks_passed']}/{r['checks']}" if r["checks"] else "-"
        med = "-" if r["median_s"] is None else f"{r['median_s']:.1f}"
        print(f"  {r['annotator']:<12} {str(r['done']) + ' / ' + str(r['total']):>11} "
              f"{(r['last_vote_utc'] or '-')[:19]:<20} {r['corrected']:>7} {ck:>9} {med:>8} {ag:>16}")
    for line in flags(rows):
        print(f"  warning: {line}")
    return 0


COMMANDS: dict[str, Callable[[dict[str, Any]], int]] = {"plan": cmd_plan, "serve": cmd_serve, "report": cmd_report,
                                              "export": cmd_export, "tokens": cmd_tokens, "close": cmd_close,
                                              "status": cmd_status}


def main(argv: list[str]) -> int:
    """Entry point of ``python -m harness human ...``; returns the exit code (2: a user error, printed)."""
    cmd = argv[0] if argv else ""
    if cmd not in COMMANDS and cmd not in ("", "-h", "--help", "help"):
        print(f"error: human {cmd}: unknown command; use one of {', '.join(COMMANDS)}\n{USAGE}", file=sys.stderr)
        return 2
    try:
        if cmd in ("", "-h", "--help", "help"):
            print(__doc__)
            return 0 if cmd else 2
        return COMMANDS[cmd](parse_args(cmd, argv[1:]))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader of stdout went away (`... | head`)
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1

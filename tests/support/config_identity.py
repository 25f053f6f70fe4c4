"""What a run records from its configuration, for every model x trajectory x context and every other preset: the
saved ``config.yaml`` and ``overrides.yaml`` text, the ``config`` / ``model`` / ``context`` / ``trajectory`` parts
of ``meta.json``, and every item's fingerprint with its parts. Two code trees that record the same bytes give the
same dump (``compare``); the slow test ``tests/harness/test_config_identity.py`` holds today's tree against the
commit before the typed configuration (issue 45).

    python -m tests.support.config_identity dump OUT.json [--fast]        # this tree (PYTHONPATH decides)
    python -m tests.support.config_identity compare BASE_COMMIT [--fast]  # BASE_COMMIT's tree against this one

Only entry points both trees have are used (Hydra's compose, ``argv.resolved``, ``settings.load_run_config``,
``plan.plan_from_config``, ``runner.fingerprints``, ``harness.secrets``). The fingerprint hashes the adapter's
source too (``harness.fingerprint.adapter_code_version``), which changes with any edit of ``adapters/base.py``: the
dump records that part beside a fingerprint computed with it held fixed, so a change of configuration and a change
of code are told apart.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

#: presets beside the model x trajectory x context product: each option of the other groups, on the default model
#: (a served backend on the models it maps)
PRESETS: list[list[str]] = [
    *[[f"experiment={e}"] for e in ("first_look", "context_study", "context_study_lingbot_v2", "demo_sweep",
                                    "nine_model_study")],
    ["debug=default"], ["debug=real_weights"], ["evaluate=off"], ["cases=folder", "cases.source=/nonexistent/cases"],
    ["launcher=basic"], ["launcher=slurm"], ["launcher=submitit_local"],
    ["seed=7"], ["shard=1/2"], ["trajectories=[lrlr,lrud]"], ["context=paper"],
    ["model=lingbot_v2", "backend=sglang", "endpoint=ws://127.0.0.1:30000", "context=fullkv", "context.chunk=3",
     "model.num_frames=489"],
    ["model=sana_wm", "backend=sglang", "endpoint=ws://127.0.0.1:30000", "context=native", "context.chunk=3"],
    ["model=lingbot_v2", "backend=vllm_omni", "endpoint=ws://127.0.0.1:8091", "context=native", "context.chunk=3",
     "model.num_frames=489", "model.width=832", "model.height=480", "backend.action_root=/tmp"],
    ["+model.env={HF_TOKEN: hf_abcdefghijklmnopqrstu}", "model=lingbot", "context=native"],
    ["evaluate.judge.base_url=http://127.0.0.1:8000/v1", "evaluate.bootstrap.n=10"],
    ["context.fov.radius=8", "model.fps=16"],
]


def combinations(fast: bool) -> list[list[str]]:
    """The override lists dumped: every (model, context, trajectory) (``fast``: a pairwise cover, as
    tests/harness/test_configs.py's fast tier), then :data:`PRESETS`."""
    from harness.config_groups import list_group

    models, contexts, trajectories = list_group("model"), list_group("context"), list_group("trajectory")
    out = []
    for i, m in enumerate(models):
        for j, t in enumerate(trajectories):
            chosen = [contexts[(i + j) % len(contexts)]] if fast else contexts
            out += [[f"model={m}", f"context={c}", f"trajectory={t}"] for c in chosen]
    return out + [list(p) for p in PRESETS]


def record(overrides: list[str]) -> dict[str, Any]:
    """What a run with ``overrides`` records (or the error that stops it: its type and message)."""
    import yaml

    from harness.app.argv import resolved
    from harness.app.settings import compose_config
    from harness.secrets import plain_names, redact, redact_overrides, secret_values

    out: dict[str, Any] = {}
    try:
        raw = resolved(compose_config(overrides))
        out["config.yaml"] = yaml.safe_dump(redact(raw), sort_keys=False)
        out["overrides.yaml"] = yaml.safe_dump(redact_overrides(list(overrides), plain_names(raw)))
        secrets = secret_values(raw)
        out["meta.config"] = json.dumps(redact(raw, secrets))
        out.update(_planned(raw, secrets))
    except Exception as exc:  # recorded: both trees must refuse alike
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def _planned(raw: dict[str, Any], secrets: Any) -> dict[str, Any]:
    """The plan's records: model / context / trajectory parts of meta.json and every item's fingerprint."""
    import harness.fingerprint as fp
    from harness.app import runner
    from harness.app.plan import plan_from_config
    from harness.app.settings import load_run_config
    from harness.secrets import redact

    if raw.get("cmd", "run") != "run":
        return {}
    plan = plan_from_config(load_run_config(raw), for_writing=False)
    out: dict[str, Any] = {
        "meta.model": json.dumps(redact(plan.adapter.config.to_dict(), secrets)),
        "meta.context": json.dumps(plan.policy.to_dict()),
        "meta.trajectory": json.dumps({n: s.to_dict() for n, s in plan.specs.items()}),
        "items": len(plan.all_items),
    }
    prints = runner.fingerprints(plan)
    out["fingerprints"] = {k: v[0] for k, v in sorted(prints.items())}
    out["parts"] = {k: v[1] for k, v in sorted(prints.items())}
    real = fp.adapter_code_version
    fp.adapter_code_version = lambda cls: "adapter code held fixed"  # type: ignore[assignment]
    try:
        fixed = fp.item_fingerprints(plan.adapter, plan.policy, plan.specs, {c.id: c for c in plan.cases},
                                     plan.all_items, runner.encoder_settings())
    finally:
        fp.adapter_code_version = real
    out["fingerprints.code_fixed"] = {k: v[0] for k, v in sorted(fixed.items())}
    return out


def dump(path: Path, fast: bool) -> None:
    combos = combinations(fast)
    data = {" ".join(c): record(c) for c in combos}
    path.write_text(json.dumps(data, indent=1, sort_keys=True))


def _dump_tree(tree: Path, out: Path, fast: bool) -> None:
    """``dump`` run with ``tree`` first on the import path (its own conf/, harness/, adapters/ ...)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "tests.support.config_identity", "dump", str(out), *(["--fast"] if fast else [])]
    subprocess.run(cmd, cwd=tree, env=env, check=True)


def compare(base_commit: str, fast: bool, head: Path, work: Path) -> dict[str, Any]:
    """Dump ``base_commit``'s tree (checked out under ``work`` by ``git archive``) and ``head``; the numbers and
    every difference. The dump script itself is taken from ``head`` in both (the base may predate it)."""
    base = work / "base"
    base.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(head), "archive", base_commit], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
    (base / "tests" / "support").mkdir(parents=True, exist_ok=True)
    (base / "tests" / "support" / "config_identity.py").write_bytes(Path(__file__).read_bytes())
    _dump_tree(base, work / "base.json", fast)
    _dump_tree(head, work / "head.json", fast)
    return differences(json.loads((work / "base.json").read_text()), json.loads((work / "head.json").read_text()))


def differences(base: dict[str, Any], head: dict[str, Any]) -> dict[str, Any]:
    """Counts of what was compared and the list of differing (combination, record) pairs (the fingerprint's
    adapter-code part and the fingerprints that include it are counted apart: they change with the code)."""
    code = ("fingerprints", "parts")
    diff, code_diff = [], 0
    n = {"combinations": len(base), "refused": 0, "configs": 0, "fingerprints": 0}
    for combo in sorted(set(base) | set(head)):
        a, b = base.get(combo, {}), head.get(combo, {})
        n["refused"] += "error" in a
        n["configs"] += "config.yaml" in a
        n["fingerprints"] += len(a.get("fingerprints.code_fixed", {}))
        for key in sorted(set(a) | set(b)):
            if a.get(key) == b.get(key):
                continue
            if key in code and _same_but_code(a, b, key):
                code_diff += 1
                continue
            diff.append((combo, key, a.get(key), b.get(key)))
    return {**n, "differences": diff, "code_only": code_diff}


def _same_but_code(a: dict[str, Any], b: dict[str, Any], key: str) -> bool:
    """Whether ``a[key]`` and ``b[key]`` differ only by the adapter-code part."""
    if key == "fingerprints":
        return a.get("fingerprints.code_fixed") == b.get("fingerprints.code_fixed")
    def strip(parts: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        return {k: {p: h for p, h in v.items() if p != "adapter_code"} for k, v in parts.items()}
    return bool(strip(a[key]) == strip(b[key]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.support.config_identity")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out", type=Path)
    d.add_argument("--fast", action="store_true")
    c = sub.add_parser("compare")
    c.add_argument("base_commit")
    c.add_argument("--fast", action="store_true")
    args = p.parse_args(argv)
    if args.cmd == "dump":
        dump(args.out, args.fast)
        return 0
    head = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as work:
        result = compare(args.base_commit, args.fast, head, Path(work))
    for combo, key, a, b in result["differences"][:20]:
        print(f"DIFFERS {combo} :: {key}\n  base: {str(a)[:400]}\n  head: {str(b)[:400]}")
    print(json.dumps({k: v for k, v in result.items() if k != "differences"} | {
        "differences": len(result["differences"])}))
    return 1 if result["differences"] else 0


if __name__ == "__main__":
    sys.exit(main())

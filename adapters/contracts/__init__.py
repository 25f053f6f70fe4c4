"""Upstream launch contracts as data: what each model's own code accepts, read at the pinned commit.

``adapters/contracts/<model>.yaml`` records, each fact with the upstream file and line it was read from:

- ``entry``: the script ``command.sh`` runs and its command-line flags (name, required, type, choices, action,
  nargs) as upstream's ``argparse`` defines them (``python -m adapters.contracts.extract <script>`` lists them);
  ``kind: env`` entries (a shell launcher) instead list the environment variables the launcher chain reads;
- ``env``: environment variables the launcher or script reads (and the values they accept);
- ``call_sites``: for every upstream function a shim replaces, how upstream calls it (arguments) and what it
  unpacks from the result (arity, types);
- ``output``: where upstream writes the video (a file flag, or a directory plus a file name rule);
- ``canvas``: how upstream derives the generated frame size from the image;
- ``checkpoint`` / ``imports`` / ``literals``: files the loader opens, the package the checkout must import, and
  source literals a shim patches.

The facts are written in the project's own words and format; no upstream code is copied. Tests parse every
compiled ``command.sh`` against its contract (:func:`check_command`) and call each shim's replacement the way
the recorded call site does. Nothing here imports torch or touches upstream code.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

CONTRACT_DIR = Path(__file__).resolve().parent

#: Variables the harness itself sets for every launch (device assignment); not upstream's to define.
HARNESS_ENV = {"CUDA_VISIBLE_DEVICES"}


class ContractViolation(ValueError):
    """A compiled command or shim does not satisfy upstream's contract (the message names the fact and source)."""


@dataclass(frozen=True)
class Contract:
    """One model's upstream facts (see the module docstring). ``raw`` keeps the whole YAML mapping."""

    model: str
    repo: str
    commit: str
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def entry(self) -> dict[str, Any]:
        return self.raw.get("entry", {})

    @property
    def flags(self) -> dict[str, dict[str, Any]]:
        return self.entry.get("flags", {}) or {}

    @property
    def env(self) -> dict[str, dict[str, Any]]:
        return self.raw.get("env", {}) or {}

    @property
    def call_sites(self) -> dict[str, dict[str, Any]]:
        return self.raw.get("call_sites", {}) or {}

    @property
    def output(self) -> dict[str, Any]:
        return self.raw.get("output", {}) or {}

    @property
    def canvas(self) -> dict[str, Any]:
        return self.raw.get("canvas", {}) or {}

    @property
    def checkpoint(self) -> dict[str, Any]:
        return self.raw.get("checkpoint", {}) or {}

    @property
    def imports(self) -> list[str]:
        return list(self.raw.get("imports", []) or [])

    @property
    def literals(self) -> dict[str, dict[str, Any]]:
        return self.raw.get("literals", {}) or {}


def available() -> list[str]:
    """Model names that have a contract file."""
    return sorted(p.stem for p in CONTRACT_DIR.glob("*.yaml"))


def load(model: str) -> Contract:
    """The contract of ``model`` (``adapters/contracts/<model>.yaml``)."""
    path = CONTRACT_DIR / f"{model}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no upstream contract for model {model!r} ({path}); available: {available()}")
    raw = yaml.safe_load(path.read_text()) or {}
    return Contract(model=model, repo=raw.get("repo", ""), commit=raw.get("commit", ""), raw=raw)


# -- flags -> a real argparse parser ---------------------------------------------------------------------------


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print and exit; the tests want the reason
        raise ContractViolation(message)


def _bool_text(values: list[str]):
    accepted = {v.lower() for v in values}

    def parse(text: str) -> bool:
        if text.lower() not in accepted:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {sorted(accepted)}")
        return text.lower() in {"true", "1", "yes", "on", "y", "t"}

    return parse


def _type(spec: dict[str, Any]):
    t = spec.get("type")
    if t in (None, "str", "Path"):
        return str
    if t == "int":
        return int
    if t == "float":
        return float
    if t == "bool_text":
        return _bool_text(spec.get("accepts", ["true", "false", "1", "0", "yes", "no"]))
    raise ValueError(f"contract type {t!r} is not modelled (use str, Path, int, float, bool_text)")


def build_parser(flags: dict[str, dict[str, Any]], prog: str, allow_abbrev: bool = True,
                 one_of_required: Optional[list[list[str]]] = None) -> argparse.ArgumentParser:
    """An ``argparse`` parser with exactly the recorded flags (required, type, choices, action, nargs)."""
    p = _RaisingParser(prog=prog, allow_abbrev=allow_abbrev, add_help=False)
    grouped = {f for group in (one_of_required or []) for f in group}
    groups = [p.add_mutually_exclusive_group(required=True) for _ in (one_of_required or [])]
    for name, spec in flags.items():
        target: Any = p
        for g, members in zip(groups, one_of_required or []):
            if name in members:
                target = g
        names = [name, *spec.get("aliases", [])]
        kw: dict[str, Any] = {}
        action = spec.get("action")
        if action in ("store_true", "store_false"):
            kw["action"] = action
        else:
            kw["type"] = _type(spec)
            if spec.get("choices") is not None:
                kw["choices"] = [kw["type"](c) if kw["type"] in (int, float) else c for c in spec["choices"]]
            if spec.get("nargs") is not None:
                kw["nargs"] = spec["nargs"]
                if spec["nargs"] == "?":
                    kw["const"] = spec.get("const")
        if spec.get("required") and name not in grouped:
            kw["required"] = True
        target.add_argument(*names, dest=name.lstrip("-").replace("-", "_"), **kw)
    return p


# -- command.sh -> (env, argv) -------------------------------------------------------------------------------


def parse_command_sh(text: str) -> tuple[dict[str, str], list[str]]:
    """The exported environment and the launch argv of a harness ``command.sh``."""
    env: dict[str, str] = {}
    body: list[str] = []
    for line in text.replace("\\\n", " ").splitlines():
        s = line.strip()
        if not s or s.startswith("#") or s.startswith("set ") or s.startswith("cd "):
            continue
        if s.startswith("export "):
            k, _, v = s[len("export "):].partition("=")
            env[k] = shlex.split(v)[0] if v else ""
            continue
        body.append(s)
    if len(body) != 1:
        raise ContractViolation(f"command.sh should hold one launch line; found {len(body)}")
    return env, shlex.split(body[0])


@dataclass
class ParsedLaunch:
    """A ``command.sh`` split into its parts: environment, launcher prefix, shim options, upstream arguments."""

    env: dict[str, str]
    launcher: list[str]
    shim: Optional[str]
    shim_args: list[str]
    script: str
    args: list[str]


def split_launch(text: str, script: str) -> ParsedLaunch:
    """Split ``command.sh`` around the upstream ``script`` (relative to the checkout)."""
    env, argv = parse_command_sh(text)
    if script not in argv:
        raise ContractViolation(f"command.sh does not run upstream's entry script {script!r}: {argv}")
    i = argv.index(script)
    head, args = argv[:i], argv[i + 1:]
    shim, shim_args, launcher = None, [], head
    if "--" in head:
        j = head.index("--")
        k = next((n for n, a in enumerate(head[:j]) if a.endswith(".py") and "/adapters/" in a), None)
        if k is None:
            raise ContractViolation(f"command.sh has '--' but no harness shim before it: {head}")
        shim, shim_args, launcher = head[k], head[k + 1:j], head[:k]
    return ParsedLaunch(env, launcher, shim, shim_args, script, args)


def check_args(contract: Contract, args: list[str]) -> argparse.Namespace:
    """Parse upstream arguments with the recorded flags: unknown, ambiguous, abbreviated or missing flags, bad
    choices and bad types all raise :class:`ContractViolation`."""
    entry = contract.entry
    flags = contract.flags
    known = {n for name, spec in flags.items() for n in (name, *spec.get("aliases", []))}
    for a in args:
        if a.startswith("--"):
            name = a.split("=", 1)[0]
            if name not in known:
                raise ContractViolation(
                    f"{contract.model}: flag {name} is not defined by {entry.get('script')} at {contract.commit[:12]} "
                    f"(exact names only; upstream flags: {sorted(known)})")
    parser = build_parser(flags, entry.get("script", contract.model), entry.get("allow_abbrev", True),
                          entry.get("one_of_required"))
    return parser.parse_args(args)


def check_env(contract: Contract, env: dict[str, str]) -> None:
    """Every exported variable is read upstream (or is the harness's own device assignment), required ones are
    set, and values respect the recorded choices."""
    known = contract.env
    for k, v in env.items():
        if k in HARNESS_ENV:
            continue
        if k not in known:
            raise ContractViolation(f"{contract.model}: exports {k}, which upstream never reads "
                                    f"(read: {sorted(known)})")
        spec = known[k]
        if spec.get("choices") is not None and v not in [str(c) for c in spec["choices"]]:
            raise ContractViolation(f"{contract.model}: {k}={v!r} is not one of {spec['choices']} ({spec.get('source')})")
        if spec.get("type") in ("int", "float"):
            try:
                (int if spec["type"] == "int" else float)(v)
            except ValueError:
                raise ContractViolation(f"{contract.model}: {k}={v!r} is not a {spec['type']}") from None
    for k, spec in known.items():
        if spec.get("required") and k not in env:
            raise ContractViolation(f"{contract.model}: {k} must be exported ({spec.get('source')})")

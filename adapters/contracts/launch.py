"""Launch checks: a compiled ``command.sh`` against the model's contract.

:func:`split_launch` parses ``command.sh`` into its environment, launcher, shim and upstream arguments;
:func:`check_args` parses the arguments with a real ``argparse`` parser holding exactly the recorded flags
(:func:`build_parser`) and :func:`check_env` the exported variables; :func:`overlay_violations` and
:func:`hub_fetch_violations` say why a launch would leave an overlay in the frames or fetch from a hub at run time.
Each failure is a :class:`ContractViolation` naming the fact and its upstream source.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from adapters.contracts.schema import Contract

#: Variables the harness itself sets for every launch (device assignment); not upstream's to define.
HARNESS_ENV = {"CUDA_VISIBLE_DEVICES"}


class ContractViolation(ValueError):
    """A compiled command or shim does not satisfy upstream's contract (the message names the fact and source)."""


def overlay_violations(contract: Contract, args: list[str], env: dict[str, str], writer_shims: set[str]) -> list[str]:
    """Why a launch would leave an overlay in the written frames (empty: none would be).

    An overlay that is on by default must be switched off with upstream's own switch (the flag or variable with
    its ``off`` value), or its ``writer_call`` must be replaced by a shim (``writer_shims``: the functions the
    launch's shim replaces) in a process the shim reaches: not when a flag in ``writer.spawned_with`` moves the
    writer into a spawned worker. An overlay that is off by default must not be switched on."""
    out = []
    spawned = [f for f in contract.writer.spawned_with if f in args]
    for ov in contract.writer.overlays:
        value = None
        if ov.switch and ov.switch.flag and ov.switch.flag in args:
            i = args.index(ov.switch.flag)
            value = args[i + 1] if i + 1 < len(args) else ""
        elif ov.switch and ov.switch.env and ov.switch.env in env:
            value = env[ov.switch.env]
        if ov.default == "off":
            if value is not None and value != ov.switch.off:  # type: ignore[union-attr]
                out.append(f"{ov.name}: {ov.switch.flag or ov.switch.env}={value} turns it on ({ov.source})")  # type: ignore[union-attr]
            continue
        if ov.switch and value == ov.switch.off:
            continue
        if ov.writer_call and ov.writer_call in writer_shims and not spawned:
            continue
        how = (f"set {ov.switch.flag or ov.switch.env} {ov.switch.off}" if ov.switch else
               f"replace {ov.writer_call} with a shim in the process that writes")
        why = f" ({', '.join(spawned)} moves the writer into a spawned worker)" if spawned and ov.writer_call else ""
        out.append(f"{ov.name} ({ov.what}) stays in every frame{why}: {how} ({ov.source})")
    return out


def hub_fetch_violations(contract: Contract, args: list[str]) -> list[str]:
    """Run-time downloads a compiled launch does not avoid by its flags (``avoided_by.flag``). The other kinds
    depend on the machine and are checked by readiness."""
    return [f"{h.repo} ({h.what}) is fetched at run time ({h.source}): the launch must pass {h.avoided_by['flag']}"
            for h in contract.hub_fetches if "flag" in h.avoided_by and h.avoided_by["flag"] not in args]


# -- flags -> a real argparse parser ---------------------------------------------------------------------------


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would print and exit; the tests want the reason
        raise ContractViolation(message)


def _bool_text(values: list[str]) -> Callable[[str], bool]:
    accepted = {v.lower() for v in values}

    def parse(text: str) -> bool:
        if text.lower() not in accepted:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {sorted(accepted)}")
        return text.lower() in {"true", "1", "yes", "on", "y", "t"}

    return parse


def _type(spec: dict[str, Any]) -> Callable[[str], Any]:
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
                 one_of_required: list[list[str]] | None = None) -> argparse.ArgumentParser:
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
        if not s or s.startswith(("#", "set ", "cd ")):
            continue
        if s.startswith("export "):
            k, _, v = s[len("export "):].partition("=")
            env[k] = shlex.split(v)[0] if v else ""
            continue
        body.append(s)
    if len(body) != 1:
        raise ContractViolation(f"command.sh should hold one launch line; found {len(body)}")
    (launch_line,) = body
    return env, shlex.split(launch_line)


@dataclass
class ParsedLaunch:
    """A ``command.sh`` split into its parts: environment, launcher prefix, shim options, upstream arguments."""

    env: dict[str, str]
    launcher: list[str]
    shim: str | None
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
            name = a.partition("=")[0]
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


def _knob_value(launch: ParsedLaunch, knob: str) -> str | None:
    """What ``launch`` gives ``knob``: a flag's value (``""`` for a switch), a variable's value; None when unset."""
    if not knob.startswith("-"):
        return launch.env.get(knob)
    for argv in (launch.args, launch.shim_args):
        if knob in argv:
            i = argv.index(knob)
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            return "" if nxt.startswith("-") and not _number(nxt) else nxt
    return None


def _number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _same(a: str | None, b: str | None) -> bool:
    """Equal as upstream would read them: numbers by value, paths normalised (``./x/`` is ``x``)."""
    import posixpath

    if a is None or b is None:
        return a is b
    if _number(a) and _number(b):
        return float(a) == float(b)
    return posixpath.normpath(a) == posixpath.normpath(b)


def native_violations(contract: Contract, launch: ParsedLaunch) -> list[str]:
    """Why ``launch`` (the compiled ``context=native`` command) is not upstream's documented launch
    (``policies.native``): a memory knob with another value than the documented command gives it (its ``args``,
    else upstream's default), or a shim switch that replaces upstream's memory. Empty: it is upstream's own."""
    if contract.policies is None:
        return [f"{contract.model}: the contract has no policies.native (upstream's documented launch)"]
    native = contract.policies.native
    out = []
    for knob, default in native.knobs.items():
        want = native.args.get(knob, default)
        got = _knob_value(launch, knob)
        got = default if got is None else got
        if not _same(got, want):
            out.append(f"{knob}: the native launch gives {got!r}, upstream's documented launch {want!r} "
                       f"({native.source})")
    out += [f"{flag}: the native launch passes it; it replaces upstream's own memory ({native.source})"
            for flag in native.absent if flag in launch.args or flag in launch.shim_args]
    return out

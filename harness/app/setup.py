"""``python -m harness setup model=NAME``: checkout, environment, weights and readiness of one upstream model.

Everything comes from the model's contract (``adapters/<model>/contract.yaml``):

1. **checkout**: clone ``https://github.com/<repo>`` and check out the pinned commit (fetching it explicitly when
   it is only on a pull-request ref), or verify an existing ``model.upstream_dir`` (a git checkout at that commit);
2. **environment**: a virtual environment with the contract's Python, built by the recipe's ordered steps (torch
   from its index first, requirements files without flash-attn, flash-attn after torch with
   ``--no-build-isolation``, editable installs, forks, upstream's own scripts), then a check that torch is the
   recipe's build (another package's requirement can replace it);
3. **weights**: every listed weight with ``huggingface_hub`` at the contract's revision (``main`` resolved to a
   commit and recorded when the contract pins none), resumable (files already present with the right checksum
   are kept), checksummed against the hub's sha256 (LFS files) or git blob id; a gated repository says how to get
   access (``hf auth login`` / ``huggingface-cli login`` or ``HF_TOKEN``);
4. **readiness**: the adapter's own planning-time checks (:meth:`adapters.upstream.UpstreamAdapter.readiness`) with
   the paths setup used.

``print=true`` prints the exact shell script instead (the same commands, the weights as ``snapshot_download``
calls of the harness's own Python, ``HARNESS_PY``).
Paths the model config leaves unset go under ``setup.root`` (``repos/``, ``envs/``, ``weights/<model>/``); the end
prints the ``conf/local/default.yaml`` block with every path. The hub client is injectable (:class:`Hub`; the real
one is :class:`HfHub`), so tests run offline against local stand-ins.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Protocol

from harness.app.run_config import RunConfig, SetupSettings
from harness.errors import ConfigError, MissingDependencyError, UserError

if TYPE_CHECKING:
    from adapters.base import Finding
    from adapters.contracts import Contract, Weight

STEPS = ("checkout", "environment", "weights", "readiness")
#: steps run only when named: ``check`` is the GPU day-one check (:mod:`harness.app.setup_check`)
EXTRA_STEPS = ("check",)
RECORD = ".harness-weights.json"


class SetupError(UserError):
    """A setup step cannot proceed (the message names what to do); exit code 2."""


# -- the hub ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteFile:
    """A file of a hub repository at a resolved commit: size and checksums as the hub reports them (``sha256``
    for LFS files, ``blob_id`` the git blob sha1 of the others)."""

    path: str
    size: Optional[int] = None
    sha256: Optional[str] = None
    blob_id: Optional[str] = None


class GatedError(SetupError):
    pass


class Hub(Protocol):
    def files(self, repo: str, revision: str) -> tuple[str, list[RemoteFile]]:
        """(resolved commit, every file of the repository at it)."""

    def download(self, repo: str, commit: str, path: str, local_dir: Path) -> Path:
        """Download ``path`` into ``local_dir / path`` (resuming a partial download); the file."""

    def snapshot(self, repo: str, commit: str, patterns: list[str], cache_dir: Path) -> Path:
        """Fill the Hugging Face cache ``cache_dir`` with the matching files; the snapshot folder."""


def gated_message(repo: str, model: str) -> str:
    return (f"{repo} is gated on Hugging Face: request access at https://huggingface.co/{repo}, then log in "
            f"(hf auth login, or huggingface-cli login with older clients) or export HF_TOKEN=<read token>, and rerun "
            f"python -m harness setup model={model}")


class HfHub:
    """:class:`Hub` on ``huggingface_hub`` (``HfApi.model_info`` with file metadata, ``hf_hub_download``,
    ``snapshot_download``)."""

    def __init__(self, endpoint: Optional[str] = None, token: Optional[str] = None, model: str = "?"):
        self.endpoint, self.token, self.model = endpoint, token, model

    def _errors(self, repo: str, exc: Exception) -> Exception:
        # huggingface_hub.utils re-exports these (implicitly) in every version pyproject.toml allows
        from huggingface_hub.utils import (  # type: ignore[attr-defined]
            GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError)

        if isinstance(exc, GatedRepoError):
            return GatedError(gated_message(repo, self.model))
        if isinstance(exc, RevisionNotFoundError):
            return SetupError(f"{repo}: the revision is not on the hub ({exc})")
        if isinstance(exc, RepositoryNotFoundError):
            return GatedError(f"{repo} is not reachable (not found, private or gated). " + gated_message(repo, self.model))
        return exc

    def files(self, repo: str, revision: str) -> tuple[str, list[RemoteFile]]:
        from huggingface_hub import HfApi

        try:
            info = HfApi(endpoint=self.endpoint, token=self.token).model_info(repo, revision=revision,
                                                                                files_metadata=True)
        except Exception as exc:  # translated into what the user does about it
            raise self._errors(repo, exc) from exc
        out = []
        for s in info.siblings or []:
            lfs = getattr(s, "lfs", None)
            sha = (lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)) if lfs else None
            out.append(RemoteFile(s.rfilename, getattr(s, "size", None), sha, None if sha else getattr(s, "blob_id", None)))
        return str(info.sha), out

    def download(self, repo: str, commit: str, path: str, local_dir: Path) -> Path:
        from huggingface_hub import hf_hub_download

        try:
            return Path(hf_hub_download(repo_id=repo, filename=path, revision=commit, local_dir=str(local_dir),
                                        token=self.token, endpoint=self.endpoint))
        except Exception as exc:
            raise self._errors(repo, exc) from exc

    def snapshot(self, repo: str, commit: str, patterns: list[str], cache_dir: Path) -> Path:
        from huggingface_hub import snapshot_download

        try:
            return Path(snapshot_download(repo_id=repo, revision=commit, allow_patterns=patterns,
                                          cache_dir=str(cache_dir), token=self.token, endpoint=self.endpoint))
        except Exception as exc:
            raise self._errors(repo, exc) from exc


def git_blob_sha1(path: Path) -> str:
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def matches(path: str, patterns: tuple[str, ...] | list[str]) -> bool:
    """``fnmatch`` as ``huggingface_hub``'s ``allow_patterns`` (a trailing ``/`` means the folder's files)."""
    from fnmatch import fnmatch

    return any(fnmatch(path, p + "*" if p.endswith("/") else p) or path == p for p in patterns)


# -- the plan ------------------------------------------------------------------------------------------------------


@dataclass
class WeightJob:
    """One weight of the contract with where it goes: ``local_dir`` (the download folder; repository paths land
    under it) and ``patterns``; ``hf_cache`` weights go into the Hugging Face cache; ``checkout`` ones are checked."""

    weight: Any
    local_dir: Optional[Path]
    patterns: list[str]
    revision: str


@dataclass
class SetupPlan:
    model: str
    contract: Any
    config: dict[str, Any]
    root: Path
    checkout: Path
    clone_url: str
    env_dir: Optional[Path]
    python: str
    python_bin: str
    paths: dict[str, str]
    jobs: list[WeightJob]
    forks: dict[str, str]
    optional_steps: bool
    hf_cache: Path
    steps: tuple[str, ...] = STEPS
    notes: list[str] = field(default_factory=list)
    #: the harness's own interpreter (absolute): the harness steps and the weight downloads of the printed script run
    #: under it, never under the model's environment (which has no harness and may pin an old huggingface_hub)
    harness_python: str = sys.executable
    #: the harness's checkout (where ``python -m harness`` finds its package and ``conf/``)
    harness_root: Path = Path(__file__).resolve().parents[2]

    def local_block(self) -> str:
        """The ``conf/local/default.yaml`` block; every value a quoted YAML string (JSON's quoting is YAML's), so a
        path with ``#``, ``: `` or a leading ``*`` reads back as itself."""
        lines = ["# conf/local/default.yaml (git-ignored): the paths setup used", "models:", f"  {self.model}:"]
        lines += [f"    {k}: {json.dumps(str(v))}" for k, v in sorted(self.paths.items())]
        lines.append(f"    python: {json.dumps(str(self.python))}")
        return "\n".join(lines)


def _repo_name(repo: str) -> str:
    return repo.rstrip("/").split("/")[-1]


def _default_root(settings: SetupSettings) -> Path:
    root = settings.root or os.environ.get("WORLDMEM_MODELS") or "~/worldmem-models"
    return Path(os.path.expanduser(str(root))).resolve()


def make_plan(cfg: RunConfig | Mapping[str, Any]) -> SetupPlan:
    """Resolve every path setup uses from the model config (with this machine's local block) and the contract;
    a user error (exit 2) names the key when something cannot work. A plain mapping (API use) is typed first."""
    import dataclasses

    from adapters import contracts

    cfg = RunConfig.coerce(cfg)
    model = cfg.chosen()[0]  # with this machine's local block (merged when the config was read)
    mcfg = dataclasses.asdict(model)
    name = model.name  # a plain name (setup names its folders after it: envs/<name>, ...)
    try:
        contract = contracts.load(name)
    except FileNotFoundError:
        raise ConfigError(f"model={name}: setup is for upstream models with a contract (adapters/<model>/contract.yaml); "
                          f"{name} runs in the harness's own environment") from None
    s = cfg.setup
    steps = tuple(s.steps or STEPS)
    for st in steps:
        if st not in STEPS + EXTRA_STEPS:
            raise ConfigError(f"setup.steps: {st!r} is not a step; use some of {list(STEPS + EXTRA_STEPS)}")
    root = _default_root(s)
    checkout = Path(os.path.expanduser(mcfg.get("upstream_dir") or root / "repos" / _repo_name(contract.repo)))
    env_dir = None if mcfg.get("python") else root / "envs" / name
    python = str(mcfg.get("python") or root / "envs" / name / "bin" / "python")
    version = contract.environment.python
    from adapters.upstream import hf_cache_dir

    hf_cache = hf_cache_dir({**os.environ, **(mcfg.get("env") or {})})
    paths: dict[str, str] = {"upstream_dir": str(checkout)}
    jobs, notes = _weight_jobs(contract, mcfg, s, name, root, checkout, paths)
    for e in contract.checkpoint:  # keys with no weight (a folder the user provides) stay as configured
        if e.key not in paths and mcfg.get(e.key):
            paths[e.key] = str(mcfg[e.key])
    harness_python = str(s.harness_python or sys.executable)
    if not os.path.isabs(harness_python):
        raise ConfigError(f"setup.harness_python={harness_python!r}: give an absolute path (the script changes PATH "
                          "to the model's environment, so a bare name would find the model's Python)")
    return SetupPlan(model=name, contract=contract, config=mcfg, root=root, checkout=checkout,
                     clone_url=s.clone_url or f"https://github.com/{contract.repo}.git", env_dir=env_dir,
                     python=python, python_bin=s.python_bin or (f"python{version}" if version else "python3"),
                     paths=paths, jobs=jobs, forks={str(k): str(v) for k, v in s.forks.items()},
                     optional_steps=bool(s.optional_steps), hf_cache=hf_cache, steps=steps, notes=notes,
                     harness_python=harness_python)


def _weight_jobs(contract: Contract, mcfg: dict[str, Any], s: SetupSettings, name: str, root: Path,
                 checkout: Path, paths: dict[str, str]) -> tuple[list[WeightJob], list[str]]:
    """The downloads of the contract's required weights (those whose ``when`` key is set), and notes on unpinned
    revisions. ``paths`` gains config key -> path: the configured one, else derived from the first weight that
    lands under the key."""
    revisions = dict(s.revisions)  # SetupSettings refuses None (a mapping or nothing)
    jobs: list[WeightJob] = []
    notes: list[str] = []
    for w in contract.weights:
        if w.when and not mcfg.get(w.when):
            continue
        if not w.required:
            continue
        revision = revisions.get(w.name) or w.revision or "main"
        if w.hf_cache:
            jobs.append(WeightJob(w, None, list(w.files), revision))
            continue
        key = str(w.key)
        base = _weight_base(w, key, paths.get(key) or mcfg.get(key), name, root, checkout)
        paths[key] = str(base)
        jobs.append(_weight_job(w, key, base, revision))
        note = (f"{w.repo}: the contract pins no revision; setup resolves main and records the commit in {RECORD} "
                f"(pin it with setup.revisions.<weight>=<commit>)")
        if w.revision is None and w.name not in revisions and w.hub == "huggingface" and note not in notes:
            notes.append(note)
    return jobs, notes


def _weight_base(w: Weight, key: str, configured: Any, name: str, root: Path, checkout: Path) -> Path:
    """Where weight ``w`` lands: the checkout, the configured path, or ``<root>/weights/<model>/...``."""
    if key == "upstream_dir":
        return checkout
    if configured:
        return Path(os.path.expanduser(str(configured)))
    if w.file:
        return root / "weights" / name / w.name / w.file
    if w.prefix:
        return root / "weights" / name / w.name / w.prefix
    return root / "weights" / name / key


def _weight_job(w: Weight, key: str, base: Path, revision: str) -> WeightJob:
    """The download of weight ``w`` to ``base`` (the folder the hub's paths are relative to)."""
    if w.hub == "checkout":
        return WeightJob(w, base, list(w.files), revision)
    if w.file:
        if base.name != Path(w.file).name and not base.exists():
            raise ConfigError(f"model.{key}={base}: setup downloads {w.repo}'s {w.file} as {Path(w.file).name}; "
                              f"leave model.{key} unset or point it at a path ending in {Path(w.file).name}")
        local = base.parent
        for _ in Path(w.file).parent.parts:
            local = local.parent
        return WeightJob(w, local, [w.file], revision)
    if w.prefix:
        parts = Path(w.prefix).parts
        if tuple(base.parts[-len(parts):]) != parts:
            raise ConfigError(f"model.{key}={base}: {w.repo} keeps it in {w.prefix}/; leave model.{key} unset or "
                              f"point it at a folder ending in {w.prefix}")
        return WeightJob(w, Path(*base.parts[:-len(parts)]), list(w.files), revision)
    return WeightJob(w, base / w.into if w.into else base, list(w.files), revision)


# -- shell commands (printed, and run as printed) ------------------------------------------------------------------


def _q(x: Any) -> str:
    return shlex.quote(str(x))


def hydra_value(v: Any) -> str:
    """``v`` as a quoted Hydra override value: commas (a sweep), spaces, ``#``, ``=`` and ``$(`` stay literal (Hydra's
    override grammar: a single-quoted string, ``\\'`` for a quote and backslashes doubled before one)."""
    s = str(v)
    if "${" in s:
        raise ConfigError(f"{s!r}: a path with '${{' would be read by Hydra as an interpolation; use another folder")
    s = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", s)
    return "'" + re.sub(r"(\\+)$", lambda m: m.group(1) * 2, s) + "'"


def checkout_commands(plan: SetupPlan) -> list[str]:
    c = plan.contract
    d = _q(plan.checkout)
    refs = (c.raw.get("provenance") or {}).get("fetch_refs") or []
    # a commit on no branch (only on a pull-request ref) is fetched explicitly; a failed fetch is not fatal, the
    # checkout below says whether the commit arrived
    out = [f"test -d {d}/.git || git clone --no-checkout {_q(plan.clone_url)} {d}",
           f"git -C {d} cat-file -e {c.commit}^{{commit}} 2>/dev/null || git -C {d} fetch origin {c.commit} || true"]
    out += [f"git -C {d} cat-file -e {c.commit}^{{commit}} 2>/dev/null || git -C {d} fetch origin {_q(r)} || true"
            for r in refs]
    out.append(f"git -C {d} checkout --detach {c.commit}")
    return out


def _torch_line(spec: Any) -> str:
    pkgs = [f"torch=={spec.version}" if spec.version else "torch"]
    pkgs += [f"{k}=={v}" if v else k for k, v in spec.companions.items()]
    idx = f" --index-url {_q(spec.index_url)}" if spec.index_url else ""
    return "install " + " ".join(_q(p) for p in pkgs) + idx


def fork_spec(plan: SetupPlan, fork: Any) -> Optional[str]:
    if fork.package in plan.forks:
        return plan.forks[fork.package]
    if fork.url:
        return f"git+{fork.url}" + (f"@{fork.ref}" if fork.ref and not re.fullmatch(r"\d[\w.]*", fork.ref) else "")
    return None


def environment_commands(plan: SetupPlan) -> list[tuple[str, str]]:
    """(comment, command) of every environment step, run with the environment's bin first on PATH."""
    env = plan.contract.environment
    pip = f"{_q(plan.python)} -m pip"
    out: list[tuple[str, str]] = []
    if plan.env_dir is not None:
        src = plan.contract.raw.get("environment", {}).get("python_source", "")
        out.append((f"a virtual environment with Python {env.python or '3'}" + (f" ({src})" if src else ""),
                    f"test -x {_q(plan.python)} || {_q(plan.python_bin)} -m venv {_q(plan.env_dir)}"))
    forks = {f.package: f for f in env.forks}
    for i, st in enumerate(env.steps):
        why = f"step {i + 1}: {st.source}"
        if st.optional and not plan.optional_steps:
            out.append((f"{why} (optional, skipped: {st.note or 'setup.optional_steps=true runs it'})", ":"))
            continue
        cd = f"cd {_q(plan.checkout / st.cwd)} && "
        pre: list[tuple[str, str]] = []
        if st.torch:
            cmd = f"{pip} {_torch_line(env.torch)}"
        elif st.pip:
            cmd = f"{pip} install {st.pip}"
            pre = flash_attn_preflight(plan, st.pip)
            if pre and pre[0][1] == "":  # a version with wheels for the recipe's torch, where upstream leaves it open
                cmd = f"{pip} install {pre[0][0]}"
                pre = []
        elif st.requirements:
            filtered = plan.env_dir / f"requirements-step{i + 1}.txt" if plan.env_dir else Path(f"/tmp/requirements-step{i + 1}.txt")
            drop = "|".join(re.escape(x) for x in st.exclude)
            req = _q(st.requirements)
            # a missing file stops the script with its name (grep would only print an error, and `|| true` hid it)
            where = f"{plan.checkout / st.cwd / st.requirements} (step {i + 1}: {st.source})"
            check = f"{{ test -f {req} || {{ echo {_q('setup: missing requirements file ' + where)} >&2; exit 1; }}; }} && "
            cmd = check + (f"{{ grep -viE '^[[:space:]]*({drop})([^A-Za-z0-9_.-]|$)' {req} || test $? -eq 1; }} > "
                           f"{_q(filtered)} && {pip} install -r {_q(filtered)}" if st.exclude else
                           f"{pip} install -r {req}")
        elif st.editable:
            cmd = f"{pip} install{' --no-deps' if st.no_deps else ''} -e {_q(plan.checkout / st.editable)}"
        elif st.fork:
            spec = fork_spec(plan, forks[st.fork])
            target = _q(spec) if spec else f'"${{HARNESS_FORK_{st.fork.upper()}:?{st.fork}: upstream names no source for it ({forks[st.fork].source}); give setup.forks.{st.fork}=<pip spec or path>}}"'
            cmd = f"{pip} install{' --no-deps' if st.no_deps else ''} {target}"
        else:
            cmd = str(st.run)
            pre = [x for x in flash_attn_preflight(plan, " ".join(st.builds)) if x[1]]  # upstream picks the version
        out += pre
        # each step in a subshell: its cd does not move the steps after it (nor the harness's last line)
        out.append((why + (f"; {st.note}" if st.note and len(st.note) < 160 else ""), f"( {cd}{cmd} )"))
    t = env.torch
    cuda = re.search(r"/cu(\d+)(\d)$", t.index_url or "")
    checks = []
    if t.version:
        checks.append(f'torch.__version__.split("+")[0] == "{t.version}"')
    if cuda:
        checks.append(f'torch.version.cuda == "{cuda.group(1)}.{cuda.group(2)}"')
    if checks:
        code = ("import sys, torch; ok = " + " and ".join(checks) + "; print(torch.__version__, torch.version.cuda); "
                'sys.exit(0 if ok else "torch is not the recipe build (another requirement replaced it): reinstall it")')
        out.append((f"torch is still the recipe's build ({t.source})", f"{_q(plan.python)} -c {_q(code)}"))
    return out


#: torch minor versions flash-attn 2.8.3 ships prebuilt wheels for (its setup.py downloads one instead of compiling);
#: none for torch 2.9 or 2.10 (Dao-AILab/flash-attention#1967 "Prebuilt wheels for PyTorch 2.9", open; #2299 "no
#: official pre-built wheel for PyTorch 2.10")
FLASH_ATTN_WHEEL_VERSION = "2.8.3"
FLASH_ATTN_WHEEL_TORCH = ("2.4", "2.5", "2.6", "2.7", "2.8")
_FLASH = re.compile(r"(?<![\w.-])'?flash[-_]attn([<>=!~][^\s']*)?'?(?=\s|$)")


def flash_attn_preflight(plan: SetupPlan, pip_args: str) -> list[tuple[str, str]]:
    """What to do before a ``pip install`` step that installs flash-attn.

    Upstream leaves the version open and flash-attn has wheels for the recipe's torch: ``[(new pip args, "")]`` (the
    wheel's version, pinned). No wheel for the recipe's torch (or its version is unknown): the (comment, command) lines
    that say, before the build starts, that pip compiles it (tens of minutes to hours) and needs nvcc and ninja,
    and that stop when nvcc is missing (pip would fail after minutes of work). Else nothing."""
    m = _FLASH.search(pip_args)
    if not m:
        return []
    tv = plan.contract.environment.torch.version
    minor = ".".join(str(tv).split(".")[:2]) if tv else None
    if minor in FLASH_ATTN_WHEEL_TORCH:
        if m.group(1) is None:  # unpinned upstream: the version with a wheel for this torch
            return [(pip_args[:m.start()] + f"flash-attn=={FLASH_ATTN_WHEEL_VERSION}" + pip_args[m.end():], "")]
        return []
    why = (f"flash-attn has no prebuilt wheel for torch {tv or '(unpinned)'} (flash-attn {FLASH_ATTN_WHEEL_VERSION} "
           f"ships them for torch {FLASH_ATTN_WHEEL_TORCH[0]}-{FLASH_ATTN_WHEEL_TORCH[-1]}; Dao-AILab/flash-attention"
           "#1967, #2299), so pip compiles it: about 30 min to 2 h, needs nvcc (the CUDA toolkit of torch's CUDA) and "
           "ninja; MAX_JOBS limits its memory (about 4 GB a job)")
    pip = f"{_q(plan.python)} -m pip"
    no_nvcc = _q("setup: nvcc not found: install the CUDA toolkit (nvcc) before flash-attn is compiled, or put it on PATH")
    return [(why, f"echo {_q('setup: ' + why)} >&2"),
            ("nvcc must be on PATH before the build starts",
             f"command -v nvcc >/dev/null || {{ echo {no_nvcc} >&2; exit 1; }}"),
            ("ninja makes the build parallel (without it, hours)", f"{pip} install ninja")]


def _download_code(repo: str, revision: str, patterns: list[str], **where: str) -> str:
    args = ", ".join(f"{k}={json.dumps(v)}" for k, v in where.items())
    rev = f", revision={json.dumps(revision)}" if revision != "main" else ""
    return (f"from huggingface_hub import snapshot_download; snapshot_download(repo_id={json.dumps(repo)}{rev}, "
            f"allow_patterns={json.dumps(patterns)}, {args})")


def weight_commands(plan: SetupPlan) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for job in plan.jobs:
        w = job.weight
        gate = f"; gated: {gated_message(w.repo, plan.model)}" if w.gated else ""
        size = f"; about {w.size_gb:g} GB" if w.size_gb else ""
        hub_only = [n for e in plan.contract.checkpoint if e.key == w.key for n in e.hub_confirmed]
        only = f"; {', '.join(hub_only)}: a name only the hub confirms, checked after the download" if hub_only else ""
        why = f"{w.name}: {w.repo} ({w.source}){size}{gate}{only}"
        if w.hub == "checkout":
            assert job.local_dir is not None  # a checkout weight is checked in its folder (never the hub cache)
            local_dir = job.local_dir
            out.append((why, " && ".join(f"test -e {_q(local_dir / f)}" for f in job.patterns)))
        elif w.hub == "modelscope":
            code = (f"from modelscope import snapshot_download; snapshot_download({json.dumps(w.repo)}, "
                    f"local_dir={json.dumps(str(job.local_dir))}, allow_patterns={json.dumps(job.patterns)})")
            out.append((why + " (ModelScope, from the model's environment)", f"{_q(plan.python)} -c {_q(code)}"))
        elif w.hf_cache:  # huggingface_hub of the harness's Python (the model's may predate `hf` or lack it)
            code = _download_code(w.repo, job.revision, job.patterns, cache_dir=str(plan.hf_cache))
            out.append((why + " (into the Hugging Face cache: upstream reads it there with HF_HUB_OFFLINE=1)",
                        f'"$HARNESS_PY" -c {_q(code)}'))
        else:
            code = _download_code(w.repo, job.revision, job.patterns, local_dir=str(job.local_dir))
            out.append((why, f'"$HARNESS_PY" -c {_q(code)}'))
    return out


def _contract_label(model: str) -> str:
    """Where the model's contract is, for the script's comments: ``adapters/<model>/contract.yaml`` for a model of
    this repository, else the file of the out-of-tree package (one line)."""
    from adapters import contracts

    path = contracts.contract_path(model)
    if path == contracts.loader.ADAPTERS_DIR / model / contracts.CONTRACT_FILE:
        return f"adapters/{model}/{contracts.CONTRACT_FILE}"
    return " ".join(str(path).splitlines())


def script(plan: SetupPlan) -> str:
    """The whole setup as a bash script (``print=true``)."""
    c = plan.contract
    lines = ["#!/usr/bin/env bash",
             f"# python -m harness setup model={plan.model}: {c.repo}@{c.commit[:12]} "
             f"({_contract_label(plan.model)})", "set -euo pipefail",
             "# the harness's own Python: its steps and the weight downloads run under it, not the model's",
             f"HARNESS_PY={_q(plan.harness_python)}"]
    if "weights" in plan.steps or "readiness" in plan.steps:  # both end in the harness's weights step: say it now
        need = _q(f"setup: huggingface_hub is missing from the harness Python ({plan.harness_python}), and the "
                  "weights step needs it: pip install -e \".[eval]\" there first (nothing was done)")
        lines.append(f"\"$HARNESS_PY\" -c 'import huggingface_hub' 2>/dev/null || {{ echo {need} >&2; exit 2; }}")
    if "checkout" in plan.steps:
        lines += ["", f"# -- checkout at the pinned commit ({c.commit})", *checkout_commands(plan)]
    if "environment" in plan.steps:
        lines += ["", f"# -- environment: the recipe of {_contract_label(plan.model)}, in order"]
        if plan.env_dir is not None:
            lines.append(f"export VIRTUAL_ENV={_q(plan.env_dir)} PATH={_q(plan.env_dir / 'bin')}:\"$PATH\"")
        for why, cmd in environment_commands(plan):
            lines += [f"# {why}", cmd]
    if "weights" in plan.steps:
        lines += ["", "# -- weights (the harness's huggingface_hub: resumable; checksums verified by the harness below)"]
        for note in plan.notes:
            lines.append(f"# note: {note}")
        for why, cmd in weight_commands(plan):
            lines += [f"# {why}", cmd]
    if "readiness" in plan.steps or "weights" in plan.steps:
        lines += ["", "# -- checksums and the planning-time checks, with these paths (conf/local/default.yaml):"]
        lines += [f"#   {x}" for x in plan.local_block().splitlines()]
        over = " ".join(_q(f"++local.models.{plan.model}.{k}={hydra_value(v)}") for k, v in
                        sorted({**plan.paths, "python": plan.python}.items()))
        lines.append(f"( cd {_q(plan.harness_root)} && \"$HARNESS_PY\" -m harness setup model={plan.model} "
                     f"'setup.steps=[weights,readiness]' {over} )")
    lines += _day_one_lines(plan)
    return "\n".join(lines) + "\n"


def _day_one_lines(plan: SetupPlan) -> list[str]:
    """The day-one check (:mod:`harness.app.setup_check`): run when ``setup.steps`` names ``check``, else printed as
    the command to run on the GPU node (it stops at its first GPU step where there is none)."""
    over = " ".join(_q(f"++local.models.{plan.model}.{k}={hydra_value(v)}") for k, v in
                    sorted({**plan.paths, "python": plan.python}.items()))
    cmd = (f"( cd {_q(plan.harness_root)} && \"$HARNESS_PY\" -m harness setup model={plan.model} "
           f"'setup.steps=[check]' {over} )")
    head = ["", "# -- day one on the GPU node: files, weights' sizes and hashes, imports, CUDA, one tiny generation "
                "(docs/real-models.md); without a GPU it stops at the cuda step and says so"]
    return head + [cmd if "check" in plan.steps else f"# {cmd}"]


# -- running ---------------------------------------------------------------------------------------------------


def _run_shell(cmd: str, plan: SetupPlan, log: Callable[[str], None]) -> None:
    env = dict(os.environ)
    if plan.env_dir is not None:
        env.update(VIRTUAL_ENV=str(plan.env_dir), PATH=f"{plan.env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    log(f"$ {cmd}")
    r = subprocess.run(["bash", "-c", f"set -euo pipefail; {cmd}"], env=env, text=True, capture_output=True)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip()[-1500:]
        raise SetupError(f"setup of {plan.model} stopped at: {cmd}\n{tail}")


def run_checkout(plan: SetupPlan, log: Callable[[str], None]) -> None:
    c = plan.contract
    d = plan.checkout
    if d.exists() and any(d.iterdir()) and not (d / ".git").exists():
        raise SetupError(f"model.upstream_dir={d} exists and is not a git checkout of {c.repo}; point it at one or "
                         "at an empty folder")
    if (d / ".git").exists() and plan.config.get("upstream_dir"):  # the user's own checkout: verified, not moved
        head = subprocess.run(["git", "-C", str(d), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        if head != c.commit:
            raise SetupError(f"model.upstream_dir={d} is at {head[:12] or '(no commit)'}, the contract was read at "
                             f"{c.commit[:12]}: git -C {d} checkout {c.commit} (setup does not move your checkout)")
        log(f"checkout {d} is at {c.commit[:12]}")
        return
    for cmd in checkout_commands(plan):
        _run_shell(cmd, plan, log)


def run_environment(plan: SetupPlan, log: Callable[[str], None]) -> None:
    env = plan.contract.environment
    for st in env.steps:
        if st.fork and not (st.optional and not plan.optional_steps):
            fork = next(f for f in env.forks if f.package == st.fork)
            if fork_spec(plan, fork) is None:
                raise SetupError(f"{plan.model} needs {fork.package} {fork.ref or ''} from a fork that upstream names "
                                 f"no source for ({fork.source}): give setup.forks.{fork.package}=<pip spec or path>")
    if plan.env_dir is None and not Path(plan.python).exists():
        raise SetupError(f"model.python={plan.python} does not exist; unset it to let setup create the environment")
    for _, cmd in environment_commands(plan):
        _run_shell(cmd, plan, log)


def _read_record(d: Path) -> dict[str, Any]:
    try:
        record = json.loads((d / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _verify(path: Path, rf: RemoteFile) -> Optional[str]:
    """None when ``path`` matches the hub's checksum (or size when the hub gives no checksum), else the problem."""
    if not path.is_file():
        return "missing"
    if rf.size is not None and path.stat().st_size != rf.size:
        return f"size {path.stat().st_size}, the hub says {rf.size}"
    if rf.sha256:
        got = sha256(path)
        return None if got == rf.sha256 else f"sha256 {got[:12]}, the hub says {rf.sha256[:12]}"
    if rf.blob_id:
        got = git_blob_sha1(path)
        return None if got == rf.blob_id else f"git blob {got[:12]}, the hub says {rf.blob_id[:12]}"
    return None


def fetch_weight(plan: SetupPlan, job: WeightJob, hub: Hub, log: Callable[[str], None]) -> dict[str, Any]:
    """Download one weight (resumable, checksummed); returns what was recorded."""
    w = job.weight
    if w.hub == "checkout":
        missing = [p for p in job.patterns if not (job.local_dir / p).exists()]  # type: ignore[operator]
        if missing:
            raise SetupError(f"{w.name}: the checkout {plan.checkout} lacks {', '.join(missing)} ({w.source})")
        return {}
    if w.hub == "modelscope":
        for _, cmd in [c for c in weight_commands(plan) if w.repo in c[1]]:
            _run_shell(cmd, plan, log)
        return {}
    commit, remote = hub.files(w.repo, job.revision)
    wanted = [rf for rf in remote if matches(rf.path, job.patterns)]
    check_hub_names(plan, job, commit, [rf.path for rf in remote], "on the hub")
    if not wanted:
        raise SetupError(f"{w.name}: nothing in {w.repo}@{commit[:12]} matches {job.patterns} ({w.source})")
    if w.hf_cache:
        snap = hub.snapshot(w.repo, commit, job.patterns, plan.hf_cache)
        bad = [f"{rf.path}: {p}" for rf in wanted if (p := _verify(Path(snap) / rf.path, rf))]
        if bad:
            raise SetupError(f"{w.repo}: checksum mismatch in the cache: {'; '.join(bad)}")
        log(f"{w.repo}@{commit[:12]} in the Hugging Face cache {plan.hf_cache} ({len(wanted)} files, checked)")
        return {"repo": w.repo, "commit": commit}
    d = Path(job.local_dir)  # type: ignore[arg-type]
    d.mkdir(parents=True, exist_ok=True)
    record = _read_record(d)
    done = record.setdefault("files", {})  # "<repo>@<commit>/<path>" -> the checksum it was verified against
    for rf in wanted:
        target = d / rf.path
        key, check = f"{w.repo}@{commit}/{rf.path}", rf.sha256 or rf.blob_id or str(rf.size)
        if done.get(key) == check and target.is_file() and (rf.size is None or target.stat().st_size == rf.size):
            continue  # downloaded and checked by an earlier setup
        if _verify(target, rf) is not None:
            hub.download(w.repo, commit, rf.path, d)
            problem = _verify(target, rf)
            if problem:
                target.unlink(missing_ok=True)
                raise SetupError(f"{w.repo}/{rf.path}: {problem} after download; removed, rerun setup")
        done[key] = check
        from harness.io import write_text

        write_text(d / RECORD, json.dumps(record, indent=1, sort_keys=True))  # per file: a killed setup resumes
    check_hub_names(plan, job, commit, [str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()], f"in {d}")
    log(f"{w.name}: {w.repo}@{commit[:12]} -> {d} ({len(wanted)} files, checksums ok)")
    return {"repo": w.repo, "commit": commit}


def _holds_name(paths: list[str], name: str) -> bool:
    return any(name in p.split("/") for p in paths)


def check_hub_names(plan: SetupPlan, job: WeightJob, commit: str, paths: list[str], where: str) -> None:
    """The file names of the weight's config key that only the hub can confirm (the contract's
    ``checkpoint[].hub_confirmed``: upstream's code does not name them at the pin) are among ``paths`` (the hub's
    files of the repository, then the downloaded ones), else a :class:`SetupError` that names each, says why only
    the hub could confirm it and lists what the repository holds."""
    w = job.weight
    for e in (e for e in plan.contract.checkpoint if e.key == w.key):
        for name in e.hub_confirmed:
            if _holds_name(paths, name):
                continue
            held = ", ".join(sorted(paths)[:20]) or "nothing"
            raise SetupError(
                f"{w.name}: no {name!r} {where} ({w.repo}@{commit[:12]}). The contract expects it under model.{e.key} "
                f"({e.source}), but upstream's code does not name it at {plan.contract.commit[:12]}, so only the hub "
                f"could confirm the name. The repository holds: {held}. Point model.{e.key} at the right file, and "
                f"correct checkpoint[{e.key}].hub_confirmed and weights[{w.name}] in {_contract_label(plan.model)}")


def run_weights(plan: SetupPlan, hub: Hub, log: Callable[[str], None]) -> None:
    for note in plan.notes:
        log(f"note: {note}")
    for job in plan.jobs:
        fetch_weight(plan, job, hub, log)


def run_readiness(plan: SetupPlan, log: Callable[[str], None]) -> list[Finding]:
    from adapters.base import build_adapter

    cfg = {**plan.config, **plan.paths, "python": plan.python}
    adapter = build_adapter(cfg)
    findings: list[Finding] = adapter.readiness(probe=True)
    for f in findings:
        log(f"readiness {f.level}: {f}")
    errors = [f for f in findings if f.level == "error"]
    if errors:
        raise SetupError(f"{plan.model} is set up but not ready:\n" + "\n".join(f"  - {e}" for e in errors))
    return findings


def run_setup(cfg: RunConfig | Mapping[str, Any], hub: Optional[Hub] = None,
              log: Callable[[str], None] = print) -> SetupPlan:
    """Run the steps of ``setup.steps`` for ``cfg``'s model (or print the script with ``print=true``)."""
    cfg = RunConfig.coerce(cfg)
    plan = make_plan(cfg)
    if cfg.print_script:
        sys.stdout.write(script(plan))
        return plan
    if "weights" in plan.steps and hub is None:
        try:
            import huggingface_hub  # noqa: F401
        except ImportError:
            # huggingface_hub comes with the `eval` extra (pyproject.toml); MissingDependencyError words the rest
            raise MissingDependencyError(f"setup model={plan.model} (its weights step)", extra="eval",
                                         detail="huggingface_hub; print=true prints the script instead") from None
        endpoint = cfg.setup.endpoint or os.environ.get("HF_ENDPOINT")
        hub = HfHub(endpoint=endpoint, token=os.environ.get("HF_TOKEN"), model=plan.model)
    if "checkout" in plan.steps:
        run_checkout(plan, log)
    if "environment" in plan.steps:
        run_environment(plan, log)
    if "weights" in plan.steps:
        run_weights(plan, hub, log)  # type: ignore[arg-type]
    if "readiness" in plan.steps:
        run_readiness(plan, log)
        log(f"{plan.model} is ready")
    if "check" in plan.steps:
        from harness.app.setup_check import run_check

        check_dir = cfg.setup.check_dir
        run_check(plan, log, Path(os.path.expanduser(check_dir)) if check_dir else None)
    log(plan.local_block())
    return plan

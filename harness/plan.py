"""Planning: work items = cases x trajectories x seed x context, filtered by what each case lists.

An item's seed is the configured seed (the model's frozen default unless ``seed=`` overrides it): it never
depends on process rank, order or time. Item output paths are deterministic, so reruns find their work.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from .cases import Case, CaseError, load_case_set

SEED_MAX = 2**32  # seeds are integers in [0, 2^32): what every upstream RNG (numpy, torch) accepts
_RUN_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.,=+-]*$")


class PlanError(ValueError):
    """A top-level setting (``run``, ``seed``, ``output_root``, ...) is invalid; the message names it and the fix."""


def check_seed(value: Any, field_name: str = "seed") -> int:
    """An integer in [0, 2^32); floats, booleans and strings are refused, never coerced."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanError(f"{field_name}={value!r}: must be an integer in [0, 2^32) (e.g. {field_name}=0)")
    if not 0 <= value < SEED_MAX:
        raise PlanError(f"{field_name}={value}: must be in [0, 2^32 - 1 = {SEED_MAX - 1}]")
    return value


def check_run_name(run: Any) -> str:
    """``run`` is one or more plain path parts (``study/v2``): letters, digits and ``_.,=+-``, no ``..``, no
    absolute path, so every output stays under ``output_root``."""
    s = str(run)
    parts = s.split("/")
    if not s or s.startswith("/") or any(p in ("", ".", "..") or not _RUN_PART.match(p) for p in parts):
        raise PlanError(f"run={s!r}: use a plain name such as run=study_v2 (letters, digits, _ . , = + -; "
                        "'/' between parts; no '..' and no absolute path)")
    return s


def run_dir_for(output_root: Any, run: Any) -> Path:
    """``<output_root>/<run>`` resolved; refuses a run name that would leave ``output_root``."""
    root = Path(str(output_root)).expanduser().resolve()
    d = (root / check_run_name(run)).resolve()
    if not d.is_relative_to(root):
        raise PlanError(f"run={run!r} resolves to {d}, outside output_root={root}")
    return d


NAME_MAX, PATH_MAX = 255, 4096
_LONGEST_FILE = ".context_trace.json.xxxxxxxx.json"  # the longest name written in an item folder (a temp file)


def check_writable(run_dir: Path, items: Sequence["WorkItem"]) -> None:
    """Refuse up front (nothing written) a run directory that cannot be created or whose item paths are too long."""
    import os

    longest = max((run_dir / i.rel_dir / "controls" / _LONGEST_FILE for i in items), key=lambda p: len(str(p)),
                  default=run_dir / _LONGEST_FILE)
    part = max(longest.parts, key=len)
    if len(part.encode()) > NAME_MAX or len(str(longest).encode()) >= PATH_MAX:
        raise PlanError(f"output path too long ({len(str(longest))} characters, longest part {len(part)}): "
                        f"{longest}; use a shorter output_root, run name or case id")
    probe = run_dir
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise PlanError(f"output_root: cannot write under {probe} (read-only or no permission); "
                        "set output_root=<a writable folder>")


def contained(base: Path, rel: str | Path, what: str) -> Path:
    """``base / rel`` resolved, refused unless it stays inside ``base`` (for paths read from files)."""
    base = Path(base).resolve()
    p = (base / rel).resolve()
    if not p.is_relative_to(base):
        raise PlanError(f"{what}={str(rel)!r} points outside {base}; it must be a path inside it")
    return p


@dataclass(frozen=True, order=True)
class WorkItem:
    """One rollout: ``model`` under ``context`` with ``seed`` on ``trajectory`` for ``case_id``."""

    model: str
    context: str
    seed: int
    trajectory: str
    case_id: str

    @property
    def rel_dir(self) -> Path:
        """``<model>/<context>/seed-<seed>/<trajectory>/<case>``, relative to the run directory."""
        return Path(self.model) / self.context / f"seed-{self.seed}" / self.trajectory / self.case_id

    @property
    def key(self) -> str:
        return str(self.rel_dir.as_posix())

    def to_dict(self) -> dict:
        return asdict(self)


def parse_shard(shard: str) -> tuple[int, int]:
    """``"i/n"`` -> (i, n) with 0 <= i < n."""
    try:
        i, n = (int(x) for x in str(shard).split("/"))
    except ValueError:
        raise PlanError(f"shard={shard!r}: use 'i/n', e.g. 0/4") from None
    if not (n >= 1 and 0 <= i < n):
        raise PlanError(f"shard={shard!r}: need n >= 1 and 0 <= i < n")
    return i, n


def make_plan(
    model: str,
    context: str,
    seed: int,
    trajectories: Sequence[str],
    cases: Sequence[Case],
    shard: str = "0/1",
) -> list[WorkItem]:
    """All items in a stable order (trajectory, case id), then every n-th for shard ``i/n``."""
    items = sorted(
        WorkItem(model, context, int(seed), t, c.id) for t in trajectories for c in cases if t in c.trajectories
    )
    i, n = parse_shard(shard)
    return items[i::n]


@dataclass
class Plan:
    """Everything a run needs, validated before anything is written.

    adapter: the model adapter (no weights loaded). policy: the KV-context policy. specs: trajectory name ->
    TrajectorySpec. cases: the selected cases (sorted by id). items: this shard's work items, in plan order.
    run_dir: the resolved run directory. all_items: the items of every shard (to know when the run is complete).
    Unpacks as the historical 6-tuple ``(adapter, policy, specs, cases, items, run_dir)``.
    """

    adapter: Any
    policy: Any
    specs: dict[str, Any]
    cases: list[Case]
    items: list[WorkItem]
    run_dir: Path
    all_items: list[WorkItem] = field(default_factory=list)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.adapter, self.policy, self.specs, self.cases, self.items, self.run_dir))


def load_cases_from_config(cases_cfg: dict[str, Any]) -> list[Case]:
    """The case set named by the ``cases`` config group, filtered by ``include`` / ``families``."""
    cases = load_case_set(cases_cfg["source"])
    include = cases_cfg.get("include")
    if include:
        known = {c.id for c in cases}
        missing = [i for i in include if i not in known]
        if missing:
            raise CaseError(f"cases.include: unknown case id(s) {missing}; known: {sorted(known)}")
        cases = [c for c in cases if c.id in include]
    fams = cases_cfg.get("families")
    if fams:
        cases = [c for c in cases if c.family in fams]
    return cases


def check_trajectories(adapter: Any, specs: dict[str, Any], cases: Sequence[Case], items: Sequence[WorkItem]) -> None:
    """Build every item's camera path up front (cheap) so impossible parameters fail before anything is written."""
    from trajectories import TrajectoryError

    by_id = {c.id: c for c in cases}
    seen = set()
    for item in items:
        if (item.trajectory, item.case_id) in seen:
            continue
        seen.add((item.trajectory, item.case_id))
        K = adapter.canvas_K(by_id[item.case_id])  # the image's size only: no canvas is resized here
        try:
            adapter.path_for(specs[item.trajectory], K, item.trajectory)  # one build per distinct K (cached)
        except TrajectoryError as exc:
            raise TrajectoryError(f"{exc} (trajectory {item.trajectory!r}, case {item.case_id!r})") from None


def resolve_context(ctx: dict[str, Any], adapter: Any):
    """The :class:`ContextPolicy` of a ``context`` config; ``paper`` becomes the model's main-table policy."""
    from .context import ContextPolicy
    from .registry import group_yaml

    if ctx.get("name") == "paper":  # the model's own main-table setting (paper appendix C)
        ctx = group_yaml("context", adapter.config.paper_context)
    return ContextPolicy.from_dict(ctx)


def plan_from_config(cfg: dict[str, Any], for_writing: bool = True) -> Plan:
    """Validate the config and build the plan; nothing is written. Errors name the setting and the fix.
    ``for_writing=False`` (reading a finished run, e.g. ``verify``) skips the writability check."""
    from trajectories import TrajectorySpec

    from .registry import build_adapter, check_choice, group_yaml, model_config_with_local

    run_dir = run_dir_for(cfg.get("output_root", "outputs"), cfg.get("run", "default"))
    seed = cfg.get("seed")
    if seed is not None:
        check_seed(seed)
    adapter = build_adapter(model_config_with_local(cfg))
    check_seed(adapter.config.seed, "model.seed")
    policy = resolve_context(cfg["context"], adapter)
    adapter.check_context(policy)  # unsupported pairs fail here, before any weights load
    names = cfg.get("trajectories") or [cfg["trajectory"]["name"]]
    specs = {}
    for name in names:
        if name == cfg["trajectory"]["name"]:
            specs[name] = TrajectorySpec.from_dict(cfg["trajectory"])
        else:
            check_choice("trajectory", name)
            specs[name] = TrajectorySpec.from_dict(group_yaml("trajectory", name))
    mc = adapter.config
    if mc.height % 2 or mc.width % 2:
        from adapters.base import ModelConfigError

        raise ModelConfigError(f"model.height/model.width = {mc.height}x{mc.width}: both must be even "
                               f"(H.264 4:2:0 video); e.g. model.height={mc.height + mc.height % 2}")
    cases = load_cases_from_config(cfg["cases"])
    seed = adapter.config.seed if seed is None else seed
    all_items = make_plan(adapter.config.name, policy.name, seed, list(specs), cases, "0/1")
    items = make_plan(adapter.config.name, policy.name, seed, list(specs), cases, cfg.get("shard", "0/1"))
    check_trajectories(adapter, specs, cases, items)
    if for_writing:
        check_writable(run_dir, all_items)
    return Plan(adapter, policy, specs, cases, items, run_dir, all_items)

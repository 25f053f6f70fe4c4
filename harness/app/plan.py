"""Planning: work items = cases x trajectories x seed x context, filtered by what each case lists.

An item's seed is the configured seed (the model's frozen default unless ``seed=`` overrides it): it never
depends on process rank, order or time. Item output paths are deterministic, so reruns find their work.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from harness.app.run_config import RunConfig, paper_resolved, parse_shard
from harness.cases import Case, load_cases_from_config
from harness.outputs import PlanError, RunDir, WorkItem, check_name, check_seed, check_writable, run_dir_for
from harness.secrets import RedactedConfig

if TYPE_CHECKING:
    from adapters.base import Adapter
    from harness.context import ContextPolicy
    from harness.gpu_pool import GPUPool
    from trajectories import TrajectorySpec

__all__ = ["Case", "Plan", "PlanError", "RunDir", "WorkItem", "check_name", "check_seed", "check_writable",
           "load_cases_from_config", "make_plan", "parse_shard", "plan_from_config", "resolve_context",
           "run_dir_for"]

def make_plan(
    model: str,
    context: str,
    seed: int,
    trajectories: Mapping[str, TrajectorySpec],
    cases: Sequence[Case],
    shard: str = "0/1",
) -> list[WorkItem]:
    """All items (each trajectory, name -> spec, on the cases that run it: :meth:`Case.runs_on`) in a stable order
    (trajectory, case id), then every n-th for shard ``i/n``."""
    items = sorted(
        WorkItem(model, context, int(seed), t, c.id) for t, spec in trajectories.items() for c in cases
        if c.runs_on(t, spec)
    )
    i, n = parse_shard(shard)
    return items[i::n]


@dataclass
class Plan:
    """Everything a run needs, validated before anything is written.

    adapter: the model adapter (no weights loaded). policy: the KV-context policy. specs: trajectory name ->
    TrajectorySpec. cases: the selected cases (sorted by id). items: this shard's work items, in plan order.
    run_dir: the resolved run directory. all_items: the items of every shard (to know when the run is complete).
    config: the typed run configuration the plan was made from (what each item records, the GPU pool's settings).
    recorded: the configuration as the run writes it (secrets redacted once: ``config.yaml``, every ``meta.json``).
    pool: the GPU pool this run's upstream jobs draw from (None: no GPU job, or no GPU set or visible), set when the
    run is prepared (:func:`harness.app.commands.run.prepare_run`), which refuses a job bigger than the pool.
    """

    adapter: Adapter
    policy: ContextPolicy
    specs: dict[str, TrajectorySpec]
    cases: list[Case]
    items: list[WorkItem]
    run_dir: Path
    all_items: list[WorkItem]
    config: RunConfig
    recorded: RedactedConfig
    pool: Optional[GPUPool] = None

    @functools.cached_property
    def case_by_id(self) -> dict[str, Case]:
        """``cases`` by id (built once per plan)."""
        return {c.id: c for c in self.cases}

    @property
    def run(self) -> RunDir:
        return RunDir(self.run_dir)


def check_trajectories(adapter: Adapter, specs: dict[str, TrajectorySpec], cases: Sequence[Case],
                       items: Sequence[WorkItem]) -> None:
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


def check_compile(adapter: Adapter, policy: ContextPolicy, specs: dict[str, TrajectorySpec], cases: Sequence[Case],
                  items: Sequence[WorkItem]) -> None:
    """Compile the first item of each trajectory into a scratch folder (deleted at once), so a setting the model's
    native format refuses (a frame count it would time-warp, a size it cannot take) fails at planning, not item by
    item after the run has started writing. Only user errors stop the plan; anything else is left to the run,
    which records it as that item's failure."""
    from adapters.base import ItemRequest

    from harness.errors import UserError

    first: dict[str, WorkItem] = {}
    for item in items:
        first.setdefault(item.trajectory, item)
    by_id = {c.id: c for c in cases}
    for t, item in first.items():
        case = by_id[item.case_id]
        # a folder of this process's scratch area (removed at exit): kept while the process runs, so the canvas the
        # probe encoded is what the compile cache copies for the real item (adapters/memo.py), not encoded twice
        where = _scratch() / f"{next(_PROBES)}-{t}"
        try:
            path = adapter.path_for(specs[t], adapter.canvas_K(case), t)
            adapter.compile(ItemRequest(case=case, path=path, context=policy, seed=item.seed, item_dir=where))
        except UserError as exc:
            raise PlanError(f"model={adapter.config.name}: {exc} (found compiling {item.key} at planning; nothing "
                            "was written)") from None
        except Exception:  # a bug or an environment problem: the item records it when it runs
            continue


_PROBES = itertools.count()
_SCRATCH: list[Path] = []


def _scratch() -> Path:
    """This process's scratch folder for planning compiles (under the system temp dir; removed at exit)."""
    if not _SCRATCH:
        import atexit
        import shutil
        import tempfile

        d = Path(tempfile.mkdtemp(prefix="harness-plan-"))
        atexit.register(shutil.rmtree, d, True)
        _SCRATCH.append(d)
    return _SCRATCH[0]


def check_trajectory_names(cfg: RunConfig, names: Sequence[str]) -> None:
    """Every trajectory name is a plain name of the ``trajectory`` group, and the chosen trajectory's ``name``
    labels its own path: ``trajectory=lrlr trajectory.name=lrud`` would file LRLR motion as LRUD."""
    import yaml

    from harness.config_groups import check_choice, option_file

    tr = cfg.chosen()[2]
    # first every name as a name (each becomes a folder), then every name as an option of the group
    for n in names:
        check_name("trajectories" if cfg.trajectories else "trajectory.name", n)
    check_name("trajectory.name", tr.name)
    for n in (*names, tr.name):
        check_choice("trajectory", n)
    # the file as written (kind and cycles are never inherited): no Hydra compose for a name check; found where
    # Hydra finds it (a --config-dir option too)
    ref = yaml.safe_load(option_file("trajectory", tr.name).read_text()) or {}
    for k in ("kind", "cycles"):
        if k not in ref:
            continue
        have, want = getattr(tr, k), ref[k]
        if k == "cycles":
            have, want = list(have or []), list(want or [])
        if have != want:
            raise PlanError(f"trajectory.name={tr.name!r} labels a path whose {k} is {have!r}, but "
                            f"trajectory {tr.name!r} has {want!r}: the name is the item folder and the label the "
                            f"analyses read; choose trajectory={tr.name} instead of renaming (or drop "
                            "trajectory.name)")


def resolve_context(ctx: Mapping[str, Any] | ContextPolicy, adapter: Adapter) -> ContextPolicy:
    """The :class:`ContextPolicy` of a ``context`` section; ``paper`` becomes the model's main-table policy."""
    from harness.context import ContextPolicy

    return paper_resolved(ContextPolicy.from_dict(ctx), adapter.config.paper_context)


def _adapter_for(cfg: RunConfig) -> Adapter:
    """The run's adapter (no weights loaded): the model (with this machine's settings, merged when the config was
    read), wrapped by a served backend when one is chosen."""
    from adapters.base import build_adapter
    from adapters.served import for_backend

    return for_backend(build_adapter(cfg.chosen()[0]), cfg.backend, cfg.endpoint)


def _check_even_canvas(adapter: Adapter) -> None:
    mc = adapter.config
    if mc.height % 2 or mc.width % 2:
        from adapters.base import ModelConfigError

        raise ModelConfigError(f"model.height/model.width = {mc.height}x{mc.width}: both must be even "
                               f"(H.264 4:2:0 video); e.g. model.height={mc.height + mc.height % 2}")


def _trajectory_specs(cfg: RunConfig) -> dict[str, TrajectorySpec]:
    """Trajectory name -> spec: ``trajectories`` (or the chosen ``trajectory``), names checked."""
    from trajectories import TrajectorySpec

    from harness.config_groups import group_yaml

    chosen = cfg.chosen()[2]
    names = cfg.trajectories or [chosen.name]
    check_trajectory_names(cfg, names)
    return {name: chosen if name == chosen.name else TrajectorySpec.from_dict(group_yaml("trajectory", name))
            for name in names}


def plan_from_config(cfg: RunConfig | Mapping[str, Any], for_writing: bool = True) -> Plan:
    """Validate the config and build the plan; nothing is written. Errors name the setting and the fix.
    ``for_writing=False`` (reading a finished run, e.g. ``verify``) skips the writability check. A plain mapping
    (API use) is typed first (:meth:`RunConfig.coerce`)."""
    cfg = RunConfig.coerce(cfg)
    run_dir = run_dir_for(cfg.output_root, cfg.run)
    specs = _trajectory_specs(cfg)
    adapter = _adapter_for(cfg)
    policy = cfg.chosen()[1]
    adapter.check_context(policy)  # unsupported pairs fail here, before any weights load
    _check_even_canvas(adapter)
    cases = load_cases_from_config(cfg.cases)
    seed = adapter.config.seed if cfg.seed is None else cfg.seed
    all_items = make_plan(adapter.config.name, policy.name, seed, specs, cases, "0/1")
    items = make_plan(adapter.config.name, policy.name, seed, specs, cases, cfg.shard)
    check_trajectories(adapter, specs, cases, items)
    if for_writing:
        check_compile(adapter, policy, specs, cases, items)
        check_writable(run_dir, all_items)
    return Plan(adapter, policy, specs, cases, items, run_dir, all_items, cfg, RedactedConfig.of(cfg.raw))

"""Hydra's hook for the harness's local launcher (``conf/launcher/local.yaml``, the default of ``-m``).

Hydra loads launchers only from the ``hydra_plugins`` namespace and imports every module there at start-up, so this
one stays light: it registers the launcher's config and hands ``launch`` to :mod:`harness.app.sweep` (imported when a
sweep is launched): the jobs run in parallel worker processes, one console line each, one summary at the end.
"""

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.plugins.launcher import Launcher


@dataclass
class WorldMemLocalConf:
    """``n_jobs``: jobs at once (``auto``: as many as fit, see :func:`harness.app.sweep.fit`; never more than the
    sweep has)."""

    _target_: str = "hydra_plugins.worldmem_local.WorldMemLocalLauncher"
    n_jobs: Any = "auto"


ConfigStore.instance().store(group="hydra/launcher", name="worldmem_local", node=WorldMemLocalConf,
                             provider="worldmem-harness")


class WorldMemLocalLauncher(Launcher):
    """Runs a sweep's jobs in parallel processes on this machine (:func:`harness.app.sweep.launch`)."""

    def __init__(self, **params: Any) -> None:
        self.params = dict(params)
        self.config: Optional[Any] = None
        self.task_function: Optional[Any] = None
        self.hydra_context: Optional[Any] = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        from harness.app.sweep import launch

        return launch(self, job_overrides, initial_job_idx)

"""Hydra's hook for the harness's Slurm launcher (``conf/launcher/slurm.yaml``).

Hydra loads launchers only from the ``hydra_plugins`` namespace and imports every module there at start-up, so this
one stays light: it extends the submitit launcher's config with the harness's settings and hands ``launch`` to
:mod:`harness.app.slurm` (imported when a sweep is launched). Without the ``dist`` extra (no submitit launcher)
it defines nothing, silently: ``launcher=slurm`` then fails as any missing launcher does.
"""

from dataclasses import dataclass
from typing import Any, Optional

try:
    from hydra.core.config_store import ConfigStore
    from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
except ImportError:  # the `dist` extra is not installed
    SlurmLauncher = None

if SlurmLauncher is not None:

    @dataclass
    # hydra-submitit-launcher's modules are typed as Any here (mypy cannot resolve them beside this namespace)
    class WorldMemSlurmConf(SlurmQueueConf):  # type: ignore[misc]  # base class is Any to mypy (see above)
        """submitit's Slurm settings plus: ``time`` (a Slurm time string; wins over ``timeout_min``), ``gres: auto``
        (``gpu[:gpu_type]:<model.gpus_per_job>``), ``gpu_type``, and the poll interval of the wait (seconds, growing
        1.5x from ``poll_s`` up to ``max_poll_s``)."""

        _target_: str = "hydra_plugins.worldmem_slurm.WorldMemSlurmLauncher"
        time: Optional[str] = None
        gres: Optional[str] = "auto"
        gpu_type: Optional[str] = None
        poll_s: float = 2.0
        max_poll_s: float = 15.0

    ConfigStore.instance().store(group="hydra/launcher", name="worldmem_slurm", node=WorldMemSlurmConf,
                                 provider="worldmem-harness")

    class WorldMemSlurmLauncher(SlurmLauncher):  # type: ignore[misc]  # base class is Any to mypy (see above)
        """Submits like Hydra's submitit launcher; waits, summarises and exits as :mod:`harness.app.slurm` says."""

        def launch(self, job_overrides: Any, initial_job_idx: int) -> Any:
            from harness.app.slurm import launch

            return launch(self, job_overrides, initial_job_idx)

        def __call__(self, *args: Any, **kwargs: Any) -> Any:  # runs inside the Slurm job
            from harness.app.slurm import quiet_time_limit_signal

            quiet_time_limit_signal(int(self.params.get("max_num_timeout") or 0))
            return super().__call__(*args, **kwargs)

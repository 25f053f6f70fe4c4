"""Hydra's hook for models from installed packages (:mod:`harness.installed_models`).

Hydra imports every module of the ``hydra_plugins`` namespace at start-up and asks each ``SearchPathPlugin`` to
extend the config search path (facebookresearch/hydra ``hydra/plugins/search_path_plugin.py``): this one appends the
``conf`` folder of each model an installed distribution declares in the ``worldmem_harness.models`` entry-point
group, so ``model=<name>`` composes that package's ``conf/model/<name>.yaml`` like an in-tree option.
"""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class WorldMemInstalledModels(SearchPathPlugin):
    """Appends ``file://<package>/conf`` of every installed model, after the ``conf`` package."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        from harness.installed_models import installed_models

        for model in installed_models().values():
            search_path.append(provider=f"worldmem-harness model {model.name} ({model.distribution})",
                               path=f"file://{model.conf_dir}")

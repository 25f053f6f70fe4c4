"""The search-path plugin that adds every model package's ``conf`` folder, in-tree and installed (Hydra finds it by
scanning the ``hydra_plugins`` namespace, submodules included)."""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class WorldMemInstalledModels(SearchPathPlugin):
    """Appends ``file://<package>/conf`` of every model package (:func:`harness.installed_models.model_packages`:
    the in-tree ``adapters/<model>/`` folders and installed models alike), after the ``conf`` package."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        from harness.installed_models import model_packages

        for model in model_packages().values():
            search_path.append(provider=f"worldmem-harness model {model.name} ({model.distribution})",
                               path=f"file://{model.conf_dir}")

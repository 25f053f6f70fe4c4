"""The search-path plugin that adds installed models' ``conf`` folders (Hydra finds it by scanning the
``hydra_plugins`` namespace, submodules included)."""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class WorldMemInstalledModels(SearchPathPlugin):
    """Appends ``file://<package>/conf`` of every installed model, after the ``conf`` package."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        from harness.installed_models import installed_models

        for model in installed_models().values():
            search_path.append(provider=f"worldmem-harness model {model.name} ({model.distribution})",
                               path=f"file://{model.conf_dir}")

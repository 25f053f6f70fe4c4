"""Hydra's hook for model packages (:mod:`harness.installed_models`).

Hydra imports every module of the ``hydra_plugins`` namespace at start-up and asks each ``SearchPathPlugin`` to
extend the config search path (facebookresearch/hydra ``hydra/plugins/search_path_plugin.py``): this one appends the
``conf`` folder of every model package, the in-tree ``adapters/<name>/`` folders and each model an installed
distribution declares in the ``worldmem_harness.models`` entry-point group, so ``model=<name>`` composes that
package's ``conf/model/<name>.yaml``, whichever kind it is.
"""

"""A toy upstream model written outside the repository: its package (LingBot-World v2's adapter under a new name,
its contract facts under the toy's repository) and its Hydra config. Used by the tests that add a model as a folder
(tests/adapters/test_adding_a_model.py) and as an installed package (tests/adapters/test_installed_model.py)."""

from __future__ import annotations

from pathlib import Path

import yaml

from adapters import contracts



def write_toy_model(pkg: Path, config: Path, *, name: str, repo: str, what: str) -> None:
    """Write the package ``pkg`` (``__init__.py``, ``adapter.py`` with ``ToyAdapter``, ``contract.yaml``) and the
    model config file ``config`` (``conf/model/<name>.yaml``) of the toy model ``name`` from ``repo``; ``what`` is
    its one-line description ("a toy upstream model")."""
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(f'"""{what[0].upper() + what[1:]}."""\n')
    (pkg / "adapter.py").write_text(
        "from adapters.lingbot_v2.adapter import LingBotV2Adapter\n\n\n"
        "class ToyAdapter(LingBotV2Adapter):\n"
        f'    """{what[0].upper() + what[1:]} with LingBot-World v2\'s controls and launch."""\n')
    raw = yaml.safe_load(contracts.contract_path("lingbot_v2").read_text())
    raw.update(model=name, repo=repo)
    (pkg / "contract.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = yaml.safe_load((contracts.ADAPTERS_DIR / "lingbot_v2" / "conf" / "model" / "lingbot_v2.yaml").read_text())
    cfg.update(name=name, adapter=f"{pkg.name}.adapter:ToyAdapter", description=what, upstream_repo=repo)
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))

"""The import table of ``docs/architecture.md`` holds: layers run one way (a static check over the source files;
nothing is imported). Every ``import`` statement counts, lazy ones inside functions included."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support import ROOT

#: the project's source packages (``conf`` is a data package: not layered). ``hydra_plugins`` is a namespace shared
#: with installed Hydra plugins: only ``hydra_plugins.worldmem_slurm`` and
#: ``hydra_plugins.worldmem_models`` are the project's.
PROJECT = ("adapters", "harness", "trajectories", "evaluate", "hydra_plugins.worldmem_slurm",
           "hydra_plugins.worldmem_models")
TABLE_DOC = ROOT / "docs" / "architecture.md"


def is_project(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in PROJECT)


def imported_modules(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``path``; relative imports are resolved against ``package``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    mod_parts = [*package.split("."), path.stem]  # ``__init__`` too: level 1 is the package itself
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod_parts[: len(mod_parts) - node.level]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            out.append((node.lineno, name))
    return out


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """The check can fail: a lazy import of an adapter and a relative import out of the package are both caught."""
    pkg = tmp_path / "context"
    pkg.mkdir()
    f = pkg / "mod.py"
    f.write_text("import numpy\nfrom . import fov\ndef g():\n    from adapters.tiny_causal_dit.model import x\n"
                 "    from ..app.runner import run\n")
    mods = [m for _, m in imported_modules(f, "harness.context")]
    assert mods == ["numpy", "harness.context", "adapters.tiny_causal_dit.model", "harness.app.runner"]
    table = import_table()
    verdict = [allowed(m, "context", table) for m in mods]
    assert verdict == [True, True, False, False]


#: adapter package -> the one sibling it may import: LingBot-World v2 extends the v1 adapter of its own family
SIBLING_FAMILY = {"lingbot_v2": "lingbot"}


def test_no_adapter_imports_a_sibling_adapter():
    """Shared code lives below the model packages (``adapters.base``, ``adapters.upstream``, ``adapters.controls``,
    ``harness.context``, ``trajectories``), never in another model's package."""
    models = sorted(p.parent.name for p in (ROOT / "adapters").glob("*/adapter.py"))
    assert len(models) >= 12, models
    bad = []
    for model in models:
        for f in sorted((ROOT / "adapters" / model).glob("*.py")):
            for line, mod in imported_modules(f, f"adapters.{model}"):
                parts = mod.split(".")
                if parts[0] == "adapters" and len(parts) > 1 and parts[1] in models and \
                        parts[1] not in (model, SIBLING_FAMILY.get(model)):
                    bad.append(f"{f.relative_to(ROOT)}:{line} imports {mod}")
    assert not bad, "\n".join(bad)


def import_table(doc: Path = TABLE_DOC) -> dict[str, tuple[list[str], set[str]]]:
    """layer -> (its module prefixes, the layers it may import), read from the doc's "Import table" section."""
    text = doc.read_text()
    section = text[text.index("## Import table"):]
    section = section[: section.find("\n#", 1) if "\n#" in section[1:] else None]  # up to the next heading
    table = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("layer", "---") or not line.startswith("|"):
            continue
        layer, modules, may = cells
        prefixes = re.findall(r"`([a-z_.]+)`", modules)
        below = set() if may.startswith("(") else {m.strip() for m in may.split(",")}
        table[layer] = (prefixes, below)
    return table


def layer_of(module: str, table: dict[str, tuple[list[str], set[str]]]) -> str | None:
    """The layer whose longest module prefix matches ``module`` (``harness`` alone is the package root only)."""
    best, best_len = None, -1
    for layer, (prefixes, _) in table.items():
        for p in prefixes:
            exact_only = p == "harness"
            hit = module == p or (not exact_only and module.startswith(p + "."))
            if hit and len(p) > best_len:
                best, best_len = layer, len(p)
    return best


def allowed(module: str, importer_layer: str, table: dict[str, tuple[list[str], set[str]]]) -> bool:
    if not is_project(module):
        return True  # the standard library, third-party packages (other Hydra plugins included) and ``conf``
    target = layer_of(module, table)
    return target is not None and (target == importer_layer or target in table[importer_layer][1])


def project_files() -> list[tuple[Path, str]]:
    """(file, its dotted module name) of every project source file."""
    out = []
    for top in PROJECT:
        for f in sorted((ROOT / top.replace(".", "/")).rglob("*.py")):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.append((f, ".".join(parts)))
    return out


def test_the_table_is_well_formed():
    table = import_table()
    assert {"trajectories", "records", "context", "adapters", "planning", "evaluate", "app", "plugins"} <= set(table)
    for layer, (prefixes, below) in table.items():
        assert prefixes, layer
        assert below <= set(table), f"{layer} may import unknown layers {below - set(table)}"
    assert "adapters" not in table["evaluate"][1] and "planning" not in table["evaluate"][1]


def test_every_module_has_a_layer():
    table = import_table()
    missing = [mod for _, mod in project_files() if layer_of(mod, table) is None]
    assert not missing, "give these modules a layer in docs/architecture.md (Import table):\n" + "\n".join(missing)


def test_imports_follow_the_table():
    table = import_table()
    bad = []
    for f, mod in project_files():
        own = layer_of(mod, table)
        package = mod if f.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for line, target in imported_modules(f, package):
            if own and not allowed(target, own, table):
                bad.append(f"{f.relative_to(ROOT)}:{line} ({own}) imports {target} ({layer_of(target, table)})")
    assert not bad, "layer violation (docs/architecture.md, Import table):\n" + "\n".join(bad)


def test_the_table_check_can_fail(tmp_path):
    """A doc whose evaluate row also allowed adapters would pass an import the real table refuses."""
    table = import_table()
    assert not allowed("adapters.reference.model", "evaluate", table)
    assert not allowed("harness.app.runner", "evaluate", table)
    assert not allowed("harness.app.plan", "adapters", table)
    assert allowed("harness.outputs", "evaluate", table)
    doc = tmp_path / "a.md"
    row = "`evaluate.release` | errors, trajectories, records |"
    assert row in TABLE_DOC.read_text()
    doc.write_text(TABLE_DOC.read_text().replace(row, "`evaluate.release` | errors, trajectories, records, adapters |"))
    assert allowed("adapters.reference.model", "evaluate", import_table(doc))


#: every source folder -> the layers its modules may be in (files directly in it). A model's package,
#: ``adapters/<model>/`` (a folder with ``adapter.py``), is in the adapters layer without being listed. A folder
#: that is neither (a new package) fails :func:`test_the_folders_are_the_layers` until it is added here and named in
#: the doc's import table.
FOLDER_LAYERS: dict[str, set[str]] = {
    "harness": {"records", "errors"},  # the records, and the two thin entry points (ENTRY_POINTS)
    "harness/context": {"context"},
    "harness/app": {"app", "planning"},
    "harness/app/benchmarks": {"app"},
    "harness/app/commands": {"app"},
    "harness/app/human": {"app"},
    "harness/app/human/static": {"app"},  # the annotation page's assets (package data)
    "trajectories": {"trajectories"},
    "adapters": {"adapters"},
    "adapters/contracts": {"adapters"},
    "adapters/controls": {"adapters"},
    "adapters/served": {"adapters"},
    "evaluate": {"evaluate"},
    "evaluate/families": {"evaluate"},
    "evaluate/human": {"evaluate"},
    "evaluate/judge": {"evaluate"},
    "evaluate/perception": {"evaluate"},
    "evaluate/release": {"evaluate"},
    "evaluate/reporting": {"evaluate"},
    "hydra_plugins/worldmem_slurm": {"plugins"},
    "hydra_plugins/worldmem_models": {"plugins"},
}
MODEL_LAYERS = {"adapters"}  # adapters/<model>/
ENTRY_POINTS = {"harness.__main__", "harness.bench"}  # thin entry points of the app, directly in harness/
#: modules below the app that may start it: the entry points, and Hydra's launcher hook (it hands a sweep to
#: ``harness.app.slurm``)
APP_STARTERS = ENTRY_POINTS | {"hydra_plugins.worldmem_slurm"}


def folder_layers(folder: Path, root: Path = ROOT) -> set[str] | None:
    """The layers the modules directly in ``folder`` may be in; None for a folder nobody placed."""
    rel = folder.relative_to(root).as_posix()
    if rel in FOLDER_LAYERS:
        return FOLDER_LAYERS[rel]
    if folder.parent == root / "adapters" and ((folder / "adapter.py").is_file() or
                                               (folder / "conf" / "model" / f"{folder.name}.yaml").is_file()):
        return MODEL_LAYERS  # a model's folder: its adapter, or its config (a model another package's adapter runs)
    return None


def misplaced(files: list[tuple[Path, str]], table: dict[str, tuple[list[str], set[str]]],
              root: Path = ROOT) -> list[str]:
    """One line per module whose folder is not placed, or whose layer is not one its folder holds."""
    bad = []
    for f, mod in files:
        want = {"app"} if mod in ENTRY_POINTS else folder_layers(f.parent, root)
        rel = f.relative_to(root)
        if want is None:
            bad.append(f"{rel}: its folder {rel.parent.as_posix()}/ has no layer: add it to FOLDER_LAYERS "
                       "(tests/test_layers.py) and name it in docs/architecture.md (Import table)")
        elif layer_of(mod, table) not in want:
            bad.append(f"{rel}: layer {layer_of(mod, table)}, its folder holds {sorted(want)}")
    return bad


def test_the_folders_are_the_layers():
    """The tree shows the layers: the app (CLI, planning, running, verify, benchmarks, the human-study server) is
    ``harness/app/``, the KV-context policies ``harness/context/``, the records the files directly in ``harness/``;
    every folder is placed, so a new package fails here until it is given a layer."""
    bad = misplaced(project_files(), import_table())
    assert not bad, "\n".join(bad)


def test_every_folder_is_named_in_the_table():
    """The doc names every package (a model's package as ``adapters.<model>``): a reader finds each folder's
    layer in the import table, not only through a shorter prefix."""
    table = import_table()
    named = {p for prefixes, _ in table.values() for p in prefixes}
    folders = sorted({f.parent for f, _ in project_files()})
    dotted = {f: f.relative_to(ROOT).as_posix().replace("/", ".") for f in folders}
    missing = [name for f, name in dotted.items() if folder_layers(f) is not MODEL_LAYERS and name not in named]
    assert not missing, "name these packages in docs/architecture.md (Import table):\n" + "\n".join(missing)


def test_an_unknown_folder_fails(tmp_path):
    """The folder check can fail: a new package under ``harness/`` or ``evaluate/`` has no layer until placed; a
    model folder (with ``adapter.py``) is placed by its shape; a module in the wrong layer's folder is named."""
    for rel in ("harness/newpkg/mod.py", "evaluate/metrics/mod.py", "adapters/toy/adapter.py", "adapters/toy/x.py",
                "harness/context/mod.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    files = [(tmp_path / "harness/newpkg/mod.py", "harness.newpkg.mod"),
             (tmp_path / "evaluate/metrics/mod.py", "evaluate.metrics.mod"),
             (tmp_path / "adapters/toy/adapter.py", "adapters.toy.adapter"),
             (tmp_path / "harness/context/mod.py", "harness.app.mod")]
    bad = misplaced(files, import_table(), tmp_path)
    assert len(bad) == 3, bad
    assert bad[0].startswith("harness/newpkg/mod.py: its folder harness/newpkg/ has no layer")
    assert bad[1].startswith("evaluate/metrics/mod.py: its folder evaluate/metrics/ has no layer")
    assert bad[2] == "harness/context/mod.py: layer app, its folder holds ['context']"


def test_only_the_entry_points_import_the_app():
    """Nothing below the app reaches up into ``harness/app/`` (the two thin entry points and Hydra's launcher hook
    start it)."""
    bad = []
    for f, mod in project_files():
        if mod.startswith("harness.app") or mod in APP_STARTERS:
            continue
        package = mod if f.name == "__init__.py" else mod.rsplit(".", 1)[0]
        bad += [f"{f.relative_to(ROOT)}:{line} imports {target}" for line, target in imported_modules(f, package)
                if target == "harness.app" or target.startswith("harness.app.")]
    assert not bad, "\n".join(bad)

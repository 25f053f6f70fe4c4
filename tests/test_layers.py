"""The import table of ``docs/architecture.md`` holds: layers run one way (a static check over the source files;
nothing is imported). Every ``import`` statement counts, lazy ones inside functions included."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support import ROOT

PROJECT = ("adapters", "harness", "trajectories", "evaluate")  # ``conf`` is a data package: not layered
TABLE_DOC = ROOT / "docs" / "architecture.md"


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
    if module.split(".")[0] not in PROJECT:
        return True  # the standard library, third-party packages and ``conf``
    target = layer_of(module, table)
    return target is not None and (target == importer_layer or target in table[importer_layer][1])


def project_files() -> list[tuple[Path, str]]:
    """(file, its dotted module name) of every project source file."""
    out = []
    for top in PROJECT:
        for f in sorted((ROOT / top).rglob("*.py")):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.append((f, ".".join(parts)))
    return out


def test_the_table_is_well_formed():
    table = import_table()
    assert {"trajectories", "records", "context", "adapters", "planning", "evaluate", "app"} <= set(table)
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
    doc.write_text(TABLE_DOC.read_text().replace("| `evaluate` | errors, trajectories, records |",
                                                 "| `evaluate` | errors, trajectories, records, adapters |"))
    assert allowed("adapters.reference.model", "evaluate", import_table(doc))


#: where each layer lives in the tree: (folder, files directly in it only?) -> the layers its modules may be in
FOLDER_LAYERS = {
    ("harness/app", False): {"app", "planning"},
    ("harness/context", False): {"context"},
    ("harness", True): {"records", "errors"},
    ("adapters", False): {"adapters"},
    ("evaluate", False): {"evaluate"},
    ("trajectories", False): {"trajectories"},
}
ENTRY_POINTS = {"harness.__main__", "harness.bench"}  # thin entry points of the app, directly in harness/


def test_the_folders_are_the_layers():
    """The tree shows the layers: the app (CLI, planning, running, verify, benchmarks) is ``harness/app/``, the
    KV-context policies ``harness/context/``, the records the files directly in ``harness/``."""
    table = import_table()
    bad = []
    for f, mod in project_files():
        rel = f.relative_to(ROOT).parent.as_posix()
        if mod in ENTRY_POINTS:
            want = {"app"}
        else:
            want = next(layers for (folder, flat), layers in FOLDER_LAYERS.items()
                        if rel == folder or (not flat and rel.startswith(folder + "/")))
        if layer_of(mod, table) not in want:
            bad.append(f"{f.relative_to(ROOT)}: layer {layer_of(mod, table)}, its folder holds {sorted(want)}")
    assert not bad, "\n".join(bad)


def test_only_the_entry_points_import_the_app():
    """Nothing below the app reaches up into ``harness/app/`` (the two thin entry points start it)."""
    bad = []
    for f, mod in project_files():
        if mod.startswith("harness.app") or mod in ENTRY_POINTS:
            continue
        package = mod if f.name == "__init__.py" else mod.rsplit(".", 1)[0]
        bad += [f"{f.relative_to(ROOT)}:{line} imports {target}" for line, target in imported_modules(f, package)
                if target == "harness.app" or target.startswith("harness.app.")]
    assert not bad, "\n".join(bad)

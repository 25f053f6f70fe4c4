"""The rules of the ``weights`` command (harness/app/weights.py), one at a time and in this process: which backbones a
name list selects, the size column, the status of a backbone whose weights ship inside installed packages, the
listing's exact lines and exit codes (list / verify), the argparse front end (``--root``, ``paths.weights=``) and
``fetch`` with a stand-in download. The registry is replaced by four tiny backbones (two learned ones, one shipped,
one weight-free) whose files are a few bytes under tmp_path; nothing is downloaded and no network is used."""

from __future__ import annotations

import hashlib
import sys
import types
from pathlib import Path
from typing import ClassVar

import pytest

from evaluate import backbones as bbs
from evaluate.perception.packaged import ShippedFile
from evaluate.weights import WeightsContract
from evaluate.weights_pack import HOW_TO_GET, MAP_ENV, PACK_ENV
from harness.app import extras
from harness.app import weights as cli
from harness.errors import ConfigError

MOD = "tiny_weights_cli_backbones"
REV = "0123456789abcdef0123456789abcdef01234567"
HEADER = f"{'backbone':<12} {'repository@revision':<48} {'state':<8} {'size':>10}  sha256"
FETCH_HINT = f"missing weights: `python -m harness weights fetch <name>`, {HOW_TO_GET}"
SHIPPED_HEADER = "shipped inside installed packages (real weights, diagnostic backbones; nothing to fetch):"


class Alpha:
    """A learned backbone with a pinned repository and revision (its sha256 pin is set by the tests)."""

    files = ("w.dat",)
    hf_repo = "example/alpha"
    revision = REV
    sha256: ClassVar[dict[str, str]] = {}
    recipe = "docs/alpha.md"


class Beta:
    """A learned backbone with nothing pinned (weights installed by hand)."""

    files = ("b.dat",)


class Shipped:
    """A backbone whose weights ship inside installed packages: its files are set by the tests."""

    FILES: ClassVar[list[ShippedFile]] = []

    @classmethod
    def shipped_files(cls) -> list[ShippedFile]:
        return list(cls.FILES)


class Free:
    """A weight-free backbone."""


SPECS = {s.name: s for s in [
    bbs.BackboneSpec("alpha", f"{MOD}:Alpha", "paper", ("encoder",), True, "tiny alpha"),
    bbs.BackboneSpec("beta", f"{MOD}:Beta", "paper", ("encoder",), True, "tiny beta"),
    bbs.BackboneSpec("ship", f"{MOD}:Shipped", "diagnostic", ("imaging",), False, "tiny shipped", packaged=True),
    bbs.BackboneSpec("free", f"{MOD}:Free", "diagnostic", ("encoder",), False, "tiny weight-free"),
]}
ALPHA, BETA, SHIP, FREE = SPECS.values()


@pytest.fixture(autouse=True)
def tiny(monkeypatch):
    """The four tiny backbones are the whole registry; no weights setting or pack comes from the machine."""
    mod = types.ModuleType(MOD)
    for cls in (Alpha, Beta, Shipped, Free):
        setattr(mod, cls.__name__, cls)
    monkeypatch.setitem(sys.modules, MOD, mod)
    monkeypatch.setattr(bbs, "BACKBONES", dict(SPECS))
    monkeypatch.setattr(cli, "BACKBONES", bbs.BACKBONES)
    monkeypatch.setattr(Alpha, "sha256", {})
    monkeypatch.setattr(Shipped, "FILES", [])
    for k in ("WORLDMEM_WEIGHTS", PACK_ENV, MAP_ENV):
        monkeypatch.delenv(k, raising=False)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def put(root: Path, name: str, file: str, data: bytes) -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / file).write_bytes(data)
    return d


def shipped_file(path: Path, label: str = "model.dat", pin: str | None = None) -> ShippedFile:
    return ShippedFile(label, ("path", "", str(path)), "Tiny provider", "apt-get install tiny-data", "CC0", pin)


def row(name: str, rev: str, state: str, size: str, checksum: str) -> str:
    return f"{name:<12} {rev:<48} {state:<8} {size:>10}  {checksum}"


ALPHA_REV = "example/alpha@0123456789ab"


def run(capsys, argv: list[str]) -> tuple[int, list[str], list[str]]:
    code = cli.main(argv)
    cap = capsys.readouterr()
    return code, cap.out.splitlines(), cap.err.splitlines()


# -- _select -----------------------------------------------------------------------------------------------------


def test_no_names_or_all_select_the_learned_backbones_in_registry_order():
    assert cli._select([]) == [ALPHA, BETA]
    assert cli._select(["all"]) == [ALPHA, BETA]


def test_with_shipped_the_default_selection_adds_the_shipped_backbones_but_never_a_weight_free_one():
    assert cli._select([], shipped=True) == [ALPHA, BETA, SHIP]
    assert cli._select(["all"], shipped=True) == [ALPHA, BETA, SHIP]


def test_named_backbones_are_selected_in_the_order_given():
    assert cli._select(["beta"]) == [BETA]
    assert cli._select(["beta", "alpha"]) == [BETA, ALPHA]


def test_a_shipped_backbone_named_for_fetching_is_refused_with_the_listing_command():
    with pytest.raises(ConfigError) as exc:
        cli._select(["ship"])
    assert str(exc.value) == ("backbone 'ship': its weights ship inside installed packages, nothing to fetch; "
                              "`python -m harness weights list` shows what is missing and the install command")
    assert cli._select(["ship"], shipped=True) == [SHIP]
    assert cli._select(["alpha", "ship"], shipped=True) == [ALPHA, SHIP]


def test_a_weight_free_backbone_is_refused_even_for_a_listing():
    for shipped in (False, True):
        with pytest.raises(ConfigError) as exc:
            cli._select(["free"], shipped=shipped)
        assert str(exc.value) == "backbone 'free' is weight-free: nothing to fetch"


def test_an_unknown_name_is_a_config_error_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"unknown backbone 'alpah'\. Did you mean 'alpha'\?"):
        cli._select(["alpah"])


# -- _human ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (1024 ** 2 - 1, "1024.0 KiB"),
    (1024 ** 2, "1.0 MiB"), (5 * 1024 ** 2, "5.0 MiB"), (1024 ** 3, "1.0 GiB"), (1024 ** 4, "1024.0 GiB"),
])
def test_sizes_are_shown_in_binary_units_bytes_without_decimals(n, text):
    assert cli._human(n) == text


# -- shipped_status ----------------------------------------------------------------------------------------------


def test_a_shipped_backbone_is_unchecked_unless_its_files_are_hashed(tmp_path):
    f = tmp_path / "pkg" / "model.dat"
    f.parent.mkdir()
    f.write_bytes(b"weights")
    Shipped.FILES = [shipped_file(f, pin="0" * 64)]
    st = cli.shipped_status(SHIP)
    assert st == {"name": "ship", "state": "present", "files": {"model.dat": str(f)}, "missing": [], "install": [],
                  "size": 7, "checksum": "-"}
    assert cli.shipped_status(SHIP, hash_files=False)["checksum"] == "-"


def test_a_hashed_shipped_file_matching_its_pin_is_ok(tmp_path):
    f = tmp_path / "model.dat"
    f.write_bytes(b"weights")
    Shipped.FILES = [shipped_file(f, pin=sha(b"weights"))]
    assert cli.shipped_status(SHIP, hash_files=True)["checksum"] == "ok"


def test_an_unpinned_shipped_file_is_ok_when_hashed(tmp_path):
    f = tmp_path / "model.dat"
    f.write_bytes(b"weights")
    Shipped.FILES = [shipped_file(f, pin=None)]
    assert cli.shipped_status(SHIP, hash_files=True)["checksum"] == "ok"


def test_the_first_shipped_file_that_differs_from_its_pin_is_named(tmp_path):
    a, b, c = (tmp_path / n for n in ("a.dat", "b.dat", "c.dat"))
    for p in (a, b, c):
        p.write_bytes(p.name.encode())
    Shipped.FILES = [shipped_file(a, "A", pin=sha(b"a.dat")), shipped_file(b, "B", pin="0" * 64),
                     shipped_file(c, "C", pin="1" * 64)]
    assert cli.shipped_status(SHIP, hash_files=True)["checksum"] == "differs:B (another package version)"


def test_a_missing_shipped_backbone_is_not_hashed(tmp_path):
    f = tmp_path / "model.dat"
    f.write_bytes(b"weights")
    Shipped.FILES = [shipped_file(f, "A", pin="0" * 64), shipped_file(tmp_path / "absent.dat", "B")]
    st = cli.shipped_status(SHIP, hash_files=True)
    assert st["state"] == "missing" and st["missing"] == ["B"] and st["checksum"] == "-"
    assert st["install"] == ["apt-get install tiny-data"]


# -- cmd_list: the listing -----------------------------------------------------------------------------------------


def test_an_empty_root_lists_every_learned_backbone_missing_with_how_to_get_them(tmp_path, capsys):
    root = tmp_path / "w"
    code, out, err = run(capsys, ["list", "--root", str(root)])
    assert code == 0 and err == []
    assert out == [f"weights root: {root}", HEADER,
                   row("alpha", ALPHA_REV, "missing", "0 B", "-") + "  missing: w.dat",
                   row("beta", "-@-", "missing", "0 B", "-") + "  missing: b.dat",
                   FETCH_HINT,
                   SHIPPED_HEADER,
                   row("ship", "-", "present", "0 B", "-")]


def test_present_weights_are_listed_with_their_size_and_no_fetch_hint(tmp_path, capsys):
    root = tmp_path / "w"
    put(root, "alpha", "w.dat", b"x" * 1536)
    put(root, "beta", "b.dat", b"y")
    code, out, err = run(capsys, ["list", "--root", str(root)])
    assert code == 0 and err == []
    assert out[2:4] == [row("alpha", ALPHA_REV, "present", "1.5 KiB", "-"), row("beta", "-@-", "present", "1 B", "-")]
    assert FETCH_HINT not in out


def test_one_missing_backbone_among_present_ones_gives_the_fetch_hint(tmp_path, capsys):
    root = tmp_path / "w"
    put(root, "alpha", "w.dat", b"x")
    code, out, _ = run(capsys, ["list", "--root", str(root)])
    assert code == 0 and FETCH_HINT in out


def test_a_listing_never_fails_on_missing_or_corrupt_weights(tmp_path, capsys):
    root = tmp_path / "w"
    put(root, "alpha", "w.dat", b"")  # empty: corrupt, but a listing does not hash
    Shipped.FILES = [shipped_file(tmp_path / "absent.dat")]
    code, out, err = run(capsys, ["list", "--root", str(root)])
    assert code == 0 and err == []
    assert row("alpha", ALPHA_REV, "present", "0 B", "-") in out


def test_the_shipped_section_names_the_folders_of_its_files_or_the_missing_ones_and_their_install(tmp_path, capsys):
    (tmp_path / "p1").mkdir()
    (tmp_path / "p2").mkdir()
    for p in ("p2/b.dat", "p1/a.dat", "p1/c.dat"):
        (tmp_path / p).write_bytes(b"1234")
    Shipped.FILES = [shipped_file(tmp_path / "p2/b.dat", "B"), shipped_file(tmp_path / "p1/a.dat", "A"),
                     shipped_file(tmp_path / "p1/c.dat", "C")]
    _, out, _ = run(capsys, ["list", "--root", str(tmp_path / "w")])
    assert out[-2:] == [SHIPPED_HEADER, row("ship", f"{tmp_path / 'p1'}, {tmp_path / 'p2'}", "present", "12 B", "-")]
    Shipped.FILES = [shipped_file(tmp_path / "none.dat", "N")]
    _, out, _ = run(capsys, ["list", "--root", str(tmp_path / "w")])
    assert out[-1] == row("ship", "-", "missing", "0 B", "-") + "  missing: N; install with: apt-get install tiny-data"


def test_a_listing_of_learned_names_has_no_shipped_section(tmp_path, capsys):
    code, out, _ = run(capsys, ["list", "alpha", "--root", str(tmp_path / "w")])
    assert code == 0
    assert out == [f"weights root: {tmp_path / 'w'}", HEADER,
                   row("alpha", ALPHA_REV, "missing", "0 B", "-") + "  missing: w.dat", FETCH_HINT]


def test_listing_only_a_shipped_backbone_shows_no_learned_row(tmp_path, capsys):
    code, out, _ = run(capsys, ["list", "ship", "--root", str(tmp_path / "w")])
    assert code == 0
    assert out == [f"weights root: {tmp_path / 'w'}", HEADER, SHIPPED_HEADER, row("ship", "-", "present", "0 B", "-")]


def test_a_backbone_whose_module_cannot_be_imported_is_listed_with_the_reason(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(bbs.BACKBONES, "gone", bbs.BackboneSpec("gone", "no_such_module_xyz:Gone", "paper",
                                                                ("encoder",), True, "gone"))
    code, out, _ = run(capsys, ["list", "gone", "--root", str(tmp_path / "w")])
    assert code == 0
    assert out[2].startswith(row("gone", "-@-", "missing", "0 B", "-") + "  missing: (folder)  (module "
                             "no_such_module_xyz not installed (backbone 'gone'")


# -- cmd_list: verify ----------------------------------------------------------------------------------------------


def test_verify_passes_when_every_backbone_is_present_and_not_corrupt(tmp_path, capsys):
    root = tmp_path / "w"
    put(root, "alpha", "w.dat", b"a")
    put(root, "beta", "b.dat", b"b")
    Alpha.sha256 = {"w.dat": sha(b"a")}
    f = tmp_path / "model.dat"
    f.write_bytes(b"m")
    Shipped.FILES = [shipped_file(f, pin=sha(b"m"))]
    code, out, err = run(capsys, ["verify", "--root", str(root)])
    assert (code, err) == (0, [])
    assert out[2:4] == [row("alpha", ALPHA_REV, "present", "1 B", "ok"), row("beta", "-@-", "present", "1 B",
                                                                              "unpinned")]
    assert out[-1] == row("ship", str(tmp_path), "present", "1 B", "ok")


def test_verify_fails_on_a_missing_backbone_without_an_error_line(tmp_path, capsys):
    root = tmp_path / "w"
    put(root, "alpha", "w.dat", b"a")
    code, _, err = run(capsys, ["verify", "--root", str(root)])
    assert (code, err) == (1, [])


def test_verify_names_a_corrupt_file_and_the_fetch_command(tmp_path, capsys):
    root = tmp_path / "w"
    d = put(root, "alpha", "w.dat", b"")
    put(root, "beta", "b.dat", b"b")
    code, out, err = run(capsys, ["verify", "--root", str(root)])
    assert code == 1
    assert row("alpha", ALPHA_REV, "present", "0 B", "corrupt:w.dat") + "  (w.dat: empty file (an interrupted "\
        "download?))" in out
    assert err == [(f"error: alpha: {d}/w.dat: empty file (an interrupted download?); re-fetch with: "
                    f"python -m harness weights fetch alpha --root {root}")]


def test_verify_names_a_file_that_differs_from_its_pin(tmp_path, capsys):
    root = tmp_path / "w"
    d = put(root, "alpha", "w.dat", b"a")
    put(root, "beta", "b.dat", b"b")
    Alpha.sha256 = {"w.dat": sha(b"other")}
    code, out, err = run(capsys, ["verify", "--root", str(root)])
    assert code == 1
    assert row("alpha", ALPHA_REV, "present", "1 B", "mismatch:w.dat") in out
    assert err == [(f"error: alpha: checksum mismatch in {d}/w.dat: re-fetch with: "
                    f"python -m harness weights fetch alpha --root {root}")]


def test_one_corrupt_and_one_missing_backbone_still_fail_verify(tmp_path, capsys):
    root = tmp_path / "w"
    put(root, "alpha", "w.dat", b"")
    code, _, err = run(capsys, ["verify", "--root", str(root)])
    assert code == 1 and len(err) == 1


def test_one_mismatching_and_one_missing_backbone_still_fail_verify(tmp_path, capsys):
    root = tmp_path / "w"
    put(root, "alpha", "w.dat", b"a")
    Alpha.sha256 = {"w.dat": sha(b"other")}
    code, _, err = run(capsys, ["verify", "--root", str(root)])
    assert code == 1 and len(err) == 1


def test_verify_fails_on_missing_shipped_weights_alone(tmp_path, capsys):
    root = tmp_path / "w"
    put(root, "alpha", "w.dat", b"a")
    put(root, "beta", "b.dat", b"b")
    Shipped.FILES = [shipped_file(tmp_path / "absent.dat")]
    code, _, err = run(capsys, ["verify", "--root", str(root)])
    assert (code, err) == (1, [])


def test_a_missing_shipped_and_a_missing_learned_backbone_still_fail_verify(tmp_path, capsys):
    root = tmp_path / "w"
    put(root, "alpha", "w.dat", b"a")
    Shipped.FILES = [shipped_file(tmp_path / "absent.dat")]
    code, _, _ = run(capsys, ["verify", "--root", str(root)])
    assert code == 1


# -- cmd_list: the weights pack ------------------------------------------------------------------------------------


def make_pack(tmp_path: Path) -> Path:
    """A pack holding alpha's file in a folder no table names (found by the open search)."""
    pack = tmp_path / "pack"
    (pack / "metrics").mkdir(parents=True)
    (pack / "models" / "alpha-upstream").mkdir(parents=True)
    (pack / "models" / "alpha-upstream" / "w.dat").write_bytes(b"abcd")
    return pack


def test_a_pack_from_the_environment_is_named_and_its_files_listed(tmp_path, capsys, monkeypatch):
    pack = make_pack(tmp_path)
    monkeypatch.setenv(PACK_ENV, str(pack))
    root = tmp_path / "w"
    put(root, "beta", "b.dat", b"b")
    code, out, err = run(capsys, ["list", "alpha", "beta", "--root", str(root)])
    assert (code, err) == (0, [])
    assert out == [f"weights root: {root}",
                   f"weights pack: {pack} (from {PACK_ENV}; our folders win where both hold a backbone)",
                   HEADER,
                   row("alpha", ALPHA_REV, "present", "4 B", "-"),
                   "    from the pack: models/alpha-upstream/w.dat",
                   "    pack: found via search",
                   row("beta", "-@-", "present", "1 B", "-")]


def test_with_a_pack_a_missing_backbone_gets_the_packs_note_not_the_fetch_hint(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(PACK_ENV, str(make_pack(tmp_path)))
    code, out, _ = run(capsys, ["list", "beta", "--root", str(tmp_path / "w")])
    assert code == 0
    assert out[3:] == [row("beta", "-@-", "missing", "0 B", "-") + "  missing: b.dat",
                       "    pack: the pack does not hold b.dat"]


def test_a_pack_setting_that_is_not_used_says_why(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(PACK_ENV, str(tmp_path / "nowhere"))
    root = tmp_path / "w"
    put(root, "alpha", "w.dat", b"a")
    code, out, _ = run(capsys, ["list", "alpha", "--root", str(root)])
    assert code == 0
    assert out == [f"weights root: {root}",
                   f"weights pack: none ({PACK_ENV}={tmp_path / 'nowhere'}: no such folder (ignored))",
                   HEADER, row("alpha", ALPHA_REV, "present", "1 B", "-")]


def test_a_link_out_of_the_pack_refuses_that_backbone_lists_the_others_and_exits_2(tmp_path, capsys, monkeypatch):
    pack = make_pack(tmp_path)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "b.dat").write_bytes(b"b")
    (pack / "models" / "beta-up").symlink_to(tmp_path / "outside")
    table = tmp_path / "map.yaml"
    table.write_text("backbones:\n  beta:\n    models: [beta-up]\n")
    monkeypatch.setenv(MAP_ENV, str(table))
    monkeypatch.setenv(PACK_ENV, str(pack))
    root = tmp_path / "w"
    put(root, "alpha", "w.dat", b"a")  # verify would pass for alpha: the refusal alone gives 2
    code, out, err = run(capsys, ["verify", "alpha", "beta", "--root", str(root)])
    assert code == 2
    assert out[3] == row("alpha", ALPHA_REV, "present", "1 B", "unpinned")
    assert out[4] == "    pack: ours wins over the pack's models/alpha-upstream/"
    assert out[5] == (f"{'beta':<12} {'-':<48} {'refused':<8}  (a link out of the weights pack, or one it cannot "
                      "follow: see the error below)")
    assert len(out) == 6 and len(err) == 1
    assert err[0].startswith(f"error: beta: weights pack {pack}: models/beta-up is a link to ")


# -- main: the argparse front end ------------------------------------------------------------------------------------


def test_the_hydra_spelling_paths_weights_sets_the_root_even_with_an_equals_sign_in_it(tmp_path, capsys):
    root = tmp_path / "a=b"
    code, out, _ = run(capsys, ["list", "alpha", f"paths.weights={root}"])
    assert code == 0 and out[0] == f"weights root: {root}"


def test_root_wins_over_paths_weights_and_either_wins_over_the_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WORLDMEM_WEIGHTS", str(tmp_path / "env"))
    assert run(capsys, ["list", "alpha"])[1][0] == f"weights root: {tmp_path / 'env'}"
    assert run(capsys, ["list", "alpha", "--root", str(tmp_path / "r")])[1][0] == f"weights root: {tmp_path / 'r'}"
    assert run(capsys, ["list", "alpha", f"paths.weights={tmp_path / 'p'}"])[1][0] == f"weights root: {tmp_path / 'p'}"
    out = run(capsys, ["list", "alpha", "--root", str(tmp_path / "r"), f"paths.weights={tmp_path / 'p'}"])[1]
    assert out[0] == f"weights root: {tmp_path / 'r'}"


def test_verify_hashes_where_list_does_not(tmp_path, capsys):
    root = tmp_path / "w"
    put(root, "beta", "b.dat", b"b")
    assert run(capsys, ["list", "beta", "--root", str(root)])[1][2] == row("beta", "-@-", "present", "1 B", "-")
    assert run(capsys, ["verify", "beta", "--root", str(root)])[1][2] == row("beta", "-@-", "present", "1 B",
                                                                             "unpinned")


def test_an_unknown_action_is_an_argparse_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["frob"])
    assert exc.value.code == 2 and "invalid choice: 'frob'" in capsys.readouterr().err


def test_a_weight_free_name_is_a_user_error_with_exit_2(tmp_path, capsys):
    code, out, err = run(capsys, ["list", "free", "--root", str(tmp_path)])
    assert (code, out) == (2, [])
    assert err == ["error: backbone 'free' is weight-free: nothing to fetch"]


# -- main: fetch ------------------------------------------------------------------------------------------------------


@pytest.fixture
def downloads(monkeypatch, tmp_path):
    """A stand-in for the download: records each call, fails for the names in ``fail``."""
    calls: list[tuple] = []
    fail: dict[str, str] = {}

    def download(name, contract, root, recipe=None):
        calls.append((name, contract, root, recipe))
        if name in fail:
            raise RuntimeError(fail[name])
        return Path(root) / name

    monkeypatch.setattr(cli, "download", download)
    return types.SimpleNamespace(calls=calls, fail=fail)


def test_fetch_downloads_every_learned_backbone_by_its_contract_and_recipe(tmp_path, capsys, downloads):
    root = tmp_path / "w"
    code, out, err = run(capsys, ["fetch", "--root", str(root)])
    assert (code, err) == (0, [])
    assert out == [f"ok  alpha        {root / 'alpha'}", f"ok  beta         {root / 'beta'}"]
    assert downloads.calls == [("alpha", WeightsContract.of(Alpha), root, "docs/alpha.md"),
                               ("beta", WeightsContract.of(Beta), root, None)]
    assert downloads.calls[0][1].revision == REV


def test_one_failed_download_is_reported_and_the_others_go_on(tmp_path, capsys, downloads):
    downloads.fail["alpha"] = "alpha: no network"
    code, out, err = run(capsys, ["fetch", "alpha", "beta", "--root", str(tmp_path)])
    assert code == 1
    assert err == ["error: alpha: no network"] and out == [f"ok  beta         {tmp_path / 'beta'}"]


def test_two_failed_downloads_fail_the_fetch(tmp_path, capsys, downloads):
    downloads.fail.update(alpha="a down", beta="b down")
    code, _, err = run(capsys, ["fetch", "--root", str(tmp_path)])
    assert code == 1 and err == ["error: a down", "error: b down"]


def test_fetching_a_shipped_backbone_is_a_user_error_and_downloads_nothing(tmp_path, capsys, downloads):
    code, _, err = run(capsys, ["fetch", "ship", "--root", str(tmp_path)])
    assert code == 2 and downloads.calls == []
    assert err[0].startswith("error: backbone 'ship': its weights ship inside installed packages")


def test_fetch_without_the_hub_client_names_the_extra_and_downloads_nothing(tmp_path, capsys, downloads,
                                                                            monkeypatch):
    real = extras.importable
    monkeypatch.setattr(extras, "importable", lambda m: m != "huggingface_hub" and real(m))
    code, out, err = run(capsys, ["fetch", "alpha", "--root", str(tmp_path)])
    assert (code, out, downloads.calls) == (2, [], [])
    assert err == [("error: weights fetch needs a package that is not installed (huggingface_hub); "
                    "pip install -e '.[eval]'")]
    assert not (tmp_path / "alpha").exists()

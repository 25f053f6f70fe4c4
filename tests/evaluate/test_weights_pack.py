"""The release's weights pack (huggingface.co/rescuerz/WorldMemBench-weights) as a source of backbone weights:
found from WORLDMEMBENCH_DATASETS_DIR or a ``paths.weights`` laid out like it, listed file by file, verified, used by
the evaluation stage, our own layout winning, links out of the pack refused. The packs here are built in the layout
the model card describes (``models/<upstream name>/``, ``metrics/<metric>/`` relative links made by the downloader,
ViPE as a Hugging Face cache snapshot); the folder names other than ``vipe`` and ``imaging_quality`` are the
inferred ones of ``evaluate/weights_pack.yaml``, or deliberately not in it (the open search)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from evaluate import backbones as bbs
from evaluate.weights import Checksum, FolderState
from evaluate.weights_pack import PACK_ENV, PackLinkError, WeightsPack, discover, load_table
from harness.app.weights import main as weights_main

VIPE_REV = "a" * 40


def _safetensors(p: Path, meta: dict | None = None) -> None:
    """A valid, empty safetensors file (header only): enough for listing and integrity checks, not for loading."""
    p.parent.mkdir(parents=True, exist_ok=True)
    head = json.dumps({"__metadata__": meta or {"stand_in": "1"}}).encode()
    p.write_bytes(struct.pack("<Q", len(head)) + head)


def _link(link: Path, target: str) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, link)


def _vipe_cache(pack: Path) -> str:
    """ViPE's models as a Hugging Face cache (card: models/vipe/huggingface/hub/.../snapshots/...): the snapshot's
    file is a relative link to its blob, as huggingface_hub lays a cache out. The repository name is a stand-in."""
    repo = pack / "models/vipe/huggingface/hub/models--example--vipe-stand-in"
    _safetensors(repo / "blobs" / ("b" * 64))
    _link(repo / "snapshots" / VIPE_REV / "model.safetensors", "../../blobs/" + "b" * 64)
    return f"models/vipe/huggingface/hub/models--example--vipe-stand-in/snapshots/{VIPE_REV}"


def placeholder_pack(pack: Path) -> Path:
    """Header-only files in the pack's layout (no torch needed): DINOv2 and SAM2 under upstream names with the
    downloader's metric links; LAION's two files in two model folders, joined by the aesthetic metric's links; the
    MUSIQ checkpoint under a model folder the table does not name (found by the open search); ViPE's cache."""
    for name, mt in (("dinov2-base", "dinov2"), ("sam2.1-hiera-large", "sam2_video")):
        (pack / "models" / name).mkdir(parents=True)
        (pack / "models" / name / "config.json").write_text(json.dumps({"model_type": mt}))
        _safetensors(pack / "models" / name / "model.safetensors")
    _link(pack / "metrics/environment_visible/dinov2-base", "../../models/dinov2-base")
    _link(pack / "metrics/object_geometry/sam2.1-hiera-large", "../../models/sam2.1-hiera-large")
    for f, model in (("ViT-L-14.pt", "clip"), ("sac+logos+ava1-l14-linearMSE.pth", "laion-aesthetic")):
        (pack / "models" / model).mkdir(parents=True)
        (pack / "models" / model / f).write_bytes(b"\x80\x04N.")  # a pickle of None: passes the integrity check
        _link(pack / "metrics/aesthetic_quality" / f, f"../../models/{model}/{f}")
    (pack / "models/some-unlisted-name/ckpt").mkdir(parents=True)
    (pack / "models/some-unlisted-name/ckpt/musiq_spaq_ckpt-358bb6af.pth").write_bytes(b"\x80\x04N.")
    _vipe_cache(pack)
    return pack


@pytest.fixture
def env(monkeypatch, tmp_path):
    """No weights setting from the machine: an empty user cache, no WORLDMEM_WEIGHTS, no pack map."""
    for k in ("WORLDMEM_WEIGHTS", PACK_ENV, "WORLDMEM_PACK_MAP"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return monkeypatch


def test_table_names_are_data_and_a_user_file_extends_them(tmp_path, env):
    t = load_table()
    assert set(t) >= {"dinov2", "arcface", "sam2", "da3", "vipe", "musiq-spaq", "laion"}
    assert "imaging_quality" in t["musiq-spaq"].metrics and t["vipe"].hf_cache == ("models/vipe/huggingface",)
    extra = tmp_path / "map.yaml"
    extra.write_text("backbones:\n  dinov2:\n    models: [my-dino]\n  da3:\n    replace: true\n    models: [d3]\n")
    env.setenv("WORLDMEM_PACK_MAP", str(extra))
    t = load_table()
    assert t["dinov2"].models[0] == "my-dino" and "dinov2-base" in t["dinov2"].models  # first, then the built-ins
    assert t["da3"].models == ("d3",) and t["da3"].identify == {"file": "config.json", "key": "model_name"}
    extra.write_text("backbones:\n  dinov2:\n    models: [../outside]\n")
    with pytest.raises(ValueError, match=r"dinov2.models: '../outside' must be a relative folder name"):
        load_table()


def test_pack_found_from_the_environment_or_paths_weights(tmp_path, env):
    pack = placeholder_pack(tmp_path / "pack")
    assert discover(None) == (None, "")
    env.setenv(PACK_ENV, str(tmp_path / "nowhere"))
    assert discover(None)[0] is None and "no such folder" in discover(None)[1]
    (tmp_path / "plain" / "videos").mkdir(parents=True)
    env.setenv(PACK_ENV, str(tmp_path / "plain"))  # a datasets folder without the pack's models/: not a pack
    assert discover(None)[0] is None and "holds no weights pack" in discover(None)[1]
    env.setenv(PACK_ENV, str(pack))
    assert discover(None) == (pack, PACK_ENV)
    (tmp_path / "datasets").mkdir()  # the datasets folder holding the pack one level down (an inferred layout)
    os.symlink(pack, tmp_path / "datasets" / "weights")
    (tmp_path / "datasets" / "videos").mkdir()
    env.setenv(PACK_ENV, str(tmp_path / "datasets"))
    assert discover(None) == (tmp_path / "datasets" / "weights", f"{PACK_ENV} (its weights/ folder)")
    os.symlink(pack, tmp_path / "datasets" / "weights2")
    assert discover(None)[0] is None and "several folders are laid out like the weights pack" in discover(None)[1]
    env.delenv(PACK_ENV)
    assert discover(pack) == (pack, "paths.weights")  # paths.weights pointing at a pack root
    # what `hf download` gives: models/ only, no metrics/ links: still a pack (it holds a known upstream name)
    (tmp_path / "hf").mkdir()
    os.rename(pack / "models", tmp_path / "hf" / "models")
    assert discover(tmp_path / "hf") == (tmp_path / "hf", "paths.weights")
    (tmp_path / "ours" / "models").mkdir(parents=True)  # our own layout with a backbone named like nothing known
    assert discover(tmp_path / "ours") == (None, "")


def test_weights_list_names_the_pack_file_of_each_backbone(tmp_path, env, capsys):
    pack = placeholder_pack(tmp_path / "pack")
    env.setenv(PACK_ENV, str(pack))
    assert weights_main(["list"]) == 0
    out = capsys.readouterr().out
    assert f"weights pack: {pack} (from {PACK_ENV}" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line and not line.startswith((" ", "weights"))}
    for name in ("dinov2", "sam2", "musiq-spaq", "laion"):
        assert rows[name].split()[2] == "present", rows[name]
    for name in ("arcface", "da3", "vipe"):
        assert rows[name].split()[2] == "missing", rows[name]
    # the path inside the pack of every file used, through the downloader's links
    assert ("from the pack: metrics/environment_visible/dinov2-base/model.safetensors -> "
            "models/dinov2-base/model.safetensors") in out
    assert "from the pack: metrics/object_geometry/sam2.1-hiera-large/config.json" in out
    assert "from the pack: metrics/aesthetic_quality/ViT-L-14.pt -> models/clip/ViT-L-14.pt" in out
    assert ("from the pack: metrics/aesthetic_quality/sac+logos+ava1-l14-linearMSE.pth -> "
            "models/laion-aesthetic/sac+logos+ava1-l14-linearMSE.pth") in out
    assert "from the pack: models/some-unlisted-name/ckpt/musiq_spaq_ckpt-358bb6af.pth" in out
    assert "pack: found via search" in out  # the musiq folder is in no table entry
    assert "pack: the pack does not hold det_10g.onnx, w600k_r50.onnx" in out
    assert f"Hugging Face cache models/vipe/huggingface/hub/models--example--vipe-stand-in/snapshots/{VIPE_REV}" in out
    assert f"HF_HOME={pack / 'models/vipe/huggingface'}" in out


def test_generic_files_of_another_model_are_not_taken(tmp_path, env):
    """DINOv2, SAM2 and DA3 all save config.json + model.safetensors: a folder is taken for a backbone only when
    its config says it is that model, even when the table names the folder."""
    pack = tmp_path / "pack"
    (pack / "models/dinov2-base").mkdir(parents=True)
    (pack / "models/dinov2-base/config.json").write_text(json.dumps({"model_type": "sam2_video"}))
    _safetensors(pack / "models/dinov2-base/model.safetensors")
    (pack / "metrics").mkdir()
    p = WeightsPack(pack)
    files = ("config.json", "model.safetensors")
    assert p.locate("dinov2", files) is None
    assert p.locate("sam2", files).dir == pack / "models/dinov2-base"  # the open search, identified as SAM2
    assert p.locate("da3", files) is None  # no model_name key
    st = bbs.status(bbs.spec("dinov2"), tmp_path / "own", pack=p)
    assert st.state is FolderState.MISSING and "the pack does not hold" in st.pack_note
    assert "models/dinov2-base/ has them, but its config.json is not model_type=dinov2: another model" in st.pack_note


def test_our_own_layout_wins_and_verify_checks_the_pack_files(tmp_path, env, capsys):
    pack = placeholder_pack(tmp_path / "pack")
    own = tmp_path / "own"
    (own / "dinov2").mkdir(parents=True)
    (own / "dinov2/config.json").write_text(json.dumps({"model_type": "dinov2"}))
    _safetensors(own / "dinov2/model.safetensors", {"ours": "1"})
    p = WeightsPack(pack)
    st = bbs.status(bbs.spec("dinov2"), own, pack=p)
    assert st.source == "own" and st.dir == own / "dinov2"
    assert "ours wins over the pack's metrics/environment_visible/dinov2-base/" in st.pack_note
    sam = bbs.status(bbs.spec("sam2"), own, hash_files=True, pack=p)
    assert sam.source == "pack" and sam.checksum is Checksum.UNPINNED and set(sam.sha256) == {"config.json",
                                                                                                "model.safetensors"}
    env.setenv(PACK_ENV, str(pack))
    assert weights_main(["verify", "dinov2", "sam2", "laion", "musiq-spaq", "--root", str(own)]) == 0
    capsys.readouterr()
    # a truncated file in the pack (behind the metric link) fails verify, naming the pack's folder and the file
    target = pack / "models/sam2.1-hiera-large/model.safetensors"
    target.write_bytes(target.read_bytes()[:5])
    assert weights_main(["verify", "sam2", "--root", str(own)]) == 1
    err = capsys.readouterr().err
    assert "error: sam2:" in err and "sam2.1-hiera-large/model.safetensors: truncated" in err


def test_replacing_a_pack_file_recomputes_and_a_run_without_pack_keeps_its_hashes(tmp_path, env):
    """The evaluation's weights fingerprint follows the files a backbone loads: a changed file in the pack changes
    it; our own folder's fingerprint is the per-file (name, size, mtime) list it was before packs existed, so runs
    made without a pack are not recomputed."""
    pack = placeholder_pack(tmp_path / "pack")
    p = WeightsPack(pack)
    own = tmp_path / "own"
    before = bbs.weights_fingerprint("sam2", own, p)
    assert before[0] == "pack" and [f[0] for f in before[1]] == ["config.json", "model.safetensors"]
    _safetensors(pack / "models/sam2.1-hiera-large/model.safetensors", {"replaced": "yes"})
    assert bbs.weights_fingerprint("sam2", own, p) != before
    (own / "sam2").mkdir(parents=True)
    (own / "sam2/config.json").write_text("{}")
    st = (own / "sam2/config.json").stat()
    assert bbs.weights_fingerprint("sam2", own, None) == [("config.json", st.st_size, st.st_mtime_ns)]
    assert bbs.weights_fingerprint("da3", own, None) == "missing"


def test_missing_weights_say_how_to_get_the_pack_or_what_it_lacks(tmp_path, env):
    from evaluate.perception.base import BackboneUnavailable

    with pytest.raises(BackboneUnavailable) as exc:  # no pack: the fetch command, and how to get the pack
        bbs.BackboneSet(types_ns(device="cpu"), tmp_path / "own").get("da3", "depth")
    msg = str(exc.value)
    assert "python -m harness weights fetch da3" in msg and "hf download rescuerz/WorldMemBench-weights" in msg
    assert f"export {PACK_ENV}=DIR" in msg
    pack = placeholder_pack(tmp_path / "pack")
    with pytest.raises(BackboneUnavailable) as exc:  # a pack without it: what the pack lacks
        bbs.BackboneSet(types_ns(device="cpu"), tmp_path / "own", pack=WeightsPack(pack)).get("da3", "depth")
    assert f"weights pack {pack}: the pack does not hold config.json, model.safetensors" in str(exc.value)


def test_a_link_out_of_the_pack_is_refused(tmp_path, env, capsys):
    pack = placeholder_pack(tmp_path / "pack")
    outside = tmp_path / "elsewhere" / "buffalo_l"
    outside.mkdir(parents=True)
    for f in ("det_10g.onnx", "w600k_r50.onnx"):
        (outside / f).write_bytes(b"onnx")
    _link(pack / "metrics/human_identity/buffalo_l", str(outside))  # absolute, out of the pack root
    _link(pack / "metrics/aesthetic_quality/extra.pt", "../../../elsewhere/x.pt")  # relative, out of the root
    env.setenv(PACK_ENV, str(pack))
    assert weights_main(["list"]) == 2
    cap = capsys.readouterr()
    assert "arcface" in cap.out and "refused" in cap.out
    assert (f"error: arcface: weights pack {pack}: metrics/human_identity/buffalo_l is a link to {outside}, outside "
            "the pack root; refused") in cap.err
    assert "error: laion:" in cap.err and "metrics/aesthetic_quality/extra.pt" in cap.err
    assert "dinov2" in cap.out  # the other backbones are still listed
    p = WeightsPack(pack)
    with pytest.raises(PackLinkError, match="outside the pack root"):
        bbs.BackboneSet(None, tmp_path / "own", pack=p).check_pack(["dinov2", "arcface"])
    bbs.BackboneSet(None, tmp_path / "own", pack=p).check_pack(["dinov2", "pixel"])  # not using it: fine
    (tmp_path / "own/arcface").mkdir(parents=True)  # our own folder wins: the pack's bad link is not read
    for f in ("det_10g.onnx", "w600k_r50.onnx"):
        (tmp_path / "own/arcface" / f).write_bytes(b"onnx")
    st = bbs.status(bbs.spec("arcface"), tmp_path / "own", pack=p)
    assert st.source == "own" and "link out of the pack" in st.pack_note
    # a chain of links that leaves the pack and comes back is refused too (each hop must stay inside)
    os.symlink(pack / "models/dinov2-base", tmp_path / "elsewhere" / "back-in")
    os.symlink(tmp_path / "elsewhere" / "back-in", pack / "models/hop")
    _link(pack / "metrics/environment_visible/via-hop", "../../models/hop")
    assert not p.inside(pack / "metrics/environment_visible/via-hop")
    assert p.inside(pack / "metrics/environment_visible/dinov2-base")
    # the open search never follows the link out either (the files it holds are not "found")
    assert p.locate("some-other", ("det_10g.onnx", "w600k_r50.onnx")) is None


def test_vipe_gets_the_packs_hugging_face_cache(tmp_path, env):
    """The pack holds ViPE's models, not its command: our vipe.json still names the command, and its run sees the
    pack's cache as HF_HOME, offline (vipe.json's own env wins)."""
    pytest.importorskip("av")
    import numpy as np

    from evaluate.perception.tiny import VIPE_STANDIN, write_vipe_standin

    pack = placeholder_pack(tmp_path / "pack")
    own = tmp_path / "own"
    record = tmp_path / "seen.json"
    script = VIPE_STANDIN + (f"\nimport json\nopen({str(record)!r}, 'w').write(json.dumps("
                             "{k: os.environ.get(k) for k in ('HF_HOME', 'HF_HUB_OFFLINE')}))\n")
    write_vipe_standin(own / "vipe", script)
    bs = bbs.BackboneSet(types_ns(device="cpu"), own, pack=WeightsPack(pack))
    est = bs.get("vipe", "pose")
    frames = np.zeros((3, 32, 48, 3), np.uint8)
    est.estimate(frames, [0, 1, 2], np.eye(3), "adjacent")
    assert json.loads(record.read_text()) == {"HF_HOME": str(pack / "models/vipe/huggingface"),
                                              "HF_HUB_OFFLINE": "1"}
    assert bs.provenance()["vipe"]["pack_env"]["HF_HOME"] == str(pack / "models/vipe/huggingface")
    write_vipe_standin(own / "vipe", script, env={"HF_HOME": str(tmp_path / "mine")})
    bbs.BackboneSet(types_ns(device="cpu"), own, pack=WeightsPack(pack)).get("vipe", "pose").estimate(
        frames, [0, 1, 2], np.eye(3), "adjacent")
    assert json.loads(record.read_text())["HF_HOME"] == str(tmp_path / "mine")


def types_ns(**kw):
    import types

    return types.SimpleNamespace(backbone_options={}, **kw)


# -- tiny real-class weights in the pack's layout, used by the evaluation stage -------------------------------------


def real_pack(pack: Path) -> Path:
    """Tiny random-weight models of the real classes (evaluate/perception/tiny.py) in the pack's layout: each under
    its (inferred) upstream name in models/, the downloader's relative links in metrics/ (LAION's CLIP and MLP in two
    model folders, joined by the aesthetic metric's links), ViPE's Hugging Face cache."""
    from evaluate.perception import tiny

    models = pack / "models"
    for name, upstream in (("dinov2", "dinov2-base"), ("arcface", "buffalo_l"), ("sam2", "sam2.1-hiera-large")):
        tiny.write_tiny_weights(models, [name])
        os.rename(models / name, models / upstream)
    tiny.write_tiny_weights(pack / "tmp", ["laion"])
    for f, model in (("ViT-L-14.pt", "clip"), ("sac+logos+ava1-l14-linearMSE.pth", "laion-aesthetic")):
        (models / model).mkdir()
        os.rename(pack / "tmp/laion" / f, models / model / f)
        _link(pack / "metrics/aesthetic_quality" / f, f"../../models/{model}/{f}")
    (pack / "tmp/laion").rmdir()
    (pack / "tmp").rmdir()
    _link(pack / "metrics/environment_visible/dinov2-base", "../../models/dinov2-base")
    _link(pack / "metrics/human_identity/buffalo_l", "../../models/buffalo_l")
    _link(pack / "metrics/object_geometry/sam2.1-hiera-large", "../../models/sam2.1-hiera-large")
    _vipe_cache(pack)
    return pack


@pytest.mark.slow
def test_stage_evaluate_uses_the_pack_with_no_other_setting(tmp_path):
    """The issue's check: a weights folder laid out like the pack is found by `weights list` and used by
    `stage=evaluate` with WORLDMEMBENCH_DATASETS_DIR as the only weights setting (the machine's own settings are
    neutralised: an empty user cache, WORLDMEM_WEIGHTS empty); then a link out of the pack stops the evaluation."""
    pytest.importorskip("transformers")
    for mod in ("onnxruntime", "insightface", "pyiqa", "clip"):
        pytest.importorskip(mod)
    from tests.support import run_cli

    pack = real_pack(tmp_path / "pack")
    work = tmp_path / "work"
    work.mkdir()
    machine = {"WORLDMEM_WEIGHTS": "", "XDG_CACHE_HOME": str(tmp_path / "cache"), "WORLDMEM_PACK_MAP": ""}
    r = run_cli(["debug=default", "evaluate=off"], work, env=machine)
    assert r.returncode == 0, r.stderr[-2000:]

    r = run_cli(["weights", "list"], work, env={**machine, PACK_ENV: str(pack)})
    assert r.returncode == 0, r.stderr
    assert f"weights pack: {pack} (from {PACK_ENV}" in r.stdout
    for line in ("metrics/environment_visible/dinov2-base/model.safetensors -> models/dinov2-base/model.safetensors",
                 "metrics/human_identity/buffalo_l/det_10g.onnx -> models/buffalo_l/det_10g.onnx",
                 "metrics/object_geometry/sam2.1-hiera-large/config.json",
                 "metrics/aesthetic_quality/ViT-L-14.pt -> models/clip/ViT-L-14.pt"):
        assert f"from the pack: {line}" in r.stdout, (line, r.stdout)

    r = run_cli(["stage=evaluate", "debug=default"], work, env={**machine, PACK_ENV: str(pack)}, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    (metrics,) = (work / "outputs" / "debug").rglob("metrics.json")
    res = json.loads(metrics.read_text())
    status = {k: (m["status"], m.get("reason")) for k, m in res["metrics"].items()}
    for base, backbone in (("environment.visible", "dinov2"), ("quality.aesthetic", "laion")):
        keys = [k for k in status if k.startswith(base + "[") and backbone in k.lower()]
        assert keys and all(status[k][0] == "computed" for k in keys), (base, {k: status[k] for k in keys})
    dino, laion = res["backbones"]["dinov2"], res["backbones"]["laion"]
    assert dino["source"] == "pack" and dino["weights_dir"] == str(pack / "metrics/environment_visible/dinov2-base")
    assert dino["pack_files"]["model.safetensors"].endswith("-> models/dinov2-base/model.safetensors")
    assert laion["weights_dir"] == str(pack / "metrics/aesthetic_quality")
    assert len(laion["files"]["ViT-L-14.pt"]) == 64  # hashed through the link
    # SAM2 and ArcFace (not used by the debug run's environment case) load from the pack with the real classes
    bs = bbs.BackboneSet(types_ns(device="cpu"), tmp_path / "cache", pack=WeightsPack(pack))
    assert type(bs.get("arcface", "face").inner).__name__ == "ArcFaceEmbedder"
    assert type(bs.get("sam2", "tracker").inner).__name__ == "Sam2Tracker"
    assert bs.provenance()["arcface"]["weights_dir"] == str(pack / "metrics/human_identity/buffalo_l")

    # a link out of the pack where DINOv2 would be read: refused before anything is written, exit code 2
    before = metrics.read_bytes()
    os.remove(pack / "metrics/environment_visible/dinov2-base")
    os.symlink(pack / "models/dinov2-base", tmp_path / "outside-dinov2")
    _link(pack / "metrics/environment_visible/dinov2-base", str(tmp_path / "outside-dinov2"))
    r = run_cli(["stage=evaluate", "debug=default", "overwrite=true"], work, env={**machine, PACK_ENV: str(pack)})
    assert r.returncode == 2, r.stderr[-2000:]
    assert "metrics/environment_visible/dinov2-base is a link to" in r.stderr and "outside the pack root" in r.stderr
    assert "Traceback" not in r.stderr and metrics.read_bytes() == before


# -- issue 44: link loops, ONNX integrity ------------------------------------------------------------------------------
def test_a_link_loop_is_refused_where_a_backbone_reads_and_ignored_elsewhere(tmp_path, env, capsys):
    """Before: a link loop anywhere under ``models/`` or ``metrics/`` made ``weights list`` and ``verify`` end with
    an OSError traceback (ELOOP). After: a loop where no backbone reads is ignored; one in a folder a backbone reads
    refuses that backbone with the loop named (exit code 2), the others are listed."""
    pack = placeholder_pack(tmp_path / "pack")
    os.symlink("self-loop", pack / "models/self-loop")  # a link to itself
    os.symlink("loop-b", pack / "models/loop-a")  # two links to each other
    os.symlink("loop-a", pack / "models/loop-b")
    os.symlink("../metrics", pack / "metrics/aesthetic_quality/up")  # a folder loop through a real folder: not a loop
    env.setenv(PACK_ENV, str(pack))
    assert weights_main(["list"]) == 0
    out = capsys.readouterr().out
    assert "dinov2" in out and "from the pack: metrics/environment_visible/dinov2-base/model.safetensors" in out
    p = WeightsPack(pack)
    p.index()
    assert set(p.broken) == {"models/self-loop", "models/loop-a", "models/loop-b"} and "link loop" in p.broken[
        "models/self-loop"]
    assert p.locate("dinov2", ("config.json", "model.safetensors")) is not None
    # a loop in the folder DINOv2 reads (the table's models/dinov2-base): refused, named, the rest still listed
    (pack / "models/dinov2-base/model.safetensors").unlink()
    os.symlink("model.safetensors", pack / "models/dinov2-base/model.safetensors")
    assert weights_main(["verify", "dinov2", "sam2"]) == 2
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err and "dinov2" in cap.out and "refused" in cap.out
    assert "dinov2-base/model.safetensors is a link loop" in cap.err and "Replace it with the file" in cap.err
    with pytest.raises(PackLinkError, match="is a link loop"):
        WeightsPack(pack).locate("dinov2", ("config.json", "model.safetensors"))
    assert WeightsPack(pack).locate("other", ("config.json", "model.safetensors")).dir.name != "dinov2-base"


def _onnx_model(path: Path) -> bytes:
    """A real ONNX model (one Identity node) saved by the onnx package itself."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y]),
                              producer_name="worldmem-test", doc_string="d" * 300)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path.read_bytes()


@pytest.mark.parametrize("damage, needle", [
    ("truncate", "truncated"), ("garbage", "not an ONNX model"), ("no graph", "no graph"), (None, None)])
def test_weights_verify_checks_onnx_files(tmp_path, env, capsys, damage, needle):
    """Before: ``weights verify arcface`` said "present unpinned" for ONNX files of any content (four bytes, a cut
    file). After: a cut file, bytes that are no protobuf, and a protobuf without a graph are corrupt (exit 1)."""
    onnx = pytest.importorskip("onnx")
    pack = placeholder_pack(tmp_path / "pack")
    folder = pack / "models/buffalo_l"
    for f in ("det_10g.onnx", "w600k_r50.onnx"):
        good = _onnx_model(folder / f)
    target = folder / "w600k_r50.onnx"
    if damage == "truncate":
        target.write_bytes(good[:-40])
    elif damage == "garbage":
        target.write_bytes(b"onnx weights, honest")
    elif damage == "no graph":
        target.write_bytes(onnx.ModelProto(ir_version=8).SerializeToString())
    env.setenv(PACK_ENV, str(pack))
    code = weights_main(["verify", "arcface"])
    cap = capsys.readouterr()
    row = next(line for line in cap.out.splitlines() if line.startswith("arcface"))
    if damage is None:  # the check can pass: the model the onnx package wrote
        assert code == 0 and "unpinned" in row, cap.out + cap.err
        onnx.checker.check_model(str(target))
    else:
        assert code == 1 and "corrupt:w600k_r50.onnx" in row and needle in cap.err, cap.out + cap.err

"""Learned metrics on real pretrained weights, offline (issue 23).

Every paper backbone is tested elsewhere on tiny random weights: that checks plumbing, not meaning. Here two real
pretrained models that ship inside installable packages score real content (``evaluate/perception/packaged.py``):
dlib's ResNet face descriptor (``human.identity[dlib-resnet+...]``) and BRISQUE with OpenCV's LIVE-trained model
(``quality.imaging[brisque]``). Each validity check is a function that returns its failures; it runs on the real
backbone, which must pass, and on the tiny random-weight model of the same role (``evaluate/perception/tiny.py``:
ArcFace's graphs, MUSIQ), which must fail. A check that a random model passes would be measuring plumbing.

Faces (all ship with installed packages, nothing is downloaded):

* scikit-image's ``astronaut`` (Eileen Collins, NASA, public domain): the demo's human case.
* matplotlib's ``sample_data/grace_hopper.jpg`` (Grace Hopper, U.S. Navy portrait, public domain): the "different
  person". It is a fair negative: another real adult face, frontal, in colour, pasted into the astronaut's face
  region of the conditioning image (located with OpenCV's Haar cascade, not with the detector under test; scaled to
  the same box, feathered ellipse), so a reference-model run of it differs from the original only in whose face
  it shows, with the same camera path, person box, framing and rendering. dlib's own criterion calls them
  different people (Euclidean distance 0.70 > its 0.6 threshold).
* "forgotten": the same face region filled with uniform noise (what a model that re-invents the content shows).

On the demo's default 480 x 832 canvas (and any wide one) the cover crop cuts the astronaut's forehead and dlib's
HOG detector finds no face, so the runs here (and ``debug=real_weights``) use a 256 x 256 canvas.

Without dlib, face-recognition-models or Debian's opencv-data these tests skip with the install command; with
``WORLDMEM_REQUIRE_REAL_WEIGHTS=1`` (CI) they fail instead.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from evaluate.perception.packaged import EXTRA_INSTALL, module_available
from tests.support import ROOT, edited_item_copy, run_cli, stored

REQUIRE = os.environ.get("WORLDMEM_REQUIRE_REAL_WEIGHTS") == "1"


def _need(ok: bool, what: str) -> None:
    if not ok:
        (pytest.fail if REQUIRE else pytest.skip)(f"{what} not installed (WORLDMEM_REQUIRE_REAL_WEIGHTS="
                                                  f"{os.environ.get('WORLDMEM_REQUIRE_REAL_WEIGHTS')})")


def need_dlib() -> None:
    from evaluate.perception.dlib_face import DESCRIPTOR, LANDMARKS_5

    _need(module_available("dlib") and DESCRIPTOR.locate() is not None and LANDMARKS_5.locate() is not None,
          f"dlib / face-recognition-models ({EXTRA_INSTALL})")


def need_brisque() -> None:
    from evaluate.perception.brisque import MODEL, RANGE

    _need(MODEL.locate() is not None and RANGE.locate() is not None, "Debian opencv-data (apt-get install opencv-data)")


# -- face images -------------------------------------------------------------------------------------------------


def astronaut() -> np.ndarray:
    from skimage import data

    return data.astronaut()


def grace_hopper() -> np.ndarray:
    """(600, 512, 3) uint8 RGB: matplotlib's bundled portrait of Grace Hopper."""
    import cv2
    import matplotlib

    p = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    return np.ascontiguousarray(cv2.imread(str(p))[..., ::-1])


def haar_face(img: np.ndarray) -> tuple[int, int, int, int]:
    """The largest frontal face (x, y, w, h) by OpenCV's bundled Haar cascade: independent of dlib."""
    import cv2

    c = cv2.CascadeClassifier(cv2.data.haarcascades + "haarcascade_frontalface_default.xml")
    faces = c.detectMultiScale(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY), 1.1, 5, minSize=(60, 60))
    assert len(faces), "no face found by the Haar cascade"
    return tuple(int(v) for v in max(faces, key=lambda f: f[2] * f[3]))


def face_ellipse(img: np.ndarray) -> np.ndarray:
    """(H, W, 1) float32 feathered ellipse over the face of ``img`` (1 inside)."""
    import cv2

    x, y, w, h = haar_face(img)
    m = np.zeros(img.shape[:2], np.float32)
    cv2.ellipse(m, (x + w // 2, y + h // 2 + 4), (int(w * 0.46), int(h * 0.62)), 0, 0, 360, 1.0, -1)
    return cv2.GaussianBlur(m, (0, 0), 4)[..., None]


def paste_face(dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    """``dst`` with ``src``'s face scaled onto ``dst``'s face box and blended in with a feathered ellipse."""
    import cv2

    (ax, ay, aw, _), (gx, gy, gw, _) = haar_face(dst), haar_face(src)
    s = aw / gw
    warped = cv2.warpAffine(src, np.float32([[s, 0, ax - s * gx], [0, s, ay - s * gy]]), dst.shape[1::-1],
                            flags=cv2.INTER_AREA)
    m = face_ellipse(dst)
    return (warped * m + dst * (1 - m)).round().astype(np.uint8)


def noise_face(dst: np.ndarray, seed: int = 0) -> np.ndarray:
    m = face_ellipse(dst)
    noise = np.random.default_rng(seed).integers(0, 256, dst.shape)
    return (noise * m + dst * (1 - m)).round().astype(np.uint8)


def shift(fr: np.ndarray, dx: int = 3, dy: int = 2) -> np.ndarray:
    """Frames translated by (dx, dy) pixels, borders replicated."""
    import cv2

    M = np.float32([[1, 0, dx], [0, 1, dy]])
    return np.stack([cv2.warpAffine(f, M, f.shape[1::-1], borderMode=cv2.BORDER_REPLICATE) for f in fr])


def brighter(fr: np.ndarray, by: int = 20) -> np.ndarray:
    return np.clip(fr.astype(np.int16) + by, 0, 255).astype(np.uint8)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# -- dlib-resnet on images ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dlib_face():
    need_dlib()
    from evaluate.perception.dlib_face import DlibResnetEmbedder

    return DlibResnetEmbedder()


def test_dlib_embedder_follows_the_face_contract(dlib_face):
    img = astronaut()
    masks = np.ones((3, 512, 512), bool)
    masks[1] = False  # no target in frame 1: the astronaut's face is not its observation
    masks[2, :, 300:] = False  # the face's centre (x ~ 220) is inside
    r = dlib_face.embed(np.stack([img] * 3), masks)
    assert r.valid.tolist() == [True, False, True]
    assert r.embeddings.shape == (3, 128) and r.embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(r.embeddings[[0, 2]], axis=1), 1.0, atol=1e-5)
    assert not r.embeddings[1].any() and np.isnan(r.boxes[1]).all()
    x, y, w, h = haar_face(img)  # the box dlib found is the face OpenCV's cascade finds
    cx, cy = (r.boxes[0, 0] + r.boxes[0, 2]) / 2, (r.boxes[0, 1] + r.boxes[0, 3]) / 2
    assert abs(cx - (x + w / 2)) < w / 4 and abs(cy - (y + h / 2)) < h / 4, (r.boxes[0], (x, y, w, h))
    assert r.info["detector"] == "dlib-hog" and r.info["scores"][0] > 0.5
    with pytest.raises(ValueError, match=r"dlib-resnet: frames \(N, H, W, 3\) uint8 RGB"):
        dlib_face.embed(img[None].astype(np.float32), masks[:1])
    with pytest.raises(ValueError, match="masks"):
        dlib_face.embed(img[None], masks[:1, :10])
    prov = dlib_face.provenance()
    assert prov["files"]["dlib_face_recognition_resnet_model_v1.dat"]["checksum"] == "ok"
    assert prov["files"]["frontal_face_detector (compiled into dlib)"]["checksum"] == "ok"
    assert all(f["licence"] for f in prov["files"].values()) and prov["versions"]["face-recognition-models"]


def test_dlib_options_are_checked_with_the_field_named():
    need_dlib()
    from evaluate.perception.dlib_face import DlibResnetEmbedder
    from evaluate.stage import EvalConfig

    cfg = EvalConfig.from_dict({"face": ["dlib-resnet"], "backbone_options": {"dlib-resnet": {"upsample": 2}}})
    assert DlibResnetEmbedder.from_settings(cfg).settings()["upsample"] == 2
    for opts, msg in (({"upsampel": 2}, r"dlib-resnet\.upsampel: unknown option; use one of upsample"),
                      ({"landmarks": 7}, r"dlib-resnet\.landmarks=7: use 5"),
                      ({"detector": "mtcnn"}, r"dlib-resnet\.detector='mtcnn': use 'hog'")):
        with pytest.raises(ValueError, match=msg):
            DlibResnetEmbedder.from_settings(EvalConfig.from_dict({"backbone_options": {"dlib-resnet": opts}}))


def test_dlib_separates_two_people_and_keeps_one_under_nuisances(dlib_face):
    """Image level, before any video: same face shifted / brighter / mirrored stays far closer than another
    person. An embedding of the wrong crop, in the wrong colour order or unnormalised would not."""
    a, g = astronaut(), grace_hopper()

    def e(img):
        r = dlib_face.embed(img[None], np.ones((1,) + img.shape[:2], bool))
        assert r.valid[0]
        return r.embeddings[0]

    ea = e(a)
    same = [_cos(ea, e(v)) for v in (shift(a[None], 7, 5)[0], brighter(a[None], 30)[0], a[:, ::-1].copy())]
    other = _cos(ea, e(g))
    assert min(same) > 0.98, same
    assert other < 0.92, other
    assert _cos(ea, e(paste_face(a, g))) < 0.92  # the pasted face is the other person to dlib, too


# -- BRISQUE ------------------------------------------------------------------------------------------------------


def _quality_images() -> dict[str, np.ndarray]:
    from skimage import data

    from harness.imaging import resize_cover_crop

    return {n: resize_cover_crop(getattr(data, n)(), (256, 256)) for n in ("astronaut", "coffee", "chelsea", "rocket")}


def blur(im: np.ndarray, sigma: float) -> np.ndarray:
    import cv2

    return cv2.GaussianBlur(im, (0, 0), sigma)


def noise(im: np.ndarray, sigma: float) -> np.ndarray:
    return np.clip(im + np.random.default_rng(0).normal(0, sigma, im.shape), 0, 255).astype(np.uint8)


def jpeg(im: np.ndarray, q: int) -> np.ndarray:
    import cv2

    _, buf = cv2.imencode(".jpg", np.ascontiguousarray(im[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, q])
    return np.ascontiguousarray(cv2.imdecode(buf, cv2.IMREAD_COLOR)[..., ::-1])


#: degradation -> three strengths, mildest first
DEGRADATIONS = {"blur": (blur, (1, 2, 4)), "noise": (noise, (10, 25, 50)), "jpeg": (jpeg, (30, 15, 5))}
#: a step must lower the [0, 1] quality by at least this much (1 BRISQUE point)
QUALITY_STEP = 0.01


def degradation_table(score) -> dict[str, dict[str, list[float]]]:
    """{image: {degradation: [clean, mild, medium, strong]}} of ``score((N, H, W, 3) uint8) -> (N,)``."""
    out = {}
    for name, im in _quality_images().items():
        out[name] = {d: [float(v) for v in score(np.stack([im] + [f(im, s) for s in levels]))]
                     for d, (f, levels) in DEGRADATIONS.items()}
    return out


def check_monotone(table) -> list[str]:
    """Failures of: every degradation lowers the quality at each of its three strengths by >= QUALITY_STEP."""
    bad = []
    for name, rows in table.items():
        for d, v in rows.items():
            if not all(a - b >= QUALITY_STEP for a, b in zip(v, v[1:])):
                bad.append(f"{name}/{d}: {np.round(v, 4).tolist()}")
    return bad


@pytest.fixture(scope="module")
def brisque():
    need_brisque()
    from evaluate.perception.brisque import Brisque

    return Brisque()


def _random_musiq(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("pyiqa")
    from evaluate.perception.iqa import MusiqSpaq
    from evaluate.perception.tiny import write_tiny_weights

    root = tmp_path_factory.mktemp("tiny-musiq")
    return MusiqSpaq.load(write_tiny_weights(root, ["musiq-spaq"])["musiq-spaq"], "cpu")


@pytest.mark.slow
@pytest.mark.parametrize("weights", ["real", "random"])
def test_image_quality_worsens_monotonically_under_blur_noise_and_jpeg(weights, brisque, tmp_path_factory):
    """Real BRISQUE: each of blur (sigma 1, 2, 4), Gaussian noise (sigma 10, 25, 50) and JPEG (quality 30, 15, 5)
    lowers quality.imaging at every strength on four natural images. The same check on the random-weight MUSIQ
    (the imaging role's tiny model) fails."""
    scorer = brisque if weights == "real" else _random_musiq(tmp_path_factory)
    table = degradation_table(scorer.score)
    bad = check_monotone(table)
    if weights == "real":
        assert not bad, bad
        raw = {n: {d: [round(100 * (1 - v), 1) for v in r] for d, r in rows.items()} for n, rows in table.items()}
        print("BRISQUE", json.dumps(raw))
    else:
        assert bad, f"random-weight MUSIQ passed the monotonicity check: {table}"


def test_brisque_direction_range_and_errors(brisque):
    im = _quality_images()["astronaut"]
    fr = np.stack([im, blur(im, 4)])
    raw, q = brisque.brisque(fr), brisque.score(fr)
    assert raw.dtype == np.float64 and q.shape == (2,)
    np.testing.assert_allclose(q, 1 - raw / 100)  # the documented mapping: higher is better
    assert 0 <= raw[0] < raw[1] <= 100 and 0 <= q[1] < q[0] <= 1
    with pytest.raises(ValueError, match=r"brisque: a frame must be \(H, W, 3\) uint8 RGB"):
        brisque.score(fr.astype(np.float32))
    with pytest.raises(ValueError, match="H, W >= 16"):
        brisque.score(fr[:, :8, :8])
    prov = brisque.provenance()
    assert {f["checksum"] for f in prov["files"].values()} == {"ok"} and "higher is better" in prov["direction"]


CONTRIB = os.environ.get("WORLDMEM_CV2_CONTRIB")  # a `pip install --target` folder of opencv-contrib-python-headless

_REF_SCRIPT = """
import json, sys
import numpy as np, cv2
imgs = np.load(sys.argv[1])
q = cv2.quality.QualityBRISQUE_create(sys.argv[2], sys.argv[3])
out = {"scores": [], "features": []}
for im in imgs:
    bgr = np.ascontiguousarray(im[..., ::-1])
    out["scores"].append(float(q.compute(bgr)[0]))
    out["features"].append(np.asarray(cv2.quality.QualityBRISQUE_computeFeatures(bgr)).ravel().tolist())
print(json.dumps(out))
"""


@pytest.mark.skipif(not CONTRIB and not REQUIRE, reason="set WORLDMEM_CV2_CONTRIB to a `pip install --target` "
                    "folder of opencv-contrib-python-headless (.ci/run does)")
def test_brisque_agrees_with_opencvs_quality_module(brisque, tmp_path):
    """Our features and scores against ``cv2.quality.QualityBRISQUE`` run from an isolated copy of the contrib
    build (never importable next to the core's cv2): clean, blurred, noisy and compressed frames of two sizes."""
    import subprocess
    import sys

    from evaluate.perception.brisque import MODEL, RANGE, brisque_features

    assert CONTRIB, "WORLDMEM_CV2_CONTRIB is not set"
    ims = list(_quality_images().values())
    a = ims[0]
    frames = ims + [blur(a, 2), noise(a, 25), jpeg(a, 15)]
    from skimage import data

    from harness.imaging import resize_cover_crop

    wide = [resize_cover_crop(data.rocket(), (192, 320))]
    for group in (frames, wide):
        np.save(tmp_path / "imgs.npy", np.stack(group))
        r = subprocess.run([sys.executable, "-c", _REF_SCRIPT, str(tmp_path / "imgs.npy"), str(MODEL.locate()),
                            str(RANGE.locate())], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": CONTRIB})
        assert r.returncode == 0, r.stderr[-2000:]
        ref = json.loads(r.stdout)
        # uncompressed frames agree to float32 rounding (features 1e-5, scores 0.01); on flat JPEG blocks the rounding
        # of two float32 pipelines decides which local variances come out slightly negative: up to 2e-4 and 0.1
        for im, f in zip(group, ref["features"]):
            np.testing.assert_allclose(brisque_features(im), f, atol=2e-4, rtol=1e-5)
        np.testing.assert_allclose(brisque.brisque(np.stack(group)), ref["scores"], atol=0.1)
        clean = np.stack(group[:4]) if group is frames else np.stack(group)
        np.testing.assert_allclose(brisque.brisque(clean), ref["scores"][: len(clean)], atol=0.01)


# -- identity on reference-model runs of the demo's human case ---------------------------------------------------

CANVAS = ["model.height=256", "model.width=256", "model.num_frames=289", "progress=false", "evaluate=off",
          "context=fullkv", "trajectory=lrlr"]
ITEM = "reference/fullkv/seed-1/lrlr/human_astronaut"
CONDITIONS = ("remembered", "replaced", "forgotten", "shifted", "brighter")


def _case_folder(root: Path, image: np.ndarray) -> Path:
    """A case folder holding the demo's human case with another conditioning image (same id, box and prompt)."""
    import cv2
    import yaml

    root.mkdir(parents=True)
    cv2.imwrite(str(root / "image.png"), image[..., ::-1])
    src = yaml.safe_load((ROOT / "harness" / "data" / "demo_cases" / "human_astronaut.yaml").read_text())
    src.update(image="image.png", trajectories=["lrlr"])
    (root / "human_astronaut.yaml").write_text(yaml.safe_dump(src))
    return root


def build_identity_items(root: Path) -> dict[str, Path]:
    """The five conditions as finished items of the reference model (FullKV, LRLR, 256 x 256, 289 frames): the run
    itself (remembered), and copies whose revisit windows R_k show the other person's face, a noise-filled face
    region (both from a run of the modified conditioning image: same path, same rendering), or the same frames
    shifted by (3, 2) px or 20 levels brighter."""
    from harness.video import read_frames

    runs = {}
    for name, image in (("remembered", None), ("replaced", paste_face(astronaut(), grace_hopper())),
                        ("forgotten", noise_face(astronaut()))):
        args = [*CANVAS, f"run={name}"]
        if image is None:
            args.append("cases.include=[human_astronaut]")
        else:
            args += ["cases=folder", f"cases.source={_case_folder(root / f'case-{name}', image)}"]
        r = run_cli(args, root)
        assert r.returncode == 0, r.stderr[-3000:]
        runs[name] = root / "outputs" / name / ITEM
    src = runs["remembered"]

    def windows(path):
        return [f for a, b in path.revisit_windows() for f in range(a, b)]

    def from_run(name):
        _, other = read_frames(runs[name] / "video.mp4")

        def edit(fr, path):
            idx = windows(path)
            fr[idx] = other[idx]
            return fr
        return edit

    def per_frame(fn):
        def edit(fr, path):
            idx = windows(path)
            fr[idx] = fn(fr[idx])
            return fr
        return edit

    edits = {"replaced": from_run("replaced"), "forgotten": from_run("forgotten"), "shifted": per_frame(shift),
             "brighter": per_frame(brighter)}
    items = {"remembered": src}
    for name, edit in edits.items():
        items[name] = edited_item_copy(src, root / "items" / name, edit)
    return items


def evaluate_identity(items: dict[str, Path], face: str, weights_root: Path | None) -> dict[str, dict]:
    """{condition: the human.identity entry (template-tracked person box)} with face backbone ``face``."""
    from evaluate.backbones import BackboneSet
    from evaluate.stage import EvalConfig, evaluate_item

    cfg = EvalConfig(face=(face,), trackers=("template",), encoders=(), imaging=(), aesthetic=(), depth=(),
                     pose_estimators=(), return_frame_poses=(), rpe_trans_estimators=(), validity=False,
                     bootstrap={"n": 200, "seed": 0})
    bs = BackboneSet(cfg, weights_root)
    out = {}
    for name, item in items.items():
        res = stored(evaluate_item(item, cfg, force=True, backbones=bs, use_cache=False))
        (key,) = [k for k in res["metrics"] if k.startswith("human.identity[")]
        e = res["metrics"][key]
        assert e["status"] == "computed", e
        out[name] = {**e, "key": key, "backbones": res["backbones"]}
    return out


@pytest.fixture(scope="module")
def identity(tmp_path_factory) -> dict[str, dict[str, dict]]:
    """{"real": dlib-resnet entries, "random": tiny random-weight ArcFace entries} per condition."""
    need_dlib()
    pytest.importorskip("onnxruntime")
    pytest.importorskip("insightface")
    from evaluate.perception.tiny import write_tiny_weights

    root = tmp_path_factory.mktemp("identity")
    items = build_identity_items(root)
    write_tiny_weights(root / "weights", ["arcface"])
    return {"real": evaluate_identity(items, "dlib-resnet", None),
            "random": evaluate_identity(items, "arcface", root / "weights")}


#: dlib-resnet thresholds, in Eq. 4 units (clipped cosine): its descriptors of two different people still have a
#: cosine of about 0.88, the same face above 0.99 (see evaluate/perception/dlib_face.py)
REMEMBERED_MIN = 0.97
REPLACED_MAX = 0.93
FORGOTTEN_MAX = 0.5
#: a nuisance (shift, brightness) may move the score by at most this fraction of what a change of person moves it
INVARIANCE_FRACTION = 0.25


def _v(s: dict, c: str) -> float:
    return float(s[c]["value"])


def check_remembered_and_replaced(s: dict) -> list[str]:
    bad = []
    if _v(s, "remembered") < REMEMBERED_MIN:
        bad.append(f"remembered {_v(s, 'remembered'):.4f} < {REMEMBERED_MIN}")
    if _v(s, "replaced") > REPLACED_MAX:
        bad.append(f"replaced (another person) {_v(s, 'replaced'):.4f} > {REPLACED_MAX}")
    return bad


def check_forgotten(s: dict) -> list[str]:
    v = _v(s, "forgotten")
    return [] if v <= FORGOTTEN_MAX else [f"forgotten (noise where the face was) {v:.4f} > {FORGOTTEN_MAX}"]


def check_invariance(s: dict) -> list[str]:
    gap = _v(s, "remembered") - _v(s, "replaced")
    bad = [] if gap > 0.02 else [f"no identity gap: remembered - replaced = {gap:.4f}"]
    for c in ("shifted", "brighter"):
        d = abs(_v(s, "remembered") - _v(s, c))
        if d > INVARIANCE_FRACTION * max(gap, 0.0):
            bad.append(f"{c}: |remembered - {c}| = {d:.4f} > {INVARIANCE_FRACTION} x identity gap {gap:.4f}")
    return bad


def _revisit_rate(e: dict) -> float:
    found = sum(r[0] for d in e["face_detection"].values() for r in d["revisits"])
    seen = sum(r[1] for d in e["face_detection"].values() for r in d["revisits"])
    return found / seen


def check_detection(s: dict) -> list[str]:
    """The face is found where it is shown and not where noise replaced it."""
    bad = []
    if s["remembered"]["face_detection_rate"] < 0.9:
        bad.append(f"detection rate {s['remembered']['face_detection_rate']:.2f} < 0.9 on the remembered run")
    if _revisit_rate(s["forgotten"]) > 0.1:
        bad.append(f"'faces' found in {_revisit_rate(s['forgotten']):.2f} of the noise revisit frames")
    return bad


CHECKS = {"remembered_and_replaced": check_remembered_and_replaced, "forgotten": check_forgotten,
          "invariance": check_invariance, "detection": check_detection}


@pytest.mark.slow
@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("weights", ["real", "random"])
def test_identity_validity_on_the_reference_model(identity, weights, check):
    """On the demo's human case: remembered scores high, another person and a noise-filled face low, a small shift
    or brightness change moves it far less than a change of person, and the face is detected where it is shown.
    The real dlib descriptor passes each check; the random-weight ArcFace fails each."""
    s = identity[weights]
    bad = CHECKS[check](s)
    if weights == "real":
        assert not bad, (bad, {c: round(_v(s, c), 4) for c in CONDITIONS})
    else:
        assert bad, f"the random-weight model passed {check!r}: {({c: round(_v(s, c), 4) for c in CONDITIONS})}"


@pytest.mark.slow
def test_identity_entry_records_detection_rate_and_provenance(identity):
    e = identity["real"]["remembered"]
    assert e["key"] == "human.identity[dlib-resnet+template-ncc]" and e["backbone_kind"] == "diagnostic"
    det = e["face_detection"]["astronaut"]
    assert det["reference"][1] > 0 and len(det["revisits"]) == 2
    found = det["reference"][0] + sum(r[0] for r in det["revisits"])
    seen = det["reference"][1] + sum(r[1] for r in det["revisits"])
    assert e["face_detection_rate"] == pytest.approx(found / seen)
    prov = e["backbones"]["dlib-resnet"]
    assert prov["kind"] == "diagnostic" and prov["library"] == "dlib"
    assert {"dlib_face_recognition_resnet_model_v1.dat", "shape_predictor_5_face_landmarks.dat",
            "frontal_face_detector (compiled into dlib)"} <= set(prov["files"])
    assert all(len(f["sha256"]) == 64 and f["licence"] for f in prov["files"].values())
    print("IDENTITY", json.dumps({w: {c: [round(_v(s, c), 4), round(s[c]["face_detection_rate"] or 0, 3)]
                                      for c in CONDITIONS} for w, s in identity.items()}))


def test_missing_package_is_not_computed_with_the_install_command(monkeypatch):
    """Without the packages the backbone is "not computed" (BackboneUnavailable) naming the install command."""
    from evaluate.perception import dlib_face
    from evaluate.perception.base import BackboneUnavailable
    from evaluate.perception.packaged import ShippedFile, resolve

    gone = ShippedFile("x.dat", ("module", "no_such_module_for_tests", "x.dat"), "PyPI nothing", EXTRA_INSTALL, "-")
    with pytest.raises(BackboneUnavailable, match=r"x.dat \(shipped by PyPI nothing\) is not installed.*real-weights"):
        resolve("dlib-resnet", [gone])
    monkeypatch.setattr(dlib_face, "DESCRIPTOR", gone)
    monkeypatch.setitem(__import__("sys").modules, "dlib", None)  # `import dlib` raises ImportError
    with pytest.raises(BackboneUnavailable, match=r"pip install -e '.\[real-weights\]'"):
        dlib_face.DlibResnetEmbedder()


def test_registry_lists_them_as_diagnostic_and_listing_imports_neither_dlib_nor_torch():
    import subprocess
    import sys

    from evaluate.backbones import BACKBONES

    for n in ("dlib-resnet", "brisque"):
        assert BACKBONES[n].kind == "diagnostic" and BACKBONES[n].packaged and not BACKBONES[n].learned
    code = ("import sys; from evaluate import stage, backbones, weights; from evaluate.families import all_families; "
            "from harness.app import weights as cli; "
            "all_families(); cli.cmd_list(weights.weights_root('/nonexistent'), [], False); "
            "from evaluate.stage import EvalConfig, family_hashes; "
            "family_hashes(EvalConfig(face=('dlib-resnet',), imaging=('brisque',)), 'x', weights.weights_root()); "
            "heavy = [m for m in ('torch', 'dlib') if m in sys.modules]; assert not heavy, heavy")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "dlib-resnet" in r.stdout and "brisque" in r.stdout  # weights list shows the shipped ones too


def test_real_weights_preset_composes_the_real_backbones():
    from evaluate.stage import EvalConfig
    from tests.support import compose

    cfg = compose(["debug=real_weights"])
    ev = EvalConfig.from_dict({k: v for k, v in cfg["evaluate"].items()})
    assert ev.face[0] == "dlib-resnet" and "arcface" in ev.face
    assert ev.imaging[0] == "brisque" and "musiq-spaq" in ev.imaging
    assert (cfg["model"]["height"], cfg["model"]["width"]) == (256, 256) and cfg["run"] == "real_weights"


@pytest.mark.slow
def test_real_weights_demo_computes_real_scores_offline(tmp_path):
    """``python -m harness debug=real_weights`` (the human case here): real identity and quality scores in
    metrics.json and summary.md, labelled diagnostic, with the paper's backbones "not computed" beside them."""
    need_dlib()
    need_brisque()
    r = run_cli(["debug=real_weights", "cases.include=[human_astronaut]"], tmp_path, timeout=600,
                env={"WORLDMEM_WEIGHTS": str(tmp_path / "no-weights")})
    assert r.returncode == 0, r.stderr[-3000:]
    (m,) = (tmp_path / "outputs" / "real_weights").rglob("metrics.json")
    res = json.loads(m.read_text())["metrics"]
    idk, qk = "human.identity[dlib-resnet+template-ncc]", "quality.imaging[brisque]"
    assert res[idk]["status"] == "computed" and res[idk]["value"] > REMEMBERED_MIN
    assert res[idk]["backbone_kind"] == "diagnostic" and res[idk]["face_detection_rate"] > 0.9
    assert res[qk]["status"] == "computed" and 0 < res[qk]["value"] < 1
    assert res["quality.imaging[musiq-spaq]"]["status"] == "not_computed"
    summary = (tmp_path / "outputs" / "real_weights" / "eval" / "summary.md").read_text()
    assert idk in summary and qk in summary and "not the paper's" in summary

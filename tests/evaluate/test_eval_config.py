"""``EvalConfig.from_dict``: pydantic checks the declared types and bounds, the error is the project's message."""

from __future__ import annotations

import math
from dataclasses import asdict

import pytest

from evaluate.config import EvalConfig
from harness.errors import ConfigError


def test_values_are_kept_as_given() -> None:
    """An integer given for a number stays an integer (each ``metrics.json`` records the settings as given); lists
    become tuples; a partial ``bootstrap`` keeps its keys in their order; the judge's defaults are filled in."""
    cfg = EvalConfig.from_dict({"departure_deg": 30, "return_tolerances_deg": [30, 2.5], "encoders": ["pixel"],
                                "bootstrap": {"seed": 3, "n": 7}, "description": "ignored"})
    assert type(cfg.departure_deg) is int and type(cfg.sphere_bin_deg) is float
    assert cfg.return_tolerances_deg == (30, 2.5) and type(cfg.return_tolerances_deg[0]) is int
    assert cfg.encoders == ("pixel",) and list(cfg.bootstrap) == ["seed", "n"]
    assert asdict(cfg)["judge"] == cfg.judge.to_dict() and cfg.judge.max_tokens == 4096
    assert EvalConfig.from_dict({"bootstrap": {"n": 5}}).bootstrap == {"n": 5}


@pytest.mark.parametrize(("given", "message"), [
    ({"canvas": 7}, "evaluate.canvas=7: must be an integer >= 8 (see conf/evaluate/default.yaml)"),
    ({"rpe_stride": 2.0}, "evaluate.rpe_stride=2.0: must be an integer >= 1"),
    ({"memory_stride": True}, "evaluate.memory_stride=True: must be an integer >= 1"),
    ({"sphere_bin_deg": 0}, "evaluate.sphere_bin_deg=0: must be a number > 0 and <= 90"),
    ({"tracker_threshold": 1.5}, "evaluate.tracker_threshold=1.5: must be a number >= 0 and <= 1"),
    ({"revisit_tolerance_translation": math.inf}, "evaluate.revisit_tolerance_translation=inf: must be a number >= 0 "),
    ({"departure_deg": "30"}, "evaluate.departure_deg='30': must be a number > 0 and <= 180"),
    ({"validity": 1}, "evaluate.validity=1: use true or false"),
    ({"return_tolerances_deg": []}, "evaluate.return_tolerances_deg=[]: a list of degrees in (0, 180]"),
    ({"return_tolerances_deg": [30, 181]}, "evaluate.return_tolerances_deg=[30, 181]: a list of degrees"),
    ({"bootstrap": {"n": 1, "x": 2}}, "evaluate.bootstrap={'n': 1, 'x': 2}: a mapping {n: <resamples >= 1>"),
    ({"bootstrap": {"seed": -1, "n": 0}}, "evaluate.bootstrap.n=0: must be an integer >= 1 (the paper uses 2000)"),
    ({"bootstrap": {"seed": -1}}, "evaluate.bootstrap.seed=-1: must be an integer >= 0"),
    ({"face": "arcface"}, "evaluate.face='arcface': a list of backbone names, e.g. evaluate.face=[pixel]"),
    ({"device": 0}, "evaluate.device=0: give a name"),
    ({"ors": {"thresold": 0.1}}, "evaluate.ors.thresold: unknown field"),
])
def test_a_bad_value_names_the_setting_and_the_fix(given: dict, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        EvalConfig.from_dict(given)
    assert str(exc.value).startswith(message)


def test_the_first_problem_is_reported_in_a_fixed_order() -> None:
    """An unknown setting before a bad value; then the numbers, the flags, the lists, the names, ors, judge."""
    def message(d: dict) -> str:
        with pytest.raises(ConfigError) as exc:
            EvalConfig.from_dict(d)
        return str(exc.value)

    assert message({"canvas": 2, "encoderz": [], "rpe_stride": 0}).startswith(
        "evaluate.encoderz: unknown setting; did you mean 'encoders'?")
    assert message({"canvas": 2, "rpe_stride": 0}).startswith("evaluate.rpe_stride=0")
    assert message({"device": 1, "enabled": "no", "face": 3}).startswith("evaluate.enabled='no'")
    assert message({"judge": {"bad": 1}, "ors": {"bad": 1}, "aesthetic": [1]}).startswith("evaluate.aesthetic=[1]")
    assert message({"judge": {"bad": 1}, "ors": {"bad": 1}}).startswith("evaluate.ors.bad")
    assert message({"judge": {"bad": 1}}).startswith("evaluate.judge.bad: unknown setting")


# -- the rules of the result cache (evaluate/cache.py) and of the settings check, one at a time ---------------------


def test_a_cache_hash_reads_a_mapping_in_any_order_and_is_16_hex_digits() -> None:
    from evaluate.cache import _hash

    h = _hash({"a": 1, "b": [2, 3]})
    assert h == _hash({"b": [2, 3], "a": 1}) and len(h) == 16 and int(h, 16) >= 0
    assert h != _hash({"a": 1, "b": [3, 2]})


def test_the_weights_state_names_learned_and_packaged_backbones_with_their_options(monkeypatch, tmp_path) -> None:
    """A family's weights state holds each learned backbone's fingerprint and each packaged one's package state,
    each with its load options ({} when none are set); other names (pixel) and non-name settings are left out."""
    import evaluate.backbones as backbones
    from evaluate import cache
    from evaluate.families.base import Family

    monkeypatch.setattr(backbones, "weights_fingerprint", lambda n, root, pack: f"fp:{n}:{pack}")
    monkeypatch.setattr(cache, "_packaged_state", lambda n: f"pkg:{n}")
    fam = Family("f", ("encoders", "face", "memory_stride", "device"))  # device: a string that names no backbone
    plain = EvalConfig.from_dict({"encoders": ["dinov2", "pixel"], "face": ["dlib-resnet"]})
    assert cache._weights_state(fam, plain, tmp_path, "P") == {"dinov2": ["fp:dinov2:P", {}],
                                                               "dlib-resnet": ["pkg:dlib-resnet", {}]}
    opts = {"dinov2": {"size": 224}, "dlib-resnet": {"upsample": 1}}
    given = EvalConfig.from_dict({"encoders": ["dinov2", "pixel"], "face": ["dlib-resnet"], "backbone_options": opts})
    assert cache._weights_state(fam, given, tmp_path, "P") == {"dinov2": ["fp:dinov2:P", {"size": 224}],
                                                               "dlib-resnet": ["pkg:dlib-resnet", {"upsample": 1}]}
    knobs = EvalConfig.from_dict({"encoders": ["pixel"], "face": ["dlib-resnet"],
                                  "backbone_options": {"pixel": {"size": 8}, "template": {}}})
    assert cache._weights_state(fam, knobs, tmp_path, "P") == {"pixel": [{"size": 8}],  # weight-free: its knobs
                                                               "dlib-resnet": ["pkg:dlib-resnet", {}]}
    no_options = EvalConfig.from_dict({"encoders": ["dinov2"], "face": ["dlib-resnet"]})
    object.__setattr__(no_options, "backbone_options", None)  # as a config written before the setting existed
    assert cache._weights_state(fam, no_options, tmp_path, None) == {"dinov2": ["fp:dinov2:None", {}],
                                                                     "dlib-resnet": ["pkg:dlib-resnet", {}]}


def test_family_hashes_look_for_the_weights_pack_only_when_none_is_given(monkeypatch, tmp_path) -> None:
    from evaluate import cache
    from evaluate.weights_pack import WeightsPack

    found = []
    monkeypatch.setattr(WeightsPack, "discover", classmethod(lambda cls, root: found.append(root) or None))
    seen = []
    monkeypatch.setattr(cache, "_weights_state", lambda f, e, root, pack: seen.append(pack) or {})
    cfg = EvalConfig()
    cache.family_hashes(cfg, "v" * 64, tmp_path, pack="the pack")
    assert found == [] and seen and set(seen) == {"the pack"}
    seen.clear()
    memo: dict = {}
    a = cache.family_hashes(cfg, "v" * 64, tmp_path, weights_memo=memo)
    assert found and set(seen) == {None} and set(memo) >= {"validity"}
    calls = len(seen)
    assert cache.family_hashes(cfg, "v" * 64, tmp_path, weights_memo=memo) == a and len(seen) == calls  # memoised
    assert cache.family_hashes(cfg, "w" * 64, tmp_path, weights_memo=memo) != a


def test_a_failed_stored_result_is_never_reused_and_another_video_reuses_nothing(tmp_path) -> None:
    from evaluate.cache import all_reused, read_result
    from evaluate.results import ItemResult
    from harness.io import write_sealed_json

    base = {"item": {"case": "i"}, "video_sha256": "a" * 64, "family_hashes": {"camera": "h1"}, "metrics": {}}
    ok = ItemResult.from_dict(base)
    write_sealed_json(tmp_path / "ok.json", ok.to_dict())
    back = read_result(tmp_path / "ok.json")
    assert back is not None and back.video_sha256 == "a" * 64
    assert all_reused(back, {"camera": "h1"}, "a" * 64)
    assert not all_reused(back, {"camera": "h1"}, "b" * 64)  # the same hashes, another video
    assert not all_reused(None, {"camera": "h1"}, "a" * 64)
    failed = ItemResult.from_dict({**base, "status": "failed", "reason": "boom"})
    write_sealed_json(tmp_path / "failed.json", failed.to_dict())
    assert failed.failed and read_result(tmp_path / "failed.json") is None


@pytest.mark.parametrize(("given", "message"), [
    ({"bootstrap": 5}, "evaluate.bootstrap=5: a mapping {n: <resamples >= 1>"),
    ({"bootstrap": [1, 2]}, "evaluate.bootstrap=[1, 2]: a mapping {n: <resamples >= 1>"),
    ({"return_frame_poses": ["nope"]}, "evaluate.return_frame_poses"),
    ({"rpe_trans_estimators": ["nope"]}, "evaluate.rpe_trans_estimators"),
    ({"rpe_rot_estimator": "nope"}, "evaluate.rpe_rot_estimator"),
    ({"backbone_options": {"oracle": {}}}, "evaluate.backbone_options.oracle: not a backbone with options; one of"),
    ({"backbone_options": {"nope": {}}}, "evaluate.backbone_options.nope: not a backbone with options; one of"),
])
def test_each_named_setting_is_checked(given: dict, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        EvalConfig.from_dict(given)
    assert str(exc.value).startswith(message), str(exc.value)


def test_options_for_learned_packaged_and_weight_free_backbones_and_an_empty_ors_are_accepted() -> None:
    opts = {"da3": {"process_res": 504}, "brisque": {}, "classical": {"flow_window": 15}}
    cfg = EvalConfig.from_dict({"backbone_options": opts, "ors": None})
    assert cfg.backbone_options == opts and cfg.ors is None
    assert EvalConfig.from_dict({"backbone_options": None}).backbone_options is None


def test_the_defaults_are_the_shipped_default_yaml_and_the_papers_bootstrap() -> None:
    """A setting left out of a config takes the value ``conf/evaluate/default.yaml`` ships (ORS's detector settings:
    :data:`evaluate.ors.ORS_DEFAULTS`, which that file spells out); the bootstrap's resamples default to the
    paper's 2000, its seed to 0."""
    from evaluate.config import Bootstrap
    from evaluate.ors import ORS_DEFAULTS
    from harness.config_groups import group_yaml

    shipped = group_yaml("evaluate", "default")
    built, given = asdict(EvalConfig()), asdict(EvalConfig.from_dict(shipped))
    assert set(built) == set(given)
    assert {k: v for k, v in built.items() if k != "ors"} == {k: v for k, v in given.items() if k != "ors"}
    assert built["ors"] == {} and {k: (list(v) if isinstance(v, tuple) else v) for k, v in ORS_DEFAULTS.items()} == {
        k: (list(v) if isinstance(v, tuple) else v) for k, v in shipped["ors"].items()}
    assert (Bootstrap().n, Bootstrap().seed) == (2000, 0) and shipped["bootstrap"] == {"n": 2000, "seed": 0}

"""The metric catalog: id, family, direction, what each needs, which of them are the paper's Table 2 columns (and
with which backbone), which measure static content, and the chance level of those that have one. One module per
metric family computes them (:mod:`evaluate.families`).

Keys of ``metrics.json`` are ``metric[backbone]`` (``metric`` alone for values that combine several estimators);
the helpers here split them (:func:`metric_id`, :func:`backbone_of`) so no reader parses a key by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

#: the judge of the paper's Dynamic Memory columns (appendix D; ``evaluate.judge.model`` by default)
PAPER_JUDGE = "Qwen/Qwen3.8-27B"


@dataclass(frozen=True)
class MetricSpec:
    """One metric.

    Attributes:
        needs: the backbone kind: encoder | face | tracker | depth | pose | quality | judge | pixels | detector.
        paper: one of WorldMemBench's reported metrics (False: a diagnostic or protocol extension of this harness).
        table2: the backbone part of the key under which the paper's Table 2 reports it (``""``: a bare key that
            combines the paper's estimators, e.g. Eq. 2's mean over DA3 and ViPE); None: not a Table 2 column.
        static: scores the retention of *static* content from the frames (pixel / feature similarity at revisits).
            A dynamic case's content legitimately changes while out of view, so dynamic cases are left out of every
            aggregate of such a metric (:func:`scores_case`).
        resolution: the smallest difference between two policies or models worth reporting, in the metric's unit
            (0.01 on a [0, 1] score). A smaller paired difference reads as a tie (≈) in the verdict even when its
            interval excludes 0: the reference model's FoV and FullKV differ by 0.0003 on departure.visible with an
            interval of +-0.0001, which is real and says nothing.
    """

    id: str
    family: str
    higher_is_better: bool
    needs: str
    paper: bool
    description: str
    table2: Optional[str] = None
    static: bool = False
    resolution: float = 0.01


METRICS: dict[str, MetricSpec] = {m.id: m for m in [
    MetricSpec("quality.imaging", "quality", True, "quality", True, "MUSIQ-SPAQ / 100, every 4th frame",
               table2="musiq-spaq"),
    MetricSpec("quality.aesthetic", "quality", True, "quality", True, "LAION aesthetic / 10, every 4th frame",
               table2="laion"),
    MetricSpec("camera.rpe_trans", "camera", False, "pose", True,
               "Eq. 2, adjacent frames, Sim(3)-aligned, unit-length target; [e] per estimator, bare = mean over "
               "rpe_trans_estimators", table2="", resolution=0.005),
    MetricSpec("camera.rpe_rot", "camera", False, "pose", True,
               "Eq. 3, adjacent frames, accumulated angle error / target angle; bare = rpe_rot_estimator", table2="",
               resolution=0.005),
    MetricSpec("camera.rpe_trans_strided", "camera", False, "pose", False,
               "Eq. 2 on every rpe_stride-th frame (a named non-paper variant)"),
    MetricSpec("camera.rpe_rot_strided", "camera", False, "pose", False,
               "Eq. 3 on every rpe_stride-th frame (a named non-paper variant)"),
    MetricSpec("human.identity", "human", True, "face", True, "Eq. 4 with ArcFace face embeddings, Eq. 1",
               table2="arcface+sam2"),
    MetricSpec("human.appearance", "human", True, "encoder", True, "Eq. 4 with features in person masks, Eq. 1",
               table2="dinov2+sam2"),
    MetricSpec("object.appearance", "object", True, "encoder", True, "Eq. 4 with features in object masks, Eq. 1",
               table2="dinov2+sam2"),
    MetricSpec("object.geometry", "object", True, "tracker", True, "Eq. 5 normalised silhouette IoU, Eq. 1",
               table2="sam2"),
    MetricSpec("environment.visible", "environment", True, "encoder", True, "global features of the return frame",
               table2="dinov2"),
    MetricSpec("environment.depth", "environment", True, "depth", True, "Spearman of depth at the return frame",
               table2="da3"),
    MetricSpec("environment.reconstruction", "environment", True, "depth", True, "Eq. 6 spherical score", table2="da3"),
    MetricSpec("dynamic.overall", "dynamic", True, "judge", True, "gated 8-question checklist (appendix D)",
               table2=PAPER_JUDGE),
    MetricSpec("dynamic.started", "dynamic", True, "judge", True, "event-start gate (mean over videos = p_start)"),
    MetricSpec("dynamic.conditional", "dynamic", True, "judge", True, "checklist of started videos (mean = S_cond)"),
    MetricSpec("dynamic.return_progress", "dynamic", True, "judge", True, "gated aspect: return progress",
               table2=PAPER_JUDGE),
    MetricSpec("dynamic.persistence_reset", "dynamic", True, "judge", True, "gated aspect: persistence / reset",
               table2=PAPER_JUDGE),
    MetricSpec("dynamic.final_state", "dynamic", True, "judge", True, "gated aspect: final state", table2=PAPER_JUDGE),
    MetricSpec("dynamic.causal_physical", "dynamic", True, "judge", True, "gated aspect: causal / physical",
               table2=PAPER_JUDGE),
    MetricSpec("object.ors", "object", True, "detector", False,
               "MemoBench object reappearance score: detection rate x mean confidence over revisit frames"),
    MetricSpec("diagnostic.revisit_psnr", "diagnostic", True, "pixels", False, "PSNR return frame vs frame 0",
               static=True, resolution=0.5),
    MetricSpec("diagnostic.revisit_ssim", "diagnostic", True, "pixels", False, "SSIM return frame vs frame 0",
               static=True),
    MetricSpec("diagnostic.cross_departure", "diagnostic", True, "encoder", False,
               "similarity of frames at matching poses across the first two departures", static=True),
    MetricSpec("departure.visible", "departure", True, "encoder", False,
               "protocol extension departure_revisit: Eq. 4 global features + Eq. 1, reference = first away view",
               static=True),
    MetricSpec("departure.return_visible", "departure", True, "encoder", False,
               "protocol extension departure_revisit: Environment Visible's rule (estimated orientation closest to "
               "the reference frame's, clipped cosine of global features), reference = first away view's last frame",
               static=True),
    MetricSpec("departure.sweep_visible", "departure", True, "encoder", False,
               "protocol extension departure_sweep: Eq. 4 global features + Eq. 1, reference = every frame of the "
               "first departure, revisits = the later phases' frames that look back at its views", static=True),
]}


#: the paper's Table 2 columns in its order (quality, human, object, environment, dynamic, camera following)
TABLE2_ORDER = ("quality.imaging", "quality.aesthetic", "human.identity", "human.appearance", "object.appearance",
                "object.geometry", "environment.visible", "environment.depth", "environment.reconstruction",
                "dynamic.return_progress", "dynamic.persistence_reset", "dynamic.final_state",
                "dynamic.causal_physical", "dynamic.overall", "camera.rpe_trans", "camera.rpe_rot")


def metric_id(key: str) -> str:
    """``environment.visible[dinov2]`` -> ``environment.visible``."""
    return key.split("[", 1)[0]


def backbone_of(key: str) -> str:
    """``environment.visible[dinov2]`` -> ``dinov2``; a bare key (``camera.rpe_trans``) -> ``""``."""
    return key.split("[", 1)[1][:-1] if "[" in key else ""


def make_key(metric: str, backbone: str) -> str:
    return f"{metric}[{backbone}]" if backbone else metric


def spec_of(key: str) -> Optional[MetricSpec]:
    """The spec of a key's metric, None for a metric this catalog does not know (a newer file)."""
    return METRICS.get(metric_id(key))


def higher_is_better(metric_id_or_key: str) -> bool:
    return METRICS[metric_id(metric_id_or_key)].higher_is_better


def resolution(key: str) -> float:
    """The smallest difference worth reporting of ``key``'s metric (its unit); 0.01 for an unknown metric."""
    s = spec_of(key)
    return s.resolution if s is not None else 0.01


def direction(key: str) -> Optional[bool]:
    """True: higher is better; False: lower is better; None: unknown metric (not ranked)."""
    s = spec_of(key)
    return None if s is None else s.higher_is_better


def table2_key(metric: str) -> str:
    """The key of a Table 2 metric computed with the paper's backbone (``environment.visible[dinov2]``)."""
    s = METRICS[metric]
    if s.table2 is None:
        raise KeyError(f"{metric} is not a column of the paper's Table 2")
    return make_key(metric, s.table2)


def is_table2_key(key: str) -> bool:
    """A Table 2 metric computed with the paper's own backbone (the main table's columns); every other key, the
    same metric with an estimator or diagnostic backbone included, is a variant."""
    s = spec_of(key)
    return s is not None and s.table2 is not None and backbone_of(key) == s.table2


def scores_case(key: str, case_family: str) -> bool:
    """Whether ``key``'s value of a video of ``case_family`` enters aggregates: a static-content metric leaves
    dynamic cases out (their content moves on purpose: revisit PSNR of the moving cat would favour the policy that
    forgot it)."""
    s = spec_of(key)
    return not (s is not None and s.static and case_family == "dynamic")


@dataclass(frozen=True)
class Chance:
    """What a video with no memory of the content scores: ``value`` (mean), ``spread`` (one SD across the
    measured pairs) and how it was measured or derived."""

    value: float
    spread: float
    how: str


_UNRELATED = ("measured: the reference set of one demo case against the revisit frames of another (a != b), on the "
              "five demo cases' reference-model FullKV videos at 96x160, LRLR and LRLRLR, 193 and 289 frames "
              "(tests/evaluate/test_measurement_validity.py re-measures it)")

#: chance levels, per metric and backbone ("*": any backbone). Metrics without one (PSNR, RPE, ...) are absent.
CHANCE: dict[tuple[str, str], Chance] = {
    # centred 16x16 thumbnails: unrelated photos are nearly orthogonal, the clip at 0 keeps the positive half
    ("environment.visible", "pixel-thumb16"): Chance(0.10, 0.11, _UNRELATED + "; frame 0 vs the return frames: "
                                                     "0.10 at both lengths"),
    ("departure.return_visible", "pixel-thumb16"): Chance(0.06, 0.08, _UNRELATED + "; the away view vs the return "
                                                          "frames: 0.08 at 193 frames, 0.04 at 289"),
    ("departure.visible", "pixel-thumb16"): Chance(0.07, 0.08, _UNRELATED + "; Eq. 4, max over the away view: 0.09 "
                                                   "at 193 frames, 0.05 at 289"),
    # Eq. 4 takes the max over every frame of D1: more reference frames, a higher max by chance
    ("departure.sweep_visible", "pixel-thumb16"): Chance(0.15, 0.04, _UNRELATED + "; Eq. 4, max over all of D1: "
                                                         "0.16 at 193 frames, 0.15 at 289"),
    ("environment.depth", "*"): Chance(0.0, 0.0, "derived: Spearman of independent depth maps"),
    ("dynamic.conditional", "*"): Chance(0.5, 0.0, "derived: coin-flip answers to the eight yes/no questions"),
}


def chance_level(key: str) -> Optional[Chance]:
    """The chance level of ``key`` (its backbone's, else the metric's for any backbone), None when it has none."""
    mid, bb = metric_id(key), backbone_of(key)
    return CHANCE.get((mid, bb)) or CHANCE.get((mid, "*"))

"""The family-hash cache of the evaluation stage: per item, the hash of each metric family (the video's sha256, the
family's settings, the schema version and its backbones' weights) whose change recomputes that family, and the
stored ``metrics.json`` a re-run may reuse (:func:`read_result`, :func:`all_reused`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .backbones import BACKBONES, spec
from .config import EvalConfig
from .families.base import Family
from .families.order import all_families
from .perception.base import BackboneUnavailable
from .results import ItemResult

if TYPE_CHECKING:
    from .weights_pack import WeightsPack

# Bump when a metric rule or an estimator changes: every family is recomputed on re-runs (3: departure.sweep_visible,
# parallax returns; 4: the classical RPE estimator re-detects its corners every 2nd step; 5: its rotation steps track
# with a 9-px flow window; 6: its rotation steps re-detect every 4th step). A bump renames its mutant in
# tests/mutation/equivalent.yaml (`SCHEMA_VERSION = N -> SCHEMA_VERSION = N+1`): tests/test_mutation.py says so.
SCHEMA_VERSION = 6
#: backbone -> [its weights' fingerprint (JSON: :func:`evaluate.backbones.weights_fingerprint`), its options]: what
#: of a family's weights enters its hash
WeightsState = dict[str, list[Any]]
#: family -> its :data:`WeightsState`, filled once per run (:func:`family_hashes`)
WeightsMemo = dict[str, WeightsState]


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _weights_state(fam: Family, ecfg: EvalConfig, root: Path, pack: WeightsPack | None = None) -> WeightsState:
    """Cheap fingerprint of the weights of the learned backbones a family may use (presence, sizes, mtimes; in our
    folder or in the release's weights pack ``pack``), so fetching or replacing weights recomputes the family; file
    sha256s are recorded when a backbone is loaded. A weight-free backbone enters with its options only, when it has
    any (its defaults are the code's: :data:`SCHEMA_VERSION` covers them)."""
    from .backbones import weights_fingerprint

    options = ecfg.backbone_options or {}
    out: WeightsState = {}
    for setting in fam.settings:
        v = getattr(ecfg, setting)
        for n in (v if isinstance(v, tuple) else (v,)):
            if isinstance(n, str) and n in BACKBONES and BACKBONES[n].learned:
                out[n] = [weights_fingerprint(n, root, pack), options.get(n, {})]
            elif isinstance(n, str) and n in BACKBONES and BACKBONES[n].packaged:
                out[n] = [_packaged_state(n), options.get(n, {})]
            elif isinstance(n, str) and options.get(n):
                out[n] = [options[n]]
    return out


def _packaged_state(name: str) -> list[list[str | int]] | str:
    """Installing, removing or upgrading the package that ships a backbone's weights recomputes its families."""
    from .backbones import import_class
    from .perception.packaged import fingerprint

    try:
        return fingerprint(import_class(spec(name)).shipped_files())
    except BackboneUnavailable as exc:
        return f"unavailable: {exc}"


def family_hashes(ecfg: EvalConfig, video_sha: str, root: Path, weights_memo: WeightsMemo | None = None,
                  pack: WeightsPack | None = None) -> dict[str, str]:
    """Per family (and for the validity section): the hash whose change recomputes it.

    ``weights_memo``: a run's dict of family -> weights fingerprint, filled on first use, so a run lists each
    weights folder once rather than once per item (the run loads every backbone once, from what it saw then).
    ``pack``: the release's weights pack the run's backbones use (None: found from ``root`` and the environment)."""
    from .validity import VALIDITY_VERSION
    from .weights_pack import WeightsPack

    memo = {} if weights_memo is None else weights_memo

    def weights(f: Family) -> WeightsState:
        nonlocal pack
        if f.name not in memo:
            pack = pack if pack is not None else WeightsPack.discover(root)
            memo[f.name] = _weights_state(f, ecfg, root, pack)
        return memo[f.name]

    out = {f.name: _hash([video_sha, ecfg.family_settings(f.settings), SCHEMA_VERSION, weights(f)])
           for f in all_families()}
    vf = Family("validity", ("pose_estimators", "depth", "return_frame_poses", "memory_stride", "validity"))
    out["validity"] = _hash([video_sha, {k: getattr(ecfg, k) for k in vf.settings}, VALIDITY_VERSION, weights(vf)])
    return out


def read_result(path: Path) -> ItemResult | None:
    """The stored result at ``path``, None when absent, unreadable, failed (a failed item is always redone) or not
    matching its seal (:func:`harness.io.seal_problem`: edited by hand, so recomputed, never reused)."""
    from harness.io import read_json, seal_problem

    try:
        data = read_json(path)
        prev = ItemResult.from_dict(data)
    except Exception:  # noqa: BLE001 - missing, truncated or from an incompatible writer: recomputed
        return None
    problem = seal_problem(data)
    if problem is not None:
        logging.getLogger(__name__).warning("%s: %s; recomputing it", path, problem)
        return None
    return None if prev.failed else prev


def current_hashes(prev: ItemResult) -> dict[str, str]:
    """The family hashes of ``prev`` minus those of families with a retryable "not computed" entry (e.g. the judge
    server timed out), so the next evaluation recomputes exactly those families even when no setting changed."""
    retry = {m.family for m in prev.metrics.values() if m.retryable}
    return {f: h for f, h in prev.family_hashes.items() if f not in retry}


def all_reused(prev: ItemResult | None, hashes: dict[str, str], video_sha: str) -> bool:
    if prev is None or prev.video_sha256 != video_sha:
        return False
    have = current_hashes(prev)
    return all(have.get(f) == h for f, h in hashes.items())  # every family family_hashes knows, and validity

"""The typed configuration (issue 45 item 1) records what the untyped one did: for every model x trajectory x
context (a pairwise cover) and every other preset, the saved ``config.yaml`` / ``overrides.yaml``, the
``meta.json`` parts and every item's fingerprint are byte-identical to those of the commit before it, and the
commands one refused the other refuses with the same message (:mod:`tests.support.config_identity`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.config_identity import compare, differences

#: main before the typed configuration (its merge of i45-record and i45-types)
BASE = "bdad98076cdfd52eea0e06e9f5703e998ff0763b"
ROOT = Path(__file__).resolve().parents[2]


def test_differences_tells_a_changed_record_from_a_changed_adapter_source() -> None:
    """The comparison itself: a differing config is reported; a fingerprint that differs only by the adapter's own
    source (its ``adapter_code`` part) is counted apart."""
    a = {"m": {"config.yaml": "x: 1\n", "fingerprints": {"i": "f1"}, "fingerprints.code_fixed": {"i": "c"},
               "parts": {"i": {"adapter_code": "v1", "model": "p"}}}}
    same_but_code = {"m": {**a["m"], "fingerprints": {"i": "f2"}, "parts": {"i": {"adapter_code": "v2", "model": "p"}}}}
    r = differences(a, same_but_code)
    assert r["differences"] == [] and r["code_only"] == 2 and r["fingerprints"] == 1
    changed = {"m": {**a["m"], "config.yaml": "x: 2\n"}}
    assert [d[:2] for d in differences(a, changed)["differences"]] == [("m", "config.yaml")]
    moved = {"m": {**same_but_code["m"], "fingerprints.code_fixed": {"i": "d"}}}
    assert {d[1] for d in differences(a, moved)["differences"]} == {"fingerprints", "fingerprints.code_fixed"}


@pytest.mark.slow
def test_configs_and_fingerprints_are_those_of_the_untyped_configuration(tmp_path: Path) -> None:
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{BASE}^{{commit}}"]).returncode != 0:
        pytest.skip(f"{BASE} is not in this checkout's history")
    result = compare(BASE, fast=True, head=ROOT, work=tmp_path)
    assert result["combinations"] > 100 and result["fingerprints"] > 300, result
    assert result["differences"] == [], result["differences"][:5]

"""``JudgeSettings.from_dict``: pydantic checks the declared types and bounds, the error names ``evaluate.judge.<key>``."""

from __future__ import annotations

import pytest

from evaluate.judge import JudgeSettings, JudgeSettingsError
from tests.support import ROOT


def test_values_are_kept_as_given() -> None:
    """An integer temperature stays an integer (the answer settings are part of every request key); null temperature
    and seed are accepted (sent as null, the server's default); everything round-trips through to_dict."""
    s = JudgeSettings.from_dict({"temperature": 0, "timeout": 5, "seed": None, "base_url": "https://h/v1"})
    assert type(s.temperature) is int and type(s.timeout) is int and s.seed is None
    assert JudgeSettings.from_dict(s.to_dict()) == s and JudgeSettings.from_dict(None) == JudgeSettings()


@pytest.mark.parametrize(("given", "message"), [
    ("x", "evaluate.judge='x': expected a mapping of judge settings"),
    ({"zz": 1, "aa": 2, "max_tokens": 0}, "evaluate.judge.aa: unknown setting; allowed: ["),
    ({"max_tokens": 0}, "evaluate.judge.max_tokens=0: must be >= 1"),
    ({"max_tokens": "abc"}, "evaluate.judge.max_tokens='abc': must be >= 1 (an integer)"),
    ({"image_size": 31, "concurrency": 0}, "evaluate.judge.concurrency=0: must be >= 1"),
    ({"max_retries": -1}, "evaluate.judge.max_retries=-1: must be >= 0"),
    ({"timeout": 0}, "evaluate.judge.timeout must be > 0 and backoff_s, max_backoff_s >= 0 (seconds)"),
    ({"max_backoff_s": None}, "evaluate.judge.timeout must be > 0 and backoff_s, max_backoff_s >= 0"),
    ({"model": " ", "timeout": 0}, "evaluate.judge.timeout must be > 0"),
    ({"model": " "}, "evaluate.judge.model is empty: give the served model name"),
    ({"base_url": "ftp://x", "api_key_env": "sk-123"}, "evaluate.judge.api_key_env must NAME an environment variable"),
    ({"base_url": "127.0.0.1:8000"}, "evaluate.judge.base_url='127.0.0.1:8000': give an http(s) URL"),
    ({"json_schema": "false"}, "evaluate.judge.json_schema='false': use true or false"),
    ({"seed": 1.5}, "evaluate.judge.seed=1.5: use an integer"),
])
def test_a_bad_value_names_the_setting_and_the_fix(given: object, message: str) -> None:
    with pytest.raises(JudgeSettingsError) as exc:
        JudgeSettings.from_dict(given)
    assert str(exc.value).startswith(message)


@pytest.mark.parametrize(("given", "message"), [
    ({"max_tokens": True}, "evaluate.judge.max_tokens=True: must be >= 1 (an integer)"),
    ({"max_retries": False}, "evaluate.judge.max_retries=False: must be >= 0 (an integer)"),
    ({"concurrency": 2.0}, "evaluate.judge.concurrency=2.0: must be >= 1 (an integer)"),
    ({"concurrency": 0}, "evaluate.judge.concurrency=0: must be >= 1"),
])
def test_only_a_true_integer_is_told_it_is_merely_out_of_range(given: object, message: str) -> None:
    """A boolean or a float given for a count is told to use an integer; an integer out of range only the bound."""
    with pytest.raises(JudgeSettingsError) as exc:
        JudgeSettings.from_dict(given)
    assert str(exc.value).split("\n")[0] == message


def test_the_defaults_are_the_shipped_config_and_the_documented_ones() -> None:
    """JudgeSettings() equals ``evaluate.judge`` of conf/evaluate/default.yaml, and every default docs/judge.md's
    settings table states (so none of the three can drift from the others)."""
    import re

    import yaml

    shipped = yaml.safe_load((ROOT / "conf/evaluate/default.yaml").read_text())["judge"]
    assert JudgeSettings().to_dict() == shipped
    doc = (ROOT / "docs/judge.md").read_text().split("## Settings", 1)[1].split("\n## ", 1)[0]
    documented = {}
    for row in doc.splitlines():
        cells = row.split("|")
        if len(cells) > 3 and "`" in cells[1]:
            names, defaults = re.findall(r"`([^`]*)`", cells[1]), re.findall(r"`([^`]*)`", cells[2])
            assert len(names) == len(defaults), row
            documented.update({n: yaml.safe_load(d) for n, d in zip(names, defaults)})
    assert sorted(documented) == sorted(shipped)
    assert {k: getattr(JudgeSettings(), k) for k in documented} == documented

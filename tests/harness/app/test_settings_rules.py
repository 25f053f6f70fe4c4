"""Every check of the run configuration's top-level keys and small sections (harness/app/run_config.py), one bad
value each (a check that is dropped fails its row here; issue 44 found ``release.evaluate`` no longer checked
without a test noticing): a :class:`ConfigError` that names the key, and a config holding every key with a good
value passes."""

from __future__ import annotations

import pytest

from harness.app.settings import load_run_config
from harness.errors import ConfigError

GOOD = {
    "dry_run": False, "previews": True, "overwrite": False, "progress": True, "stage": "all", "verbosity": "info",
    "seed": 3, "shard": "0/2", "output_root": "outputs", "videos": None, "videos_manifest": "m.json",
    "gpu_lock_dir": None, "report_out": "r", "trajectories": ["lrlr"], "paths": {"weights": "/w"},
    "cases": {"name": "demo", "include": ["environment_rocket"], "families": ["human", "object"]},
    "local": {}, "release": {"evaluate": True, "limit": 3}, "source": "/data/release",
    "backend": {"name": "sglang", "token_env": "WORLDMEM_TOKEN", "connect_timeout_s": 5, "chunk_timeout_s": 0.5},
    "endpoint": "ws://127.0.0.1:30000",
}


def test_a_config_with_every_key_good_passes():
    load_run_config(dict(GOOD))
    load_run_config({})  # nothing set: nothing to refuse
    load_run_config({"backend": {"name": "upstream"}})


@pytest.mark.parametrize("change, needle", [
    ({"overwite": True}, "overwite: unknown setting"),
    *[({k: "yes"}, f"{k}='yes': use true or false") for k in ("dry_run", "previews", "overwrite", "progress")],
    ({"stage": "gen"}, "stage='gen': use one of"),
    ({"verbosity": "loud"}, "verbosity='loud'"),
    ({"seed": -1}, "seed=-1"), ({"seed": 1.5}, "seed=1.5"),
    ({"shard": "2/2"}, "shard='2/2'"),
    ({"output_root": " "}, "output_root=' ': give a folder path"),
    *[({k: ""}, f"{k}='': give a path") for k in ("videos", "videos_manifest", "gpu_lock_dir", "report_out")],
    ({"trajectories": []}, "trajectories=[]"), ({"trajectories": ["a", 1]}, "trajectories=['a', 1]"),
    ({"paths": "w"}, "paths='w'"), ({"paths": {"weight": "/w"}}, "paths.weight: unknown setting"),
    ({"paths": {"weights": ""}}, "paths.weights=''"),
    ({"cases": "demo"}, "cases='demo'"), ({"cases": {"includes": []}}, "cases.includes: unknown setting"),
    ({"cases": {"include": "x"}}, "cases.include='x'"), ({"cases": {"families": ["animal"]}}, "unknown family"),
    ({"cases": {"families": "human"}}, "cases.families='human'"),
    ({"local": []}, "local=[]"),
    ({"release": {"evaluate": "no"}}, "release.evaluate='no': use true or false"),  # the survivor of issue 44
    ({"release": {"evaluat": True}}, "release.evaluat: unknown setting"), ({"release": 3}, "release=3"),
    ({"source": ""}, "source=''"),
])
def test_each_bad_value_names_its_key(change, needle):
    with pytest.raises(ConfigError) as err:
        load_run_config({**GOOD, **change})
    assert needle in str(err.value)


@pytest.mark.parametrize("change, needle", [
    ({"backend": None, "endpoint": "ws://h:1"}, "endpoint: set, but no backend is chosen"),
    ({"backend": "sglang"}, "backend='sglang'"),
    ({"backend": {**GOOD["backend"], "tokn_env": "X"}}, "backend.tokn_env: unknown setting"),
    ({"backend": {"name": "upstream"}}, "backend=upstream runs the model's own adapter"),
    ({"endpoint": "http://127.0.0.1:30000"}, "needs the server's WebSocket address"),
    ({"backend": {**GOOD["backend"], "token_env": "tok-3f9a"}}, "backend.token_env='tok-3f9a'"),
    ({"backend": {**GOOD["backend"], "connect_timeout_s": 0}}, "backend.connect_timeout_s=0"),
    ({"backend": {**GOOD["backend"], "chunk_timeout_s": True}}, "backend.chunk_timeout_s=True"),
])
def test_each_bad_backend_value_names_its_key(change, needle):
    cfg = {**GOOD, **change}
    if cfg["backend"] is None:
        del cfg["backend"]
    with pytest.raises(ConfigError) as err:
        load_run_config(cfg)
    assert needle in str(err.value)

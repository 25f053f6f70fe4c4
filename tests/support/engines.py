"""Is a real engine here? A Slurm cluster that answers (tests marked ``slurm``), a judge server started by
``tests/engines/judge_up.sh`` (tests marked ``judge_server``). Each probe is bounded and says why when the answer is
no; the tests that need an engine skip with that reason."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

#: where judge_up.sh writes what it started (base_url, model, pid, log); override with $WORLDMEM_JUDGE_STATE
JUDGE_STATE = Path(os.environ.get("WORLDMEM_JUDGE_STATE", "/tmp/worldmem-judge/state.json"))


def _ok(cmd: list[str], timeout: float = 20) -> tuple[bool, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{' '.join(cmd[:2])}: {type(exc).__name__}"
    return p.returncode == 0, (p.stdout + p.stderr).strip()


@functools.lru_cache(maxsize=1)
def slurm_absent() -> Optional[str]:
    """None when a Slurm cluster with accounting answers here (controller up, a usable node, sacct works), else
    why not."""
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None:
        return "no Slurm cluster: sbatch/scontrol not on PATH (start one with tests/engines/slurm_up.sh)"
    ok, out = _ok(["scontrol", "ping"])
    if not ok or "UP" not in out:
        return f"no Slurm controller answers (scontrol ping: {out[-200:]}); start one with tests/engines/slurm_up.sh"
    ok, out = _ok(["sinfo", "-h", "-o", "%t"])
    if not ok or not set(x.strip("*~#!%$@^-") for x in out.split()) & {"idle", "mix", "alloc"}:
        return f"the Slurm cluster has no usable node (sinfo: {out[-200:]})"
    ok, out = _ok(["sacct", "-n", "-X", "-S", "now-1minutes"])
    if not ok:
        return f"Slurm accounting is off (sacct: {out[-200:]}); tests/engines/slurm_up.sh starts slurmdbd"
    return None


@functools.lru_cache(maxsize=1)
def judge_server() -> tuple[Optional[dict], Optional[str]]:
    """(state, None) when the judge server of judge_up.sh answers, else (None, why not). ``state``: base_url,
    model (the name it serves), log."""
    if not JUDGE_STATE.is_file():
        return None, f"no judge server: {JUDGE_STATE} is missing (start one with tests/engines/judge_up.sh)"
    state = json.loads(JUDGE_STATE.read_text())
    import urllib.request

    try:
        with urllib.request.urlopen(state["base_url"].rstrip("/") + "/models", timeout=10) as r:
            json.loads(r.read())
    except Exception as exc:  # noqa: BLE001 - any failure means: not usable here
        return None, f"the judge server at {state.get('base_url')} does not answer ({type(exc).__name__}: {exc})"
    return state, None

"""The ``slurm`` section (``conf/launcher/slurm.yaml``, docs/scaling.md): its typed settings and the rules Slurm's
values follow (time limits, whole numbers, ``gres``), shared by the run configuration (checked before anything is
written) and the launcher (:mod:`harness.app.slurm`, which reads each job's ``hydra.launcher`` through them)."""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar, Mapping, Optional, Union

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr

from harness.errors import ConfigError, UserError
from harness.sections import Section


class SlurmSettingError(ConfigError):
    """A ``slurm.*`` setting Slurm cannot take; the message names it and the fix."""


def time_minutes(value: Any, field_name: str = "slurm.time") -> int:
    """Minutes of a Slurm time limit (rounded up: Slurm enforces whole minutes).

    Accepts Slurm's ``--time`` formats: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S`` (a bare integer is
    minutes). Raises :class:`SlurmSettingError` naming ``field_name`` otherwise, or for a limit under one minute.
    """
    s = str(value).strip()
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", s)
    if isinstance(value, bool) or not m:
        raise SlurmSettingError(f"{field_name}={value!r}: give a Slurm time limit: minutes (90), H:MM:SS "
                                "(12:00:00) or D-HH:MM:SS (1-00:00:00)")
    days, a, b, c = m.groups()
    parts = [int(x) for x in (a, b, c) if x is not None]
    if days is not None:  # D-H, D-H:M, D-H:M:S
        h, mi, se = (parts + [0, 0])[:3]
        seconds = ((int(days) * 24 + h) * 60 + mi) * 60 + se
    elif len(parts) == 1:
        seconds = parts[0] * 60
    elif len(parts) == 2:  # M:S
        seconds = parts[0] * 60 + parts[1]
    else:
        seconds = (parts[0] * 60 + parts[1]) * 60 + parts[2]
    if seconds <= 0:
        raise SlurmSettingError(f"{field_name}={value!r}: the time limit must be at least one minute")
    return max(1, math.ceil(seconds / 60))


def gres_for(gres: Any, gpus_per_job: Any, gpu_type: Any = None) -> Optional[str]:
    """The ``--gres`` of a job: ``auto`` -> ``gpu[:<type>]:<gpus_per_job>`` for a GPU model, none for a CPU one;
    ``null``/``none`` -> none; anything else is passed to Slurm as given (e.g. ``gpu:a100:2``)."""
    if gres is None or str(gres).lower() in ("none", "null", ""):
        return None
    if str(gres) != "auto":
        return str(gres)
    try:
        n = int(gpus_per_job or 0)
    except (TypeError, ValueError):
        raise SlurmSettingError(f"model.gpus_per_job={gpus_per_job!r}: expected a GPU count for slurm.gres=auto")
    if n <= 0:
        return None
    return f"gpu:{gpu_type}:{n}" if gpu_type else f"gpu:{n}"




def count(value: Any, field_name: str = "slurm.array_parallelism") -> int:
    """An integer setting (``8``, ``"8"``); a word, a fraction or a boolean is a :class:`SlurmSettingError`."""
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit())):
        raise SlurmSettingError(f"{field_name}={value!r}: must be a whole number (e.g. {field_name}=8)")
    return int(value)


def check_resources(p: Mapping[str, Any]) -> None:
    """The values of a job's resources as the launcher reads them (``slurm.*``, or ``hydra.launcher``): the time
    limit, at least one job at once, and whole numbers of CPUs and GB."""
    if p.get("time") is not None:
        time_minutes(p["time"])
    if count(p.get("array_parallelism") or 0) < 1:
        raise SlurmSettingError(f"slurm.array_parallelism={p.get('array_parallelism')!r}: must be >= 1 (how many "
                                "jobs of one sweep run at once)")
    for k in ("cpus_per_task", "mem_gb"):
        if p.get(k) is not None and count(p[k], f"slurm.{k}") < 1:
            raise SlurmSettingError(f"slurm.{k}={p[k]!r}: must be >= 1 (or null for the cluster's default)")


#: a value Slurm reads as text or as a number (``time: 90`` or ``"1:30:00"``; ``cpus_per_task: 8`` or ``"8"``)
_Value = Optional[Union[StrictStr, StrictInt, float, bool]]


class SlurmSettings(Section, BaseModel):
    """``slurm.*``: the resources of each sweep job (partition, account, qos, time limit, gres, CPUs, memory, array
    parallelism, constraint). Values are kept as given (submitit gets them so); :func:`check_resources` reads them
    as the launcher will."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    section: ClassVar[str] = "slurm"
    error: ClassVar[type[UserError]] = SlurmSettingError
    fix: ClassVar[str] = "a mapping, e.g. slurm.partition=gpu"

    partition: Optional[StrictStr] = None
    account: Optional[StrictStr] = None
    qos: Optional[StrictStr] = None
    time: _Value = "12:00:00"
    array_parallelism: _Value = 64
    gres: Optional[StrictStr] = "auto"
    gpu_type: Optional[StrictStr] = None
    cpus_per_task: _Value = 8
    mem_gb: _Value = 64
    constraint: Optional[StrictStr] = None

    def model_post_init(self, context: Any) -> None:
        check_resources(self.model_dump())

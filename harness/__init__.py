"""The WorldMem harness: records (work items, run directories, cases, IO, video), KV-context policies
(:mod:`harness.context`) and, above every other layer, the application (:mod:`harness.app`)."""

from pathlib import Path

#: the checkout (or installed tree) that holds ``harness/``, ``adapters/``, ``evaluate/``, ``trajectories/``
PROJECT_ROOT = Path(__file__).resolve().parent.parent

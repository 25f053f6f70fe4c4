"""The run config a command line composes (Hydra's composition and the one validation, nothing run), for the rules
tests of planning, the run command and the executor."""

from __future__ import annotations

#: a small weight-free run: the reference model at 96x160, 65 frames, two demo cases, LRLR
SMALL_REFERENCE = ("model=reference", "output_root=outputs", "model.height=96", "model.width=160",
                   "model.num_frames=65", "cases.include=[environment_rocket,human_astronaut]", "trajectory=lrlr")


def composed(*overrides: str) -> dict:
    """``python -m harness <overrides>``'s config as a plain mapping, interpolations resolved."""
    from harness.app.argv import resolved
    from harness.app.settings import compose_config

    return resolved(compose_config(list(overrides)))


def run_config(*overrides: str):
    """The validated :class:`harness.app.run_config.RunConfig` of ``python -m harness <overrides>``."""
    from harness.app.settings import load_run_config

    return load_run_config(composed(*overrides))

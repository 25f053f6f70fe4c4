"""Upstream launch contracts as data: what each model's own code accepts, read at the pinned commit.

``adapters/<model>/contract.yaml`` records, each fact with the upstream file and line it was read from:

- ``entry``: the script ``command.sh`` runs and its command-line flags (name, required, type, choices, action,
  nargs) as upstream's ``argparse`` defines them (``python -m adapters.contracts.extract <script>`` lists them);
  ``kind: env`` entries (a shell launcher) instead list the environment variables the launcher chain reads;
- ``env``: environment variables the launcher or script reads (and the values they accept);
- ``call_sites``: for every upstream function a shim replaces, how upstream calls it (arguments) and what it
  unpacks from the result (arity, types);
- ``output``: where upstream writes the video (a file flag, or a directory plus a file name rule);
- ``canvas``: how upstream derives the generated frame size from the image;
- ``checkpoint`` / ``imports`` / ``literals``: paths the loader opens (by config key), the packages the
  environment must import, and source literals a shim patches;
- the audited sections, typed and validated here (:func:`validate`): ``environment`` (the recipe as ordered
  :class:`Step` s), ``weights`` (:class:`Weight`), ``env_vars``, ``hub_fetches`` (:class:`HubFetch`, with how the
  launch avoids each), ``writer`` (:class:`Writer`: fps, frame rule, anchor and ``first_pose``, overlays,
  post-processing, log failures, checkout writes), ``seeds``, ``intrinsics``, ``defaults_differ``, ``gpus``,
  ``gpu_memory``, ``license``. A malformed section raises :class:`ContractSchemaError` naming the model and the
  dotted key (``writer.overlays[0].switch``); free text may sit beside any fact under a ``*_source`` / ``*_note``
  key.

The facts are written in the project's own words and format; no upstream code is copied. Tests parse every
compiled ``command.sh`` against its contract (:func:`check_args`, :func:`check_env`) and call each shim's
replacement the way the recorded call site does. Nothing here imports torch or touches upstream code.

The package is three modules plus the loader, re-exported here: :mod:`~adapters.contracts.schema` (the
dataclasses and :class:`Contract`), :mod:`~adapters.contracts.validation` (builds them with pydantic and checks
them), :mod:`~adapters.contracts.launch` (the argparse builder, the ``command.sh`` parser and the launch checks)
and :mod:`~adapters.contracts.loader` (where the files are, :func:`load`, :func:`available`).
"""

from adapters.contracts.launch import (
    HARNESS_ENV,
    ContractViolation,
    ParsedLaunch,
    build_parser,
    check_args,
    check_env,
    hub_fetch_violations,
    native_violations,
    overlay_violations,
    parse_command_sh,
    split_launch,
)
from adapters.contracts.loader import ADAPTERS_DIR, CONTRACT_FILE, available, contract_path, load
from adapters.contracts.schema import (
    CheckoutWrite,
    CheckpointEntry,
    Contract,
    ContractSchemaError,
    DayOne,
    DefaultDiffers,
    Editable,
    Environment,
    EnvVar,
    Fork,
    GpuMemory,
    Gpus,
    HubFetch,
    ImportProbe,
    Intrinsics,
    License,
    LogFailure,
    NativeLaunch,
    Overlay,
    OverlaySwitch,
    Policies,
    PostProcess,
    RegimeCaveat,
    SameLaunch,
    SeedFact,
    Step,
    TorchSpec,
    Weight,
    Writer,
)
from adapters.contracts.validation import contract_from_raw, validate

__all__ = [
    "ADAPTERS_DIR", "CONTRACT_FILE", "HARNESS_ENV", "CheckoutWrite", "CheckpointEntry", "Contract",
    "ContractSchemaError", "ContractViolation", "DayOne", "DefaultDiffers", "Editable", "EnvVar", "Environment",
    "Fork", "GpuMemory", "Gpus", "HubFetch", "ImportProbe", "Intrinsics", "License", "LogFailure", "NativeLaunch",
    "Overlay", "OverlaySwitch", "ParsedLaunch", "Policies", "PostProcess", "RegimeCaveat", "SameLaunch", "SeedFact",
    "Step", "TorchSpec", "Weight", "Writer",
    "available", "build_parser", "check_args", "check_env", "contract_from_raw", "contract_path",
    "hub_fetch_violations", "load", "native_violations", "overlay_violations", "parse_command_sh", "split_launch",
    "validate",
]

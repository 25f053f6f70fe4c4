"""YUME 5B (stdstu12/YUME@111c3fa): controlled by captions only.

Native input: a caption file, one line per stage (``caption_re.txt`` format): ``First-person perspective.`` + a
movement sentence + a rotation sentence + a speed sentence. Upstream appends the InternVL captioner's answer to
every line (``fastvideo/sample/sample_5b.py:817``); following the paper (appendix C: no additional prompt
refinement, the content prompt appended verbatim to every stage) the shim answers with the case prompt verbatim
(``model.prompt_refinement: false``), so the scene prompt goes in ``--prompt`` and the shim's answer only. Each stage
decodes to 29 frames and upstream drops the anchor (the image is never decoded), so 17 stages write 493 frames that
show poses 1..493; the item gets the canvas in front (494 poses, 552 for LRLRLR's 19 stages).
``--sp_size`` changes nothing at the pinned commit (the 5B model is built without sequence parallelism), so one
rank runs (``gpus_per_job: 1``).
Keys come from each stage's net motion with snap thresholds (:class:`adapters.yume.controls.YumeParams`), speeds are
written exactly, and the item's path is laid on whole stages (:meth:`YumeAdapter.control_clock`, docs/controls.md),
so a release preset's captions decode back to it exactly; an eased turn is carried at one speed per stage.

Upstream does not seed (``set_seed`` is commented out, ``generate`` draws a random seed, later stages use the
global RNG) and conditions stage s >= 1 on caption line s-1 (sample_5b.py:1089): ``runner.py`` seeds, passes
``seed=`` to every ``Yume.generate`` call and hands call k line k, so stage s receives the controls of stage s.
It also points the two hard-coded paths (``./Yume-5B-720P``, the InternVL3-2B captioner) at ``model.checkpoint``
and ``model.captioner``. Upstream writes one mp4 per stage holding every frame so far; the last is the video.
Poses follow :mod:`trajectories.conventions`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Optional

import numpy as np
import pydantic.dataclasses

from adapters.base import CONFIG, ItemRequest, ModelConfigError, NativeControls
from adapters.controls.clock import ControlClock
from adapters.upstream import LaunchSpec, UpstreamAdapter, UpstreamConfig
from adapters.yume.controls import YumeParams, yume_captions, yume_clock, yume_decode, yume_parse_caption
from harness.context import ContextPolicy
from harness.io import write_text


@pydantic.dataclasses.dataclass(frozen=True, kw_only=True, config=CONFIG)
class YumeConfig(UpstreamConfig):
    """YUME settings: caption policy (see :class:`adapters.yume.controls.YumeParams`) and the upstream script."""

    frames_per_stage: int = 29
    rotation_snap_deg: float = 0.5
    translation_snap: float = 1e-3
    deg_per_speed_unit: float = 1.0
    units_per_speed_unit: float = 0.0032
    script: str = "fastvideo/sample/sample_5b.py"
    generate_target: str = "wan23.Yume.generate"
    captioner: Optional[str] = None
    prompt_refinement: bool = False

    def params(self) -> YumeParams:
        return YumeParams(self.frames_per_stage, self.rotation_snap_deg, self.translation_snap,
                          self.deg_per_speed_unit, self.units_per_speed_unit)


class YumeAdapter(UpstreamAdapter):
    contexts: ClassVar[tuple[str, ...]] = ("native", "fullkv")  # the whole history is re-fed every stage
    # fullkv is native's launch: declared with upstream's line in the contract (policies.same_launch)
    unsupported_reasons = {"sliding": "would mean truncating the re-fed history; nothing upstream does it",
                           "fov": "would mean selecting the re-fed history; nothing upstream does it"}
    config_class = YumeConfig
    config: YumeConfig
    always_shimmed = True

    uses_canvas_image = False  # write_native never reads the canvas array (adapters.upstream)

    def control_clock(self, num_frames: int) -> ControlClock:
        """One caption per 29-frame stage (sample_5b.py:812-820, :1083-1092@111c3fa). Each segment keeps its length
        to the nearest whole stage (``length``), so equal sweeps stay equal: the paper's YUME counts are whole
        stages of sweeps plus one held stage (17 = 4 x 4 + 1 for LRLR and LRUD, 19 = 6 x 3 + 1 for LRLRLR)."""
        return ControlClock(tuple(yume_clock(num_frames, self.config.params()).tolist()),
                            "YUME conditions each 29-frame stage on one caption (sample_5b.py:812-820, :1083-1092)",
                            keep="length")

    def write_native(self, req: ItemRequest, image: Optional[np.ndarray], K: np.ndarray) -> NativeControls:
        N = req.path.num_frames
        if (N - 1) % self.config.frames_per_stage:
            raise ModelConfigError(f"YUME makes 29 frames per caption stage after the image (29 k + 1 poses); {N} is "
                                   "not one (model.num_frames or model.frames_per_trajectory)")
        # camera sentences only: with --jpg_dir upstream appends the captioner's refinement of --prompt to every
        # line (sample_5b.py:817), so the scene prompt reaches the model through --prompt, once
        lines = yume_captions(req.path.c2w, "", self.config.params())
        d = req.controls_dir
        write_text(d / "caption.txt", "\n".join(lines) + "\n")
        (d / "jpg").mkdir(exist_ok=True)
        import cv2

        self.write_canvas(d / "jpg" / "image.jpg", req.case, (cv2.IMWRITE_JPEG_QUALITY, 95))
        keys = [yume_parse_caption(x) for x in lines]
        return NativeControls(files={"caption.txt": str(d / "caption.txt"), "jpg/image.jpg": str(d / "jpg/image.jpg")},
                              meta={"stages": len(lines), "stage_keys": keys,
                                    "upstream_clock": req.path.params.get("upstream_clock")})

    def decode(self, controls_dir: Path, req: ItemRequest) -> np.ndarray:
        lines = [x for x in (controls_dir / "caption.txt").read_text().splitlines() if x.strip()]
        return yume_decode(lines, self.config.params())

    def launch(self, req: ItemRequest, controls: NativeControls) -> LaunchSpec:
        c, d = self.config, req.controls_dir
        out_dir = req.item_dir / "upstream_out"
        args = ["--seed", str(req.seed), "--caption_path", str(d / "caption.txt"), "--num_euler_timesteps",
                str(c.sampling_steps), "--jpg_dir", str(d / "jpg"), "--prompt", req.case.prompt, "--video_output_dir",
                str(out_dir)]
        shim = ["--seed", str(req.seed), "--captions", str(d / "caption.txt"), "--generate", c.generate_target,
                "--checkpoint", self.ckpt()]
        if c.prompt_refinement:  # upstream's InternVL rewrite of the prompt
            shim += ["--captioner", c.captioner or "<model.captioner>"]
        else:  # the paper's setting: the content prompt verbatim on every line
            shim += ["--verbatim-prompt", str(d / "prompt.txt")]
        stages = (req.path.num_frames - 1) // c.frames_per_stage
        # one file per rank and stage, each with every frame so far (sample_5b.py:1076-1080, name ends
        # _<rank>_<stage>.mp4): rank 0's last stage is the video
        return LaunchSpec(script=c.script, args=args, out_dir=str(out_dir), output_glob=f"*_0_{stages - 1}.mp4",
                          wrapper=self.shim_path(__file__), wrapper_args=shim)

    def checkpoint_paths(self) -> dict[str, Optional[str]]:
        return {**super().checkpoint_paths(), "captioner": self.config.captioner}

    def told_upstream(self, policy: ContextPolicy) -> dict[str, Any]:
        return {"passed": "nothing: upstream's defaults", "window": "every earlier frame, re-fed each 29-frame stage"}

"""A stand-in for an upstream entry script that holds the harness to upstream's contract.

It parses its command line with the model's recorded flags (``adapters/<model>/contract.yaml``: unknown,
ambiguous or missing flags, bad choices and types fail as upstream's argparse would), calls every function a
harness shim replaces exactly the way upstream's call site does (same arguments, same unpacking), records what it
saw, and writes a video where the contract says upstream writes it (a file flag, or a folder plus upstream's file
name rule), with the frame count, fps and frame size it is told to. The frames are the conditioning image (the
file upstream reads it from), shifted a pixel per frame like a slow pan; overlays are drawn the way the contract
says upstream draws them unless they are switched off (Evoke's ``JOYSTICK_HUD``), and Matrix-Game 3's frames go
through ``utils.visualize.process_video`` as at its call site, so a shim that does not replace it leaves key boxes
in the video. ``FAKE_NO_WRITE`` makes it exit 0 without writing; ``FAKE_LOG`` is printed to the log.
"""

import importlib
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root
from adapters import contracts  # noqa: E402


def call_sites(model: str, ns, seen: dict) -> None:
    if model == "hy_worldplay":  # worldplay_video_pipeline.py:1125, once per chunk with its first latent
        rc = importlib.import_module("hyvideo.utils.retrieval_context")
        w2c = np.tile(np.eye(4), (124, 1, 1))
        sel = rc.select_aligned_memory_frames(w2c, 8, memory_frames=20, temporal_context_size=12, pred_latent_size=4,
                                              points_local=None, device="cpu")
        seen["selection_8"] = sorted(set(int(i) for i in sel) - set(range(8, 12)))
    elif model == "matrix_game3":  # inference_pipeline.py::generate
        import torch
        from PIL import Image

        uu = importlib.import_module("utils.utils")
        num_frames = 57 + (ns.num_iterations - 1) * 40
        height, width = (int(x) for x in ns.size.split("*"))
        pil = Image.new("RGB", (width, height))
        # the pin's call site passes no key_strength (inference_pipeline.py:394@20e033e3)
        current_image, extrinsics_all, keyboard_condition_all, mouse_condition_all = uu.get_data(
            num_frames, height, width, pil, device="cpu", dtype=torch.float32)
        seen["get_data"] = {"image": list(current_image.shape), "extrinsics": list(np.asarray(extrinsics_all).shape),
                            "keyboard": list(keyboard_condition_all.shape), "mouse": list(mouse_condition_all.shape)}
        seen["extrinsics"] = np.asarray(extrinsics_all).tolist()
    elif model == "yume":  # sample_5b.py:812-817 reads the captions, :901 prepares stage 0, :1088 stage s+1
        wan23 = importlib.import_module("wan23")
        captions = [line.rstrip("\n") + " RESPONSE" for line in open(ns.caption_path, encoding="utf-8")]
        model_obj = wan23.Yume()
        model_obj.generate(captions[0], frame_num=33, max_area=704 * 1280, latent_frame_zero=8, img=None)
        for step_sample in range(len(captions) - 1):
            model_obj.generate(captions[step_sample], frame_num=33, max_area=704 * 1280, latent_frame_zero=8, img=None)
        seen["yume_calls"] = wan23.CALLS
        seen["yume_captions"] = [c[: -len(" RESPONSE")] for c in captions]
        seen["yume_hardcoded"] = {"checkpoint": wan23.__dict__.get("CKPT"), "captioner": None}
    elif model == "dreamx":  # inference_ar_forcing.py:301
        tp = importlib.import_module("utils.trajectory_processor")
        num_pixel_frames = (ns.num_output_frames - 1) * 4 + 1
        _, cam_params_np, _ = tp.generate_trajectory_from_json(trajectory_spec=[], num_frames=num_pixel_frames,
                                                                 return_cam_params=True)
        seen["rows"] = [list(np.asarray(cam_params_np).shape), [len(r.tolist()) for r in cam_params_np[:1]]]
        pipe = importlib.import_module("pipeline.pipeline_causal_camera")
        seen["kv_cache_size"] = pipe.kv_cache_size_for(-1)
        seen["max_attention_size"] = importlib.import_module(
            "wan.modules.causal_camera_model_2_2_prope_infinity").max_attention_size_for(-1)
        seen["local_attn_size"] = importlib.import_module("utils.wan_wrapper").WanDiffusionCameraWrapper().local_attn_size
    elif model == "matrix_game35":
        import yaml

        seen["config_seed"] = yaml.safe_load(open(ns.config))["seed"]


def output_path(contract, ns, env: dict) -> str:
    """Where upstream writes its video (contract ``output``)."""
    model, out = contract.model, contract.output
    if out.get("kind") == "file":
        return getattr(ns, out["flag"].lstrip("-").replace("-", "_"))
    if model == "hy_worldplay":
        return os.path.join(ns.output_path, "gen.mp4")
    if model == "sana_wm":
        return os.path.join(ns.output_dir, f"{ns.name or 'output'}_streaming.mp4")
    if model == "matrix_game3":
        return os.path.join(ns.output_dir, f"{ns.save_name}.mp4")
    if model == "yume":
        stages = sum(1 for _ in open(ns.caption_path))
        return os.path.join(ns.video_output_dir, f"prompt_caption_0_0_{stages - 1}.mp4")  # <id>_<cap>_<rep>_<rank>_<stage>
    if model == "dreamx":
        item = json.load(open(ns.data_path))[0]
        img = item["image_path"]
        name = f"{os.path.basename(os.path.dirname(img))}_{os.path.splitext(os.path.basename(img))[0]}"
        return os.path.join(ns.output_folder, f"{item.get('task_id', '0')}_{name}.mp4")
    if model == "evoke":
        row = json.loads(open(env["JSONL"]).readline())
        return os.path.join(env["OUT_ROOT"], row["name"], "geo_pred.mp4")
    raise SystemExit(f"stand-in: no output rule for {model}")


def image_path(contract, ns, env: dict) -> str:
    """The conditioning image upstream reads (each entry script's own input)."""
    model = contract.model
    if model == "evoke":
        return json.loads(open(env["JSONL"]).readline())["image_path"]
    if model == "dreamx":
        return json.load(open(ns.data_path))[0]["image_path"]
    if model == "yume":
        return os.path.join(ns.jpg_dir, sorted(os.listdir(ns.jpg_dir))[0])
    return getattr(ns, "image_path", None) or ns.image


def frames_from(image: str, n: int, h: int, w: int) -> list:
    import cv2

    img = cv2.cvtColor(cv2.imread(image), cv2.COLOR_BGR2RGB)
    img = cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA)
    return [np.roll(img, i, axis=1) for i in range(n)]


def draw_hud(frame):
    """An overlay like the ones the contracts record: boxes with letters, at a fixed place."""
    import cv2

    f = np.ascontiguousarray(frame.copy())
    h, w = f.shape[:2]
    for k in range(3):
        x = 4 + k * (w // 4)
        cv2.rectangle(f, (x, h // 2), (x + w // 5, h - 4), (255, 255, 255), 2)
        cv2.putText(f, "WAS"[k], (x + 3, h - 8), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (0, 255, 0), 2)
    return f


def write_mp4(out: str, frames: list, fps: float) -> None:
    import av

    h, w = frames[0].shape[:2]
    c = av.open(out, "w")
    s = c.add_stream("libx264", rate=int(round(fps)))
    s.width, s.height, s.pix_fmt = w, h, "yuv420p"
    s.options = {"crf": "12"}
    for f in frames:
        for p in s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")):
            c.mux(p)
    for p in s.encode():
        c.mux(p)
    c.close()


def main():
    model = os.environ["FAKE_MODEL"]
    contract = contracts.load(model)
    env = dict(os.environ)
    ns = None
    if contract.entry.get("kind") == "env":
        exported = {k: env[k] for k in contract.env if k in env}
        contracts.check_env(contract, exported)
    else:
        try:
            ns = contracts.check_args(contract, sys.argv[1:])
        except contracts.ContractViolation as exc:
            print(f"{contract.entry['script']}: error: {exc}", file=sys.stderr)
            sys.exit(2)
    seen = {"argv": sys.argv, "cwd": os.getcwd(), "cuda": env.get("CUDA_VISIBLE_DEVICES"),
            "env": {k: v for k, v in env.items() if k in contract.env}}
    call_sites(model, ns, seen)
    if os.environ.get("FAKE_FAIL"):
        print("Traceback (most recent call last):\n  File \"generate.py\", line 1, in <module>\n"
              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", file=sys.stderr)
        sys.exit(3)
    out = output_path(contract, ns, env)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    json.dump(seen, open(os.environ["FAKE_RECORD"], "w"))
    if contract.writer.skip_if_exists and os.path.exists(out):  # DreamX, Evoke: an existing output is "done"
        return
    if os.environ.get("FAKE_LOG"):
        print(os.environ["FAKE_LOG"])
    if os.environ.get("FAKE_NO_WRITE"):  # like LingBot's save_video, which swallows its errors and exits 0
        return
    n, fps = int(os.environ["FAKE_FRAMES"]), float(os.environ["FAKE_FPS"])
    h, w = (int(x) for x in os.environ.get("FAKE_HW", "48x64").split("x"))
    frames = frames_from(image_path(contract, ns, env), n, h, w)
    if model == "matrix_game3":  # rank 0's writer: process_video draws the HUD and writes (inference_pipeline.py:733)
        vis = importlib.import_module("utils.visualize")
        vis.process_video(np.stack(frames), out, (np.zeros((n, 6)), np.zeros((n, 2))), "assets/images/mouse.png",
                          mouse_scale=0.2, default_frame_res=(h, w))
        return
    for ov in contract.writer.overlays:  # drawn unless upstream's own switch is off
        if ov.default == "on" and ov.switch and ov.switch.env and env.get(ov.switch.env) != ov.switch.off:
            frames = [draw_hud(f) for f in frames]
    write_mp4(out, frames, fps)


if __name__ == "__main__":
    main()

"""A stand-in for an upstream inference script: it follows the documented CLI shape, touches the functions the
harness shims patch, records what it saw, and writes a video with the frame count and fps it is told to."""

import argparse
import importlib
import json
import os
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--save_file", "--output", "--output_path", "--output_dir", "--output_folder", "--video_output_dir",
                 "--config", "--seed", "--base_seed", "--pose", "--camera", "--caption_path"):
        ap.add_argument(flag)
    args, _ = ap.parse_known_args()
    seen = {"argv": sys.argv, "cwd": os.getcwd(), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "env": {k: v for k, v in os.environ.items() if k in ("MODE", "NUM_CHUNKS", "SEED", "JSONL", "CAP_MODE",
                                                                  "POSE_SMOOTH_WIN")}}
    probe = os.environ.get("FAKE_PROBE")
    if probe == "hy":
        rc = importlib.import_module("hyvideo.utils.retrieval_context")
        seen["selection_8"] = rc.select_aligned_memory_frames(None, 8)
    elif probe == "mg3":
        d = importlib.import_module("utils.utils").get_data()
        seen["get_data"] = {k: list(np.asarray(v).shape) for k, v in d.items()}
    elif probe == "yume":
        seen["yume_seed"] = importlib.import_module("wan23").Yume().generate("prompt")
    elif probe == "dreamx":
        seen["rows"] = len(importlib.import_module("utils.trajectory_processor").generate_trajectory_from_json({}))
        seen["kv_cache_size"] = importlib.import_module("pipeline.pipeline_causal_camera").KV_CACHE_SIZE
    elif probe == "mg35":
        import yaml

        seen["config_seed"] = yaml.safe_load(open(args.config))["seed"]
    if os.environ.get("FAKE_FAIL"):
        print("simulated failure", file=sys.stderr)
        sys.exit(3)
    out = args.save_file or args.output or args.output_path
    if out is None:
        d = args.output_dir or args.output_folder or args.video_output_dir or os.environ.get("OUTPUT_DIR")
        out = os.path.join(d, "sample_0.mp4")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    json.dump(seen, open(os.environ["FAKE_RECORD"], "w"))
    import av

    n, fps = int(os.environ["FAKE_FRAMES"]), float(os.environ["FAKE_FPS"])
    c = av.open(out, "w")
    s = c.add_stream("libx264", rate=int(fps))
    s.width, s.height, s.pix_fmt = 64, 48, "yuv420p"
    for i in range(n):
        img = np.full((48, 64, 3), (i * 5) % 255, np.uint8)
        for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
            c.mux(p)
    for p in s.encode():
        c.mux(p)
    c.close()


if __name__ == "__main__":
    main()

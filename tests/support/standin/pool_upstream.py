"""A stand-in upstream job for the GPU-pool tests: records the GPUs it was given and when it ran, sleeps, and
writes a short video (or crashes when its arguments mention ``$FAKE_CRASH_ON``)."""

import json
import os
import sys
import time
import uuid



def main():
    args = sys.argv[1:]
    # SANA-WM's output contract (adapters/sana_wm/contract.yaml): <output_dir>/<name>_streaming.mp4
    out = os.path.join(args[args.index("--output_dir") + 1], args[args.index("--name") + 1] + "_streaming.mp4")
    t0 = time.time()
    time.sleep(float(os.environ.get("FAKE_SLEEP", "1")))
    rec = {"cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "start": t0, "end": time.time(), "pid": os.getpid(),
           "argv": args}
    crash = os.environ.get("FAKE_CRASH_ON")
    rec["crashed"] = bool(crash and any(crash in a for a in args))
    d = os.environ["FAKE_RECORD_DIR"]
    with open(os.path.join(d, f"{uuid.uuid4().hex}.json"), "w") as f:
        json.dump(rec, f)
    if rec["crashed"]:
        print("simulated crash", file=sys.stderr)
        sys.exit(3)
    import av
    import cv2
    import numpy as np

    os.makedirs(os.path.dirname(out), exist_ok=True)
    n, fps = int(os.environ["FAKE_FRAMES"]), int(os.environ["FAKE_FPS"])
    # the conditioning image, panned a pixel per frame: it passes the harness's conformance checks
    img = cv2.resize(cv2.cvtColor(cv2.imread(args[args.index("--image") + 1]), cv2.COLOR_BGR2RGB), (64, 48))
    c = av.open(out, "w")
    s = c.add_stream("libx264", rate=fps)
    s.width, s.height, s.pix_fmt = 64, 48, "yuv420p"
    for i in range(n):
        for p in s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(np.roll(img, i, axis=1)), format="rgb24")):
            c.mux(p)
    for p in s.encode():
        c.mux(p)
    c.close()


if __name__ == "__main__":
    main()

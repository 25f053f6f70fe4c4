"""Matrix-Game 3 runner shim (runs inside the model's environment; targets Matrix-Game-3 utils/utils.py).

Upstream's ``get_data()`` builds random benchmark actions and the extrinsics they integrate to. This shim replaces
it with the harness's compiled keyboard (T,6), mouse (T,2) and matching extrinsics (T,4,4), returned under the
names the pipeline consumes (``keyboard_condition``, ``mouse_condition``, ``extrinsics_all``) [inferred from
native-controls.md §5.3], and seeds the global RNGs.

Usage: ``python runner.py --seed S --keyboard K.npy --mouse M.npy --extrinsics E.npy -- generate.py <args>``.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from adapters.shim import main_with, patch_attr  # noqa: E402


def patch(opts):
    import numpy as np

    kb, ms, ext = np.load(opts.keyboard), np.load(opts.mouse), np.load(opts.extrinsics)

    def make(original):
        def get_data(*args, **kwargs):
            return {"keyboard_condition": kb, "mouse_condition": ms, "extrinsics_all": ext}

        return get_data

    patch_attr("utils.utils", "get_data", make)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--keyboard", required=True)
    ap.add_argument("--mouse", required=True)
    ap.add_argument("--extrinsics", required=True)
    main_with(ap, patch)

"""The console summary never averages across models, contexts, trajectories or seeds, and never shows ground truth."""

from harness.__main__ import _short_table


def _res(model, context, trajectory, seed, value, kind="diagnostic"):
    return {"item": {"model": model, "context": context, "trajectory": trajectory, "seed": seed},
            "metrics": {"environment.visible[pixel-thumb16]": {"status": "computed", "value": value,
                                                               "backbone_kind": kind},
                        "environment.depth[oracle]": {"status": "computed", "value": 1.0, "backbone_kind": "oracle"}}}


def test_groups_are_kept_apart_and_oracles_left_out():
    text = _short_table([_res("reference", "fov", "lrlr", 1, 0.2), _res("reference", "fov", "lrlr", 1, 0.4),
                         _res("tiny_causal_dit", "fov", "lrlr", 1, 0.9), _res("reference", "fov", "lrlr", 2, 0.7)])
    blocks = text.split("\n")
    assert "reference / fov / lrlr / seed 1" in blocks and "reference / fov / lrlr / seed 2" in blocks
    i = blocks.index("reference / fov / lrlr / seed 1")
    assert "0.3000  (n=2)" in blocks[i + 1]  # the mean of its two cases only
    j = blocks.index("tiny_causal_dit / fov / lrlr / seed 1")
    assert "0.9000  (n=1)" in blocks[j + 1]
    assert "oracle" not in text

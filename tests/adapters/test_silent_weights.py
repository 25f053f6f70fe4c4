"""Silent wrong weights are caught (issue 31): every upstream that loads a checkpoint with ``strict=False`` and only
logs what is missing has a ``writer.log_failures`` pattern that fails the item on that line (exit 0 or not), and
lets the clean line pass. The lines are upstream's own format strings at the pinned commits (each case cites it);
loads that raise on a missing key (HY-WorldPlay worldplay_1_5_transformer.py:1021-1033@da2d0c2, Matrix-Game 3.5
module_mixins.py:45-65@fa6d2b6, YUME's strict load, textimage2video.py:156-158@111c3fa) need no pattern.
"""

from __future__ import annotations

import pytest

from adapters.base import build_adapter
from adapters.upstream import UpstreamRunError
from harness.config_groups import group_yaml

CASES = [
    # DreamX: print("missing:", missing) (inference_ar_forcing.py:203-207@a1f4c6e)
    ("dreamx", "missing: ['model.blocks.0.self_attn.q.weight']", "missing: []"),
    # Matrix-Game 3: logging.info(f"VAE checkpoint loaded with strict=False (missing=..., unexpected=...)")
    # (wan/modules/vae2_2.py:1045-1048@71c3cd7f7413)
    ("matrix_game3", "[2026-12-03 10:00:00,000] INFO: VAE checkpoint loaded with strict=False (missing=24, unexpected=0)",
     "[2026-12-03 10:00:00,000] INFO: VAE checkpoint loaded with strict=False (missing=0, unexpected=2)"),
    # SANA-WM: self.logger.warning(f"Missing keys: {missing}") (inference_sana_wm.py:1049-1056@af849ea1)
    ("sana_wm", "2026-12-03 10:00:00 - [Sana] - WARNING - Missing keys: ['blocks.3.attn.qkv.weight']",
     "2026-12-03 10:00:00 - [Sana] - WARNING - Missing keys: ['pos_embed']"),
    # Evoke: print(f"### missing keys: {len(m)}; ...") and print(key, "Size don't match, skip")
    # (evoke/modules/transformer_evoke.py:2520-2529@74d2685)
    ("evoke", "### missing keys: 7; ", "### missing keys: 0; "),
    ("evoke", "blocks.0.cam_proj.weight Size don't match, skip", "### All Parameters: 1300.0 M"),
]


@pytest.mark.parametrize("model, bad, good", CASES)
def test_a_partial_checkpoint_fails_the_item(model, bad, good, tmp_path):
    a = build_adapter(group_yaml("model", model))
    log = tmp_path / "upstream.log"
    a.check_log(f"loading...\n{good}\nstep 1/4\n", log)  # the clean line passes
    with pytest.raises(UpstreamRunError, match="upstream exited 0 but its log says") as e:
        a.check_log(f"loading...\n{bad}\nstep 1/4\n", log)
    assert bad.strip()[:40] in str(e.value) and "random" in str(e.value)

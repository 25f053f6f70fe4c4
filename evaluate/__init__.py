"""Evaluation: every WorldMemBench formula, the multi-revisit protocol, perception interfaces, the stage that
evaluates a run, analyses and reports. Formulas live in one module per family:

* :mod:`evaluate.camera` — ``umeyama_sim3``, ``rpe_translation`` (Eq. 2), ``rpe_rotation`` (Eq. 3);
* :mod:`evaluate.memory` — ``revisit_similarity`` (Eq. 4), ``normalized_silhouette`` / ``silhouette_iou`` (Eq. 5),
  ``depth_spearman``, ``spherical_grid`` / ``spherical_reconstruction_score`` (Eq. 6), ``select_return_frame``;
* :mod:`evaluate.dynamic` — ``score_checklist``, ``decompose`` (appendix D);
* :mod:`evaluate.aggregate` — ``rollout_score`` (Eq. 1), bootstrap intervals, paired comparisons.
* :mod:`evaluate.families.departure` — ``departure.visible`` and ``departure.return_visible`` (the
  ``departure_revisit`` protocol extension, beyond the paper: the reference is the first departure's away view, so
  memory is tested beyond a context policy's sink) and ``departure.sweep_visible`` (``departure_sweep``: every view
  of the first departure, revisited by the later phases that turn back through it).
"""

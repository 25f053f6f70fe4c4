"""Human evaluation of the metrics (WorldMemBench appendix F; docs/human-study.md).

* :mod:`~evaluate.human.design`: blinded A/B pairs (static memory) or checklist instances (dynamic memory) sampled
  from evaluated runs, with the media, the hidden key and the annotators' tokens (``human plan``);
* :mod:`~evaluate.human.store`: the SQLite vote store the annotation server writes (WAL, one vote per annotator
  and item);
* :mod:`~evaluate.human.stats`: the statistics (pairwise agreement, win rates, Spearman rho, PLCC, Fleiss'
  kappa), pure functions;
* :mod:`~evaluate.human.analysis` and :mod:`~evaluate.human.report`: votes joined with the key, the agreement
  tables with the paper's Table 6 and 7 numbers beside ours (``human report``), the raw vote export;
* :mod:`~evaluate.human.sources`: the one place that reads run records (manifest, metrics.json).

The web server lives in the app layer (``harness/app/human/``); nothing here imports a web framework.
"""

from .common import StudyError, resolve_study

__all__ = ["StudyError", "resolve_study"]

"""The application layer: the command line (:mod:`harness.app.cli`), planning (:mod:`harness.app.plan`), running
(:mod:`harness.app.runner`), the delivery check (:mod:`harness.app.verify`) and the benchmarks
(:mod:`harness.app.bench`). It sits above every other layer (records, context policies, adapters, evaluation)
and nothing below imports it (``tests/test_layers.py``)."""

"""Benchmarks that need models (``python -m harness.bench ...``). They sit above :mod:`harness.context` and the
adapters, so the context package imports no model code (``tests/test_layers.py``)."""

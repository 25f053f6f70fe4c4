"""LingBot-World v2 adapter: LingBot's controls plus the FoV KV-gather shim (``fov_runner.py``)."""

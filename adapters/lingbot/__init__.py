"""LingBot-World v1 adapter (causal "fast" build; see adapter.py for the caveat)."""

"""Model adapters: one sub-package per model, shared control encoders, and the built-in models."""

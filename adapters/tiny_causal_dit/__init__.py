"""The tiny causal video DiT: a real KV-cached causal DiT that runs on a CPU (torch needed: extra ``models``)."""

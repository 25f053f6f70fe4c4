"""SANA-WM in-process through diffusers' ``SanaWMPipeline`` (real weights or a tiny random-weight build)."""

"""``model=sana_wm_tiny``: SANA-WM through diffusers' ``SanaWMPipeline`` with a tiny random-weight build of the real
classes (no download, a CPU in seconds). A model of its own (its folder holds its config,
``conf/model/sana_wm_tiny.yaml``) run by the ``sana_wm_diffusers`` adapter, whose ``tiny`` setting builds the tiny
weights (``adapters/sana_wm_diffusers/tiny.py``)."""

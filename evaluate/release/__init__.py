"""The official WorldMemBench release (Hugging Face Hub, user ``rescuerz``): read its parquet rows and video tree
(:mod:`evaluate.release.layout`), import them as a run (:mod:`evaluate.release.importer`), and check the harness's
reading of its trajectory names against the videos (:mod:`evaluate.release.check`). docs/release.md.
"""

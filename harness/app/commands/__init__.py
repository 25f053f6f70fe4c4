"""The command handlers of ``python -m harness``, one module per command family; the dispatch table that names
them is :data:`harness.app.cli.HANDLERS`."""

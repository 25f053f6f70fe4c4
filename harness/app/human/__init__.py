"""``python -m harness human ...``: the human study's command line (``cli``) and annotation web app (``server``).

The commands live in :mod:`harness.app.human.cli`; :func:`main` is re-exported here because the top-level CLI calls
``harness.app.human.main``. The web framework is imported only by ``serve``.
"""

from harness.app.human.cli import COMMANDS, KEYS, USAGE, HumanArgError, main, parse_args

__all__ = ["COMMANDS", "KEYS", "USAGE", "HumanArgError", "main", "parse_args"]

"""``python -m harness.bench ...``: the benchmark commands live in :mod:`harness.app.bench`."""

from harness.app.bench import main

if __name__ == "__main__":
    import sys

    sys.exit(main())

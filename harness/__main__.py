"""``python -m harness``: the command line lives in :mod:`harness.app.cli`."""

from harness.app.cli import main

if __name__ == "__main__":
    main()

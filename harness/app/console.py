"""The command line's boundary with the console: exit codes and the messages that go with them.

Exit codes: 0 ok; 1 some item (or check) failed, or a bug (printed with its traceback); 2 a user error (bad
override, config, case, manifest, path, missing optional package), printed without a traceback and with nothing
written; 130 interrupted (Ctrl-C). A user error is any :class:`harness.errors.UserError`; a bare ``ValueError`` is a
bug. Every message is scrubbed of the secrets this process knows (:func:`harness.secrets.register`: the config's,
the command line's, the environment's).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

from harness.errors import UserError

T = TypeVar("T")

# errno values of environment problems a user fixes (a read-only or full disk, a path too long, no permission)
USER_OS_ERRNOS = frozenset({"EACCES", "EPERM", "EROFS", "ENAMETOOLONG", "ENOSPC", "EDQUOT"})

INTERRUPTED = ("interrupted: finished items are kept and nothing half-written counts as done; rerun the same "
               "command to resume")


def fail(msg: str) -> NoReturn:
    """A user error: one line on stderr, exit code 2."""
    from harness.secrets import redact

    print(f"error: {redact(msg)}", file=sys.stderr)
    sys.exit(2)


def interrupted() -> NoReturn:
    """SIGINT (Ctrl-C): one line saying how to resume, exit code 130 (128 + SIGINT), no traceback."""
    print(f"\n{INTERRUPTED}", file=sys.stderr)
    sys.exit(130)


def bug(exc: BaseException) -> NoReturn:
    """An unexpected error: its traceback (secrets redacted) and exit code 1."""
    import traceback

    from harness.secrets import redact

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    print(redact(text), file=sys.stderr, end="")
    print(redact(f"error: unexpected {type(exc).__name__}: {exc}. Unless the traceback above points at your "
                 "environment (a file, a device, the network), this is a bug in the harness: please report it with "
                 "the traceback"), file=sys.stderr)
    sys.exit(1)


def register_secrets(values: dict[str, str]) -> None:
    """Known secret values: scrubbed from every message, stream, log line and file of this process."""
    from harness.secrets import register

    register(values)


def guarded(body: Callable[[], T]) -> T:
    """``body()`` with the exceptions a command raises turned into exit codes and messages (see the module
    docstring); a closed stdout (``... | head``) ends quietly with exit code 1."""
    try:
        return body()
    except UserError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        interrupted()
    except BrokenPipeError:  # the reader of stdout went away (`... | head`): nothing left to say
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except OSError as exc:
        import errno

        if errno.errorcode.get(exc.errno or -1) in USER_OS_ERRNOS:
            fail(f"{exc.strerror}: {exc.filename or '(file not reported by the system)'} (check output_root / "
                 "permissions / free space)")
        bug(exc)
    except Exception as exc:  # anything else is a bug in the harness: shown with its traceback
        bug(exc)

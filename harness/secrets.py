"""Secrets: credentials never reach a file, a log line or the console.

Three rules, applied by value as well as by name:

* **Names.** A variable is secret when its name looks like a credential (:func:`is_secret_name`): it contains
  TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL, BEARER, PRIVATE, APIKEY, ACCESSKEY or COOKIE, or one of its parts
  (split at ``_``, ``-``, ``.`` and camelCase) is KEY, PASS, PWD, PW, AUTH, OAUTH, PAT, SESSION (``DB_PASS``,
  ``AUTH_BEARER``, ``GITHUB_PAT``, ``MY_PWD``, ``apiKey``; a bare ``key`` is not). Names that hold a reference,
  not the secret (``*_env``, ``*_file``, ``*_path``, ``*_dir``, ``*_name``), counts (``max_tokens``, ``*_len``) and
  ``PWD`` / ``OLDPWD`` (the working directory) are not. In ``env`` mappings every value counts; elsewhere in a
  config, string values only.
* **Defaults.** Every value of an ``env`` mapping (``model.env``) is secret, whatever its name, unless the name is
  a known setting (:data:`PLAIN_ENV`) or listed beside it as plain (``model.env_plain=[MY_MODE]``):
  :func:`env_is_secret`.
* **Values.** Every value of a secret variable in a config (any ``env`` mapping, any secret-named key) or in
  this process's environment is registered (:func:`register`) and removed from every text the harness writes:
  files written through :mod:`harness.io`, ``upstream.log`` (:func:`harness.io.run_logged`), every log record
  (:class:`RedactFilter` on the handlers) and the console (:class:`ScrubbedStream`).
* **Shapes.** Text that looks like a credential is redacted wherever it appears (:func:`scrub`): the password of a
  URL (``https://user:<redacted>@host``), ``Bearer``/``Basic`` authorisation values, well-known token formats
  (``hf_...``, ``sk-...``, ``ghp_...``, ``github_pat_...``, ``xox?-...``, ``AKIA...``, ``glpat-...``) and the value
  of an ``UPPER_CASE_SECRET_NAME=value`` / ``NAME: value`` assignment.

Launch scripts (``command.sh``) reference a secret as ``${NAME}`` (:func:`shell_export`), so they still run where
the variable is set.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any, Mapping, Optional

REDACTED = "<redacted>"

_WORDS = re.compile(r"TOKEN|SECRET|PASSW(?:OR)?D|CREDENTIAL|BEARER|PRIVATE|APIKEY|ACCESSKEY|COOKIE", re.IGNORECASE)
_PARTS = frozenset({"KEY", "PASS", "PWD", "PW", "AUTH", "OAUTH", "PAT", "SESSION"})
#: parts that name a secret only with a qualifier (``API_KEY``): a bare ``key`` is a dict key, an item key
_QUALIFIED = frozenset({"KEY", "SESSION"})
_NOT_SECRET = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK", "XAUTHORITY", "KEYTIMEOUT"})
_REFERENCE = re.compile(r"(?:_|\b)(?:env|file|path|dir|name|hint|url)$", re.IGNORECASE)
#: counts and sizes, not credentials: ``max_tokens``, ``num_tokens``, ``key_len``, a ``tokenizer``
_COUNT = re.compile(r"^(?:max|min|num|n)_|(?:tokens|_count|_len|_size|_limit)$|tokenizer", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether a variable or key called ``name`` holds a credential (see the module docstring)."""
    n = str(name)
    if not n or n.upper() in _NOT_SECRET or _REFERENCE.search(n) or _COUNT.search(n):
        return False
    if _WORDS.search(n):
        return True
    parts = [p.upper() for p in re.split(r"[^A-Za-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", n)) if p]
    return any(p in _PARTS and (p not in _QUALIFIED or len(parts) > 1) for p in parts)


ENV_KEYS = ("env",)  # mappings of environment variables inside configs (``model.env``, a launch's env)
PLAIN_KEY = "env_plain"  # beside an ``env`` mapping: the names of its variables that are plain settings
#: variables that hold settings, never credentials: an ``env`` mapping's other values are secret by default
PLAIN_ENV = frozenset({
    "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_ORDER", "CUDA_HOME", "PYTHONPATH", "PYTHONHASHSEED",
    "PYTHONUNBUFFERED", "PYTHONWARNINGS", "PYTHONDONTWRITEBYTECODE", "PATH", "LD_LIBRARY_PATH", "HOME", "LANG",
    "LC_ALL", "TZ", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_ENABLE_HF_TRANSFER",
    "HF_HUB_DISABLE_PROGRESS_BARS", "HF_ENDPOINT", "TRANSFORMERS_OFFLINE", "TRANSFORMERS_CACHE", "TORCH_HOME",
    "TOKENIZERS_PARALLELISM", "PYTORCH_CUDA_ALLOC_CONF", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
    "LOCAL_RANK", "XDG_CACHE_HOME", "TMPDIR", "TQDM_DISABLE", "CUBLAS_WORKSPACE_CONFIG", "XFORMERS_DISABLED",
    "TORCH_CUDNN_V8_API_ENABLED", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"})
_PLAIN_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_")


def env_is_secret(name: str, plain: Any = ()) -> bool:
    """Whether the value of environment variable ``name`` of an ``env`` mapping is secret: always when its name
    looks like a credential (:func:`is_secret_name`), else unless it is a known setting (:data:`PLAIN_ENV`, NCCL
    and torch.distributed knobs) or listed in ``plain`` (the mapping's ``env_plain``: ``model.env_plain=[MY_MODE]``).
    A passphrase under any other name (``GPG_PASSPHRASE``, ``MY_CREDS``) is therefore secret by default."""
    n = str(name)
    if is_secret_name(n):
        return True
    listed = {str(p) for p in plain} if isinstance(plain, (list, tuple, set, frozenset)) else set()
    return not (n in listed or n in PLAIN_ENV or n.startswith(_PLAIN_PREFIXES))
MIN_VALUE_LEN = 4  # never rewrite tiny values that would hit ordinary text
MIN_ENV_VALUE_LEN = 8  # values taken from the process environment (not configured by the user): longer still


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float)) and not isinstance(v, bool)


def secret_values(cfg: Any) -> dict[str, str]:
    """``{value: NAME}`` of every secret variable in any ``env`` mapping (:func:`env_is_secret`: all but the plain
    ones), and of every secret-named scalar key, of a nested config."""
    found: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ENV_KEYS and isinstance(v, dict):
                    plain = node.get(PLAIN_KEY)  # None or not a list: nothing is plain
                    found.update({str(val): str(name) for name, val in v.items()
                                  if _is_scalar(val) and str(val) and env_is_secret(name, plain)})
                elif isinstance(v, str) and is_secret_name(k) and len(v) >= MIN_VALUE_LEN:
                    found[v] = str(k)  # a string: a number under a secret-looking key is a setting
                else:
                    walk(v)
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v)

    walk(cfg)
    return found


def environment_secrets(environ: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """``{value: NAME}`` of the secret-named variables of the environment (long enough to be a credential)."""
    env = os.environ if environ is None else environ
    return {v: k for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_ENV_VALUE_LEN and v.strip()}


# -- the process registry -------------------------------------------------------------------------------------------
_REGISTRY: dict[str, str] = {}
_LOCK = threading.Lock()
_ENV_LOADED = False


_LITERAL = re.compile(r"^(?:true|false|null|none|yes|no|on|off|[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)$", re.IGNORECASE)


def scrubbable(value: str) -> bool:
    """Whether ``value`` can be removed from text by value: long enough, and not a literal that ordinary text and
    JSON are full of (``true``, ``null``, ``1024``): replacing those would corrupt every file. Such a value of a
    secret variable is still redacted by name (config dumps, ``meta.json``, ``command.sh``)."""
    v = str(value)
    return len(v) >= MIN_VALUE_LEN and not _LITERAL.fullmatch(v.strip())


def register(values: Mapping[str, str]) -> None:
    """Add ``{value: NAME}`` to the values :func:`scrub` removes from every text of this process (those
    :func:`scrubbable`)."""
    with _LOCK:
        _REGISTRY.update({str(v): str(n) for v, n in values.items() if scrubbable(v)})


def registered() -> dict[str, str]:
    """The registered values plus the environment's secret values (read once per process)."""
    global _ENV_LOADED
    if not _ENV_LOADED:
        register(environment_secrets())
        _ENV_LOADED = True
    return dict(_REGISTRY)


def clear_registry() -> None:
    """Forget the registered values (tests; a new in-process command)."""
    global _ENV_LOADED
    with _LOCK:
        _REGISTRY.clear()
        _ENV_LOADED = False


# -- text ------------------------------------------------------------------------------------------------------------
# Each pattern starts with a literal and runs only when that literal occurs (a plain substring test): the text of a
# dry-run item's meta.json is scrubbed in well under a millisecond.
#: the password runs to the last ``@`` before the host (a raw ``@`` or ``:`` in it is still the password)
_URL_USERINFO = re.compile(r"://(?P<user>[^\s/:'\"<>]*):(?P<pw>[^\s/'\"<>]+)@")
_URL_USER_TOKEN = re.compile(r"://(?P<user>[A-Za-z0-9_.~-]{16,})@")
#: ``?api_key=...`` / ``&token=...``: a query parameter whose name is a credential's (or a signature's)
_QUERY_PARAM = re.compile(r"(?<=[?&])(?P<k>[A-Za-z0-9_.\-]+)=(?P<v>[^&#\s'\"<>\\]+)")
_QUERY_SECRET = frozenset({"key", "sig", "signature", "x-amz-signature", "x-amz-credential", "x-amz-security-token",
                           "x-goog-signature", "x-goog-credential", "code", "access_token", "id_token", "auth"})
#: a credential header, ``Authorization: Token abc``, ``x-api-key: abc``, ``"api-key": "abc"`` (scheme word kept)
_HEADER = re.compile(r"(?P<h>\b(?:proxy-)?authorization|\bx-api-key|\bapi-key|\bx-auth-token|\bx-goog-api-key|"
                     r"\bx-access-token|\bx-api-token)(?P<sep>[\"']?\s*[:=]\s*[\"']?)(?:(?P<scheme>[A-Za-z]+)\s+)?"
                     r"(?P<v>[^\s\"',}\]\\<>]+)", re.IGNORECASE)
_AUTH_VALUE = re.compile(r"(?P<k>\b(?:bearer|basic))(?P<sp>\s+)(?P<v>[A-Za-z0-9._~+/=-]{8,})", re.IGNORECASE)
_TOKEN_SHAPES = {p: re.compile(re.escape(p) + tail) for p, tail in (
    ("hf_", r"[A-Za-z0-9]{12,}"), ("sk-", r"[A-Za-z0-9_-]{16,}"), ("ghp_", r"[A-Za-z0-9]{16,}"),
    ("gho_", r"[A-Za-z0-9]{16,}"), ("ghu_", r"[A-Za-z0-9]{16,}"), ("ghs_", r"[A-Za-z0-9]{16,}"),
    ("ghr_", r"[A-Za-z0-9]{16,}"), ("github_pat_", r"[A-Za-z0-9_]{16,}"), ("xoxb-", r"[A-Za-z0-9-]{10,}"),
    ("xoxp-", r"[A-Za-z0-9-]{10,}"), ("xoxa-", r"[A-Za-z0-9-]{10,}"), ("AKIA", r"[0-9A-Z]{16}"),
    ("glpat-", r"[A-Za-z0-9_-]{16,}"))}
#: ``NAME=value``, ``NAME: value``, ``"NAME": "value"`` with an env-style (upper-case) NAME that looks secret: one
#: pattern per word, starting at the word; the rest of the name before it is read back from the text
_NAME_WORDS = ("TOKEN", "SECRET", "PASS", "PW", "CREDENTIAL", "BEARER", "PRIVATE", "KEY", "AUTH", "PAT", "SESSION",
               "COOKIE")  # roots: PASS finds PASSWORD and PASSWD, PW finds PWD, KEY finds APIKEY
_ASSIGNMENTS = {w: re.compile(re.escape(w) + r"(?P<rest>[A-Z0-9_]*)(?P<sep>[\"']?\s*[:=]\s*)(?P<q>[\"']?)"
                              r"(?P<v>[^\s\"',}\]\\<>]+)") for w in _NAME_WORDS}
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
#: what follows an assignment's name but is never a credential: YAML/JSON/Python null and booleans (narrower than
#: _LITERAL on purpose: a number after ``DB_PASSWORD=`` in a shell line may be the password)
_NOT_A_CREDENTIAL = re.compile(r"(?:null|none|~|true|false)$", re.IGNORECASE)
#: a redaction right after a header's value: that "value" was the scheme word (``Token <redacted>``)
_ALREADY_REDACTED = re.compile(r"\s+<redacted")


def _query_param(m: re.Match[str]) -> str:
    k = m["k"]
    if k.lower() in _QUERY_SECRET or is_secret_name(k):
        return f"{k}={REDACTED}"
    return m.group(0)


def _header(m: re.Match[str]) -> str:
    if m["v"].startswith(("<", "$")) or _ALREADY_REDACTED.match(m.string, m.end()):
        # already redacted (also the scheme word of ``Token <redacted>``, so scrubbing twice changes nothing), or a
        # reference to the environment
        return m.group(0)
    return f"{m['h']}{m['sep']}{m['scheme'] + ' ' if m['scheme'] else ''}{REDACTED}"


def _auth_value(m: re.Match[str]) -> str:
    v = m["v"]
    # a credential has digits or base64 symbols (or is long); "basic settings" is prose
    if len(v) >= 20 or re.search(r"[0-9+/=_.~-]", v):
        return f"{m['k']}{m['sp']}{REDACTED}"
    return m.group(0)


def _scrub_assignments(text: str, word: str) -> str:
    out, last = [], 0
    for m in _ASSIGNMENTS[word].finditer(text):
        i = m.start()
        while i > 0 and text[i - 1] in _NAME_CHARS:
            i -= 1
        if i < last or (i > 0 and (text[i - 1].isalnum())) or not text[i].isalpha():
            continue  # inside a lower-case word, or overlapping a replacement already made
        name, v = text[i:m.start()] + word + m["rest"], m["v"]
        if not is_secret_name(name) or v.startswith(("<", "${", "$")) or _NOT_A_CREDENTIAL.match(v):
            continue
        if m["sep"][:1] in ("'", '"') and not m["q"]:
            continue  # a quoted key with an unquoted value: JSON's (or Python's) number, list or mapping, not text

        out += [text[last:m.start("v")], REDACTED]
        last = m.end("v")
    return "".join(out) + text[last:] if out else text


def scrub(text: str, values: Optional[Mapping[str, str]] = None) -> str:
    """``text`` without any registered secret value (or those of ``values``) and without anything shaped like a
    credential (see the module docstring)."""
    if not text:
        return text
    known = registered()
    if values:
        known.update({str(v): str(n) for v, n in values.items()})
    for v, name in sorted(known.items(), key=lambda kv: -len(kv[0])):
        if not scrubbable(v):
            continue
        for form in _escaped_forms(v):  # the escaped forms first: the raw value may be a part of one
            if form in text:
                text = text.replace(form, f"<redacted:{name}>")
    if "://" in text and "@" in text:
        text = _URL_USERINFO.sub(lambda m: f"://{m['user']}:{REDACTED}@", text)
        text = _URL_USER_TOKEN.sub(f"://{REDACTED}@", text)
    if "=" in text and ("?" in text or "&" in text):
        text = _QUERY_PARAM.sub(_query_param, text)
    low = text.lower()
    if "auth" in low or "api-key" in low or "-token" in low:
        text = _HEADER.sub(_header, text)
        low = text.lower()
    if "bearer" in low or "basic" in low:
        text = _AUTH_VALUE.sub(_auth_value, text)
    for prefix, pat in _TOKEN_SHAPES.items():
        if prefix in text:
            text = pat.sub(REDACTED, text)
    for word in _NAME_WORDS:
        if word in text:
            text = _scrub_assignments(text, word)
    return text


def _escaped_forms(v: str) -> list[str]:
    """``v`` as JSON, URL-encoded (``%40``, ``+``) and shell-quoted text writes it, then itself (longest first)."""
    import json
    import shlex
    from urllib.parse import quote, quote_plus

    forms = {json.dumps(v)[1:-1], quote(v, safe=""), quote_plus(v), shlex.quote(v), v}
    return sorted(forms, key=len, reverse=True)


def redact(obj: Any, values: dict[str, str] | None = None) -> Any:
    """A copy of ``obj`` with the secret variables of ``env`` mappings (:func:`env_is_secret`: all but the plain
    ones) and secret-named scalar keys replaced by
    ``<redacted>``, and every string scrubbed (:func:`scrub`: known values, credential shapes)."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out: dict[Any, Any] = {}
            for k, v in node.items():
                if k in ENV_KEYS and isinstance(v, dict):
                    plain = node.get(PLAIN_KEY)  # None or not a list: nothing is plain
                    out[k] = {n: (REDACTED if env_is_secret(n, plain) and _is_scalar(x) else walk(x))
                              for n, x in v.items()}
                elif isinstance(v, str) and is_secret_name(k) and len(v) >= MIN_VALUE_LEN:
                    out[k] = REDACTED
                else:
                    out[k] = walk(v)
            return out
        if isinstance(node, (list, tuple)):
            return [walk(v) for v in node]
        if isinstance(node, str):
            return scrub(node, values)
        return node

    return walk(obj)


def shell_export(name: str, value: str, secret: bool | None = None) -> str:
    """An ``export`` line of a shell script: secrets (``secret``; by default a secret-looking name) as a reference
    to the caller's environment."""
    import shlex

    if is_secret_name(name) if secret is None else (secret or is_secret_name(name)):
        return f'export {name}="${{{name}:?set {name} in your environment}}"'
    return f"export {name}={shlex.quote(str(value))}"


# -- logs, streams and subprocess output ----------------------------------------------------------------------------
class RedactFilter(logging.Filter):
    """A logging filter (on handlers: the project's, the root logger's, Hydra's) that scrubs every record's text,
    so a library's log line (httpx printing a URL with its password) never shows a secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # a malformed record: leave it to the handler's own error path
            return True
        clean = scrub(msg)
        if clean != msg or record.args:
            record.msg, record.args = clean, None
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        return True


def install_log_filter() -> None:
    """Put a :class:`RedactFilter` on every handler of the root logger and of every existing logger (idempotent)."""
    loggers = [logging.getLogger()] + [lg for lg in logging.Logger.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger)]
    for lg in loggers:
        for h in lg.handlers:
            if not any(isinstance(f, RedactFilter) for f in h.filters):
                h.addFilter(RedactFilter())


class ScrubbedStream:
    """A text stream that scrubs everything written (Hydra logs the overrides of every sweep job; ``--cfg job``
    prints the config)."""

    def __init__(self, stream: Any, values: Optional[Mapping[str, str]] = None):
        self._stream, self._values = stream, values

    def write(self, text: str) -> int:
        self._stream.write(scrub(text, self._values))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

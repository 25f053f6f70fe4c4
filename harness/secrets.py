"""Secrets: credentials never reach a file, a log line or the console.

The rules, applied by value and by place as well as by name:

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
  this process's environment, and every password and credential parameter of a URL in a config value, an override
  or a variable of the environment (:func:`url_secrets`), is registered (:func:`register`) and removed from every
  text the harness writes: files written through :mod:`harness.io`, ``upstream.log`` (:func:`harness.io.run_logged`),
  every log record (:class:`RedactFilter` on the handlers) and the console (:class:`ScrubbedStream`), in each
  escaped form (JSON, URL-encoded, shell-quoted). A value too short or too ordinary to cut out of every text (``Q8x``,
  ``4821``, ``true``: :func:`scrubbable`) is redacted where it follows its own name (``NAME: value``).
* **Places.** An override (Hydra's ``overrides.yaml``, ``meta.json``'s ``argv``) has each secret value replaced by
  its place, whatever its length, type or quoting (:func:`redact_overrides`: ``+model.env.PIN=4821``,
  ``+model.env={A: 'x, y'}``).
* **Shapes.** Text that looks like a credential is redacted wherever it appears (:func:`scrub`): the password of a
  URL whatever characters it holds (``https://user:<redacted>@host``: quotes, ``/``, spaces, ``@``), credential
  parameters of its query, fragment or path (``?api_key=``, ``#access_token=``, ``;jsessionid=``), credential
  headers and cookies whole (``Authorization``, ``x-api-key``, ``Cookie``, ``Set-Cookie``; a quoted value to its
  closing quote), ``Bearer``/``Basic`` authorisation values, well-known token formats (``hf_...``, ``sk-...``,
  ``ghp_...``, ``github_pat_...``, ``xox?-...``, ``AKIA...``, ``glpat-...``) and the value of an
  ``UPPER_CASE_SECRET_NAME=value`` / ``NAME: value`` assignment (a quoted value whole; ``$NAME: ...`` is a reference
  to the variable, not an assignment of it).

Launch scripts (``command.sh``) reference a secret as ``${NAME}`` (:func:`shell_export`), so they still run where
the variable is set.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

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


ENV_KEYS = ("env", "env_set")  # mappings of environment variables in configs (``model.env``, Hydra's env_set)
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
                    for name, val in v.items():
                        if _is_scalar(val) and str(val) and env_is_secret(name, plain):
                            found[str(val)] = str(name)
                        else:
                            walk(val)  # a plain one may still be a URL with a password
                elif isinstance(v, str) and is_secret_name(k) and len(v) >= MIN_VALUE_LEN:
                    found[v] = str(k)  # a string: a number under a secret-looking key is a setting
                else:
                    walk(v)
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v)
        elif isinstance(node, str):
            found.update({s: "" for s in url_secrets(node) if s})  # a URL's password, its credential parameters

    walk(cfg)
    return found


def environment_secrets(environ: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """``{value: NAME}`` of the secret-named variables of the environment (long enough to be a credential), and
    the secret parts of any variable holding a URL (``DATABASE_URL=postgres://u:pw@host/db``: :func:`url_secrets`)."""
    env = os.environ if environ is None else environ
    found = {v: k for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_ENV_VALUE_LEN and v.strip()}
    for v in env.values():
        found.update({s: "" for s in url_secrets(v) if s})
    return found


# -- the process registry -------------------------------------------------------------------------------------------
_REGISTRY: dict[str, str] = {}
_LOCK = threading.Lock()
_ENV_LOADED = False
_GENERATION = 0  # changes with the registry: a cache of scrubbed text made at another generation is stale


_LITERAL = re.compile(r"^(?:true|false|null|none|yes|no|on|off|[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)$", re.IGNORECASE)


def scrubbable(value: str) -> bool:
    """Whether ``value`` can be removed from text by value: long enough, and not a literal that ordinary text and
    JSON are full of (``true``, ``null``, ``1024``): replacing those would corrupt every file. Such a value of a
    secret variable is still redacted by name (config dumps, ``meta.json``, ``command.sh``)."""
    v = str(value)
    return len(v) >= MIN_VALUE_LEN and not _LITERAL.fullmatch(v.strip())


def register(values: Mapping[str, str]) -> None:
    """Add ``{value: NAME}`` to the values :func:`scrub` removes from every text of this process: wherever they occur
    when :func:`scrubbable`, else (a short or literal value: ``4821``, ``q8x``) where they follow their own name
    (``NAME: value``, ``NAME=value``, ``"NAME": "value"``)."""
    global _GENERATION
    new = {str(v): str(n) for v, n in values.items() if str(v).strip()}
    with _LOCK:
        if any(_REGISTRY.get(v) != n for v, n in new.items()):
            _REGISTRY.update(new)
            _GENERATION += 1


def registered() -> dict[str, str]:
    """The registered values plus the environment's secret values (read once per process)."""
    global _ENV_LOADED
    if not _ENV_LOADED:
        register(environment_secrets())
        _ENV_LOADED = True
    return dict(_REGISTRY)


def generation() -> int:
    """A number that changes whenever the registered values do (the environment's are loaded first): text scrubbed
    while it was the same is scrubbed of every value registered now (:class:`harness.record.SharedText`)."""
    registered()
    return _GENERATION


def clear_registry() -> None:
    """Forget the registered values (tests; a new in-process command)."""
    global _ENV_LOADED, _GENERATION
    with _LOCK:
        _REGISTRY.clear()
        _ENV_LOADED = False
        _GENERATION += 1


# -- text ------------------------------------------------------------------------------------------------------------
# Each pattern starts with a literal and runs only when that literal occurs (a plain substring test): the text of a
# dry-run item's meta.json is scrubbed in well under a millisecond.
#: a URL's start: ``scheme://`` (the password of its userinfo is found by :func:`_userinfo_spans`)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
#: the userinfo's user: up to the first ``:`` (an ``@`` in it is still the user: ``me@corp:pw@host``)
_USER = re.compile(r"[^\s/:?#'\"<>]*")
#: what follows the ``@`` that ends a userinfo: a host (name, address or ``[IPv6]``), an optional port, then the
#: end of the authority (a path, query, fragment, space, quote, bracket or the end of the text)
_HOST_AFTER = re.compile(r"(?:[A-Za-z0-9._~%-]+|\[[0-9A-Fa-f:.]+\])(?::\d*)?(?=[/?#\s\"'<>\\)\]},;|`]|$)")
#: a quote that ends a quoted string (JSON, YAML, Python): never inside a password (replacing across it would break
#: the file), unless escaped
_CLOSING_QUOTE = re.compile(r"(?<!\\)[\"'](?=[\s,:;}\])])")
_EOL = re.compile(r"[\r\n]")
#: ``host:443/@scope/pkg``: a port and a path (with an ``@`` in it), no password
_PORT_THEN_PATH = re.compile(r"\d*/")
_AT = re.compile("@")
#: prose after ``host:port`` that an ``@`` further on must not turn into a password: a port, then words
_PORT_THEN_WORDS = re.compile(r"\d+\s")
_URL_USER_TOKEN = re.compile(r"://(?P<user>[A-Za-z0-9_.~-]{16,})@")
#: ``?api_key=...`` / ``&token=...`` / ``#access_token=...`` (a fragment: OAuth's implicit flow) / ``;jsessionid=...``
#: (a path parameter): a URL parameter whose name is a credential's (or a signature's or a session's); a path
#: parameter's value also ends at ``;``, ``/`` or ``?``
_QUERY_PARAM = re.compile(r"(?<=[?&#;])(?P<k>[A-Za-z0-9_.\-]+)=(?P<v>[^&#\s'\"<>\\]+)")
_QUERY_SECRET = frozenset({"key", "sig", "signature", "x-amz-signature", "x-amz-credential", "x-amz-security-token",
                           "x-goog-signature", "x-goog-credential", "code", "access_token", "id_token", "auth",
                           "session", "sessionid", "jsessionid", "phpsessid", "sid"})
#: a credential header, ``Authorization: Token abc``, ``x-api-key: abc``, ``"api-key": "abc"``, ``Cookie: a=b; c=d``,
#: ``Set-Cookie: sid=x; Path=/``: its whole value is redacted (to the closing quote, else to the end of the line),
#: keeping an authorisation scheme word (:data:`_SCHEMES`)
_HEADER = re.compile(r"(?P<h>\b(?:proxy-)?authorization|\bx-api-key|\bapi-key|\bx-auth-token|\bx-goog-api-key|"
                     r"\bx-access-token|\bx-api-token|\bset-cookie|\bcookie)(?P<sep>[\"']?\s*[:=]\s*)(?P<q>[\"']?)",
                     re.IGNORECASE)
_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "negotiate", "apikey", "key", "dpop", "hoba", "mutual",
                      "aws4-hmac-sha256", "hmac", "ntlm", "oauth"})
#: the end of an unquoted header value: the line, or a quote / bracket / comma / backtick / ``&`` of the text around it
_UNQUOTED_END = re.compile(r"[\r\n\"',}\]\\<>`&]")
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
                              r"(?P<v>(?:\\.|[^\s\"',}\]\\<>])+)") for w in _NAME_WORDS}
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
#: what follows an assignment's name but is never a credential: YAML/JSON/Python null and booleans (narrower than
#: _LITERAL on purpose: a number after ``DB_PASSWORD=`` in a shell line may be the password)
_NOT_A_CREDENTIAL = re.compile(r"(?:null|none|~|true|false)$", re.IGNORECASE)
def _quoted_end(text: str, i: int, quote: str) -> int:
    """Where the quoted text that starts at ``i`` (just after its opening ``quote``) ends: its closing quote
    (``\"`` escaped, YAML's ``''`` doubled), else the end of the line. A ``quote`` of two characters (``\"``: a quoted
    value inside a JSON string) ends at the same two characters."""
    n = len(text)
    if len(quote) == 2:
        eol = _EOL.search(text, i)
        stop = eol.start() if eol else n
        close = re.compile(re.escape(quote)).search(text, i, stop)
        return close.start() if close else stop
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == quote:
            if quote == "'" and text[i + 1:i + 2] == "'":
                i += 2
                continue
            return i
        if c in "\r\n":
            return i
        i += 1
    return n


#: a variable's name (what a short or literal registered value is redacted after)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _scrub_named(text: str, name: str, value: str) -> str:
    """``text`` with ``value`` redacted where it is the value of ``name`` (``NAME: value``, ``NAME=value``,
    ``"NAME": "value"``, ``{NAME: value}``); an unquoted value after a quoted name (JSON's number) becomes the
    string ``"<redacted>"``, so the file stays valid."""
    pat = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?P<sep>[\"']?\s*[:=]\s*)(?P<q>[\"']?)"
                     + re.escape(value) + r"(?P=q)(?![A-Za-z0-9_.@/-])")

    def sub(m: re.Match[str]) -> str:
        quote = m["q"] or ('"' if m["sep"][:1] in ("'", '"') else "")
        return f"{name}{m['sep']}{quote}{REDACTED}{quote}"

    return pat.sub(sub, text)


def _query_param(m: re.Match[str]) -> str:
    k, v = m["k"], m["v"]
    if not (k.lower() in _QUERY_SECRET or is_secret_name(k)):  # (a redacted value never matches: no "<" in it)
        return m.group(0)
    if m.string[m.start() - 1] == ";":  # a path parameter ends at the next one, the path or the query
        cut = re.search(r"[;/?]", v)
        return f"{k}={REDACTED}{v[cut.start():] if cut else ''}"
    return f"{k}={REDACTED}"


def _userinfo_spans(text: str, whole: bool = False) -> list[tuple[int, int]]:
    """(start, end) of the password of every ``scheme://user:password@host`` of ``text``, whatever characters the
    password holds (``@``, ``:``, ``/``, quotes, spaces). Its end is the ``@`` before a host; among several, the
    last one after a password without ``/ ? #`` or spaces, else the last one without spaces, else the first. In
    free text (not ``whole``, a config value that is one URL) a password never spans a closing quote (the file around
    it stays valid), and one with spaces never holds ``/ , ; ( )`` nor starts with a port (``host:8000 is up``)."""
    schemes = list(_SCHEME.finditer(text))
    spans: list[tuple[int, int]] = []
    for sm, limit in zip(schemes, [m.start() for m in schemes[1:]] + [len(text)]):  # to the next URL
        s = sm.end()
        eol = _EOL.search(text, s, limit)
        limit = eol.start() if eol else limit
        colon = _USER.match(text, s, limit).end()  # type: ignore[union-attr]  # matches the empty string
        if colon >= limit or text[colon] != ":":
            continue
        pw0 = colon + 1
        plain, pathlike, spaced = 0, 0, 0  # the chosen '@' after a plain password, one with / ? #, one with spaces
        for am in _AT.finditer(text, pw0, limit):
            at = am.start()
            pw = text[pw0:at]
            if pw and not pw.startswith("<redacted") and _HOST_AFTER.match(text, at + 1, limit) and (
                    whole or not _CLOSING_QUOTE.search(pw)):
                if not re.search(r"[\s/?#]", pw):
                    plain = at
                elif not re.search(r"\s", pw) and not _PORT_THEN_PATH.match(pw):
                    pathlike = at
                elif not spaced and (whole or not (re.search(r"[/,;()]", pw) or _PORT_THEN_WORDS.match(pw))):
                    spaced = at
        end = plain or pathlike or spaced
        if end:
            spans.append((pw0, end))
    return spans


def _scrub_userinfo(text: str) -> str:
    out, last = [], 0
    for a, b in _userinfo_spans(text):
        out += [text[last:a], REDACTED]
        last = b
    return "".join(out) + text[last:] if out else text


def url_secrets(value: str) -> list[str]:
    """The secret parts of the URLs in one config value: each password (:func:`_userinfo_spans`, the value being
    the URL itself) and each credential-named query, fragment or path parameter's value. Registered by value (every
    escaped form of them is then removed from every text), as the shapes alone cannot tell where such a password
    ends inside other text."""
    if "://" not in value:
        return []
    # the value is one URL (nothing before its scheme, no other one): its password may hold anything; else (text that
    # holds URLs, such as an environment variable's) the rules for free text
    bare = value.strip("'\" ")
    whole = bool(_SCHEME.match(bare)) and value.count("://") == 1
    found = [value[a:b] for a, b in _userinfo_spans(value, whole=whole)]
    for m in _QUERY_PARAM.finditer(value):
        if _query_param(m) != m.group(0):
            v = m["v"]
            found.append(re.split(r"[;/?]", v)[0] if value[m.start() - 1] == ";" else v)
    return found


def _scrub_headers(text: str) -> str:
    out, last = [], 0
    for m in _HEADER.finditer(text):
        start = m.end()
        if m.start() < last:
            continue
        if m["q"]:
            end = _quoted_end(text, start, m["q"])
        elif m["sep"][:1] in ("'", '"'):
            continue  # a quoted key with an unquoted value: JSON's null, number or mapping, not a credential
        else:
            e = _UNQUOTED_END.search(text, start)
            end = e.start() if e else len(text)
        value = text[start:end].rstrip()
        scheme = re.match(r"([A-Za-z0-9-]+)\s+", value)
        keep = scheme.group(0) if scheme and scheme[1].lower() in _SCHEMES else ""
        secret = value[len(keep):]
        if value.lower() in _SCHEMES:
            continue  # a scheme word alone (``Bearer <redacted>``, ``Bearer <token>``, ``Bearer``): no credential
        if not secret or secret.startswith(("<", "$")) or _NOT_A_CREDENTIAL.fullmatch(secret):
            continue  # nothing, already redacted, a reference to the environment, or no value
        if m["h"].lower().endswith("cookie") and "=" not in secret:
            continue  # a cookie header holds name=value pairs: "a cookie: it crumbles" is prose (a case's prompt)
        out += [text[last:start], keep, REDACTED]
        last = start + len(value)
    return "".join(out) + text[last:] if out else text


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
        if text.endswith("$", 0, i) or text.endswith("${", 0, i):
            continue  # ``$NAME: not set``, ``${NAME:?message}``: a reference to the variable, not an assignment of
            # it (a credential's default, ``${NAME:-value}``, is redacted by _shell_default)
        q, at = m["q"], m.start("v")
        if not q and text[at:at + 2] in ('\\"', "\\'"):  # a quoted value inside a JSON string: ``NAME=\"a b\"``
            q, at = text[at:at + 2], at + 2
        end = _quoted_end(text, at, q) if q else m.end("v")  # a quoted value: all of it
        name, v = text[i:m.start()] + word + m["rest"], text[at:end]
        if not is_secret_name(name) or v.startswith(("<", "${", "$")) or _NOT_A_CREDENTIAL.match(v):
            continue
        if m["sep"][:1] in ("'", '"') and not m["q"]:
            continue  # a quoted key with an unquoted value: JSON's (or Python's) number, list or mapping, not text
        out += [text[last:at], REDACTED]
        last = end
    return "".join(out) + text[last:] if out else text


#: a shell parameter expansion with a default, ``${DB_PASS:-value}`` (also ``:=``, ``:+``, without the colon): the
#: value is what the variable holds where it is unset, so a credential when the name is a credential's
_SHELL_DEFAULT = re.compile(r"\$\{(?P<n>[A-Za-z_][A-Za-z0-9_]*):?[-=+](?P<v>[^}\r\n]*)\}")


def _shell_default(m: re.Match[str]) -> str:
    v = m["v"]
    if not is_secret_name(m["n"]) or not v.strip() or v.startswith(("<", "$")):
        return m.group(0)
    return m.group(0)[:m.start("v") - m.start()] + REDACTED + "}"


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
            if _ENV_NAME.fullmatch(name):
                text = _scrub_named(text, name, v)
            continue
        for form in _escaped_forms(v):  # the escaped forms first: the raw value may be a part of one
            if form in text:  # a URL's part (no name) reads as the shapes write it: ``://user:<redacted>@host``
                text = text.replace(form, f"<redacted:{name}>" if name else REDACTED)
    if "://" in text and "@" in text:
        text = _scrub_userinfo(text)
        text = _URL_USER_TOKEN.sub(f"://{REDACTED}@", text)
    if "=" in text and ("?" in text or "&" in text):
        text = _QUERY_PARAM.sub(_query_param, text)
    elif "#" in text or ";" in text:  # a fragment's or a path parameter's credential (``#access_token=``)
        text = _QUERY_PARAM.sub(_query_param, text)
    low = text.lower()
    if "auth" in low or "api-key" in low or "-token" in low or "cookie" in low:
        text = _scrub_headers(text)
        low = text.lower()
    if "bearer" in low or "basic" in low:
        text = _AUTH_VALUE.sub(_auth_value, text)
    for prefix, pat in _TOKEN_SHAPES.items():
        if prefix in text:
            text = pat.sub(REDACTED, text)
    if "${" in text:
        text = _SHELL_DEFAULT.sub(_shell_default, text)
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


# -- overrides and command lines ----------------------------------------------------------------------------------
#: a value in quotes (Hydra's override grammar): the text between them
_QUOTED = re.compile(r"(['\"])(.*)\1", re.DOTALL)
#: one ``NAME: value`` item of a ``{...}`` mapping in Hydra's override grammar (the value is read by _value_end)
_ITEM = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*")
_COMMA = re.compile(r"[ \t]*,")


def _value_end(text: str, i: int) -> int:
    """The end of the value of a mapping item that starts at ``i``: the ``,`` or ``}`` after it, outside quotes and
    nested brackets (``{A: 'x, y', B: [1, 2]}``), trailing spaces left out."""
    depth, n, j = 0, len(text), i
    while j < n:
        c = text[j]
        if c in "'\"":
            j = _quoted_end(text, j + 1, c) + 1
            continue
        if c in "[{(":
            depth += 1
        elif c in "]})" and depth:
            depth -= 1
        elif c in ",}" and not depth:
            break
        j += 1
    return i + len(text[i:j].rstrip(" \t"))


def _mapping_items(text: str) -> list[tuple[str, int, int]]:
    """``(NAME, start, end)`` of the value of every item of the ``{NAME: value, ...}`` mappings of an override's
    value (several in a sweep: ``{A: x},{A: y}``)."""
    out: list[tuple[str, int, int]] = []
    i = text.find("{")
    while i >= 0:
        i += 1
        while (m := _ITEM.match(text, i)) is not None:
            end = _value_end(text, m.end())
            out.append((m[1], m.end(), end))
            i = end
            comma = _COMMA.match(text, end)
            if comma is None:
                break
            i = comma.end()
        i = text.find("{", i)
    return out


def _plain_in(args: Sequence[str]) -> set[str]:
    """The names an override lists as plain (``+model.env_plain=[MY_MODE]``)."""
    return {n for arg in args if arg.lstrip("+~").partition("=")[0].endswith(PLAIN_KEY)
            for n in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", arg.partition("=")[2])}


def plain_names(cfg: Any) -> set[str]:
    """Every name listed as plain beside an ``env`` mapping of a nested config (``model.env_plain``)."""
    found: set[str] = set()
    if isinstance(cfg, dict):
        plain = cfg.get(PLAIN_KEY)
        if isinstance(plain, (list, tuple)):
            found |= {str(p) for p in plain}
        for v in cfg.values():
            found |= plain_names(v)
    elif isinstance(cfg, (list, tuple)):
        for v in cfg:
            found |= plain_names(v)
    return found


def _secret_spans(arg: str, plain: set[str]) -> list[tuple[str, int, int]]:
    """``(NAME, start, end)`` of every secret value of one override ``key=value``: the whole value of a secret
    variable of an ``env`` mapping (``model.env.MY_CREDS=x``: :func:`env_is_secret`, whatever its length) or of a
    secret-named key (``evaluate.judge.api_key=x``), or the values of the secret items of a mapping given whole
    (``+model.env={MY_CREDS: x, MODE: y}``)."""
    if "=" not in arg:
        return []
    key, _, val = arg.partition("=")
    at = len(key) + 1
    parts = key.lstrip("+~").split(".")
    if not val:
        return []
    if parts[-1] in ENV_KEYS:
        return [(n, at + a, at + b) for n, a, b in _mapping_items(val) if b > a and env_is_secret(n, plain)]
    if (any(p in ENV_KEYS for p in parts[:-1]) and env_is_secret(parts[-1], plain)) or is_secret_name(parts[-1]):
        return [(parts[-1], at, len(arg))]
    return []


def override_secrets(args: Sequence[str]) -> dict[str, str]:
    """``{value: NAME}`` of the secret values given in overrides (a command line): :func:`_secret_spans` (quotes
    around a value left out) and the secret parts of URLs (:func:`url_secrets`)."""
    plain = _plain_in(args)
    found: dict[str, str] = {}
    for arg in args:
        for name, a, b in _secret_spans(arg, plain):
            v = arg[a:b].strip()
            quoted = _QUOTED.fullmatch(v)
            found[quoted[2] if quoted else v] = name
        found.update({s: "" for s in url_secrets(arg.partition("=")[2]) if s})
    return found


def redact_overrides(args: Sequence[str], plain: Any = (), values: Optional[Mapping[str, str]] = None) -> list[str]:
    """``args`` (Hydra's overrides, or a command line: ``meta.json``'s ``argv``, ``overrides.yaml``) with every
    secret value replaced by ``<redacted>`` by its place (:func:`_secret_spans`: a value of any length, a number
    too), then scrubbed (:func:`scrub`). ``plain``: names listed as plain elsewhere (the config's ``env_plain``,
    :func:`plain_names`); an override's own ``env_plain`` counts too."""
    names = _plain_in(args) | {str(p) for p in plain}
    out = []
    for arg in args:
        text, last, parts = str(arg), 0, []
        for _, a, b in _secret_spans(text, names):
            parts += [text[last:a], REDACTED]
            last = b
        out.append(scrub("".join(parts) + text[last:], values))
    return out


@dataclass(frozen=True)
class RedactedConfig:
    """A run configuration as the run writes it (``config.yaml``, ``overrides.yaml``, every ``meta.json``), redacted
    once: ``values`` its secret values (value -> name, :func:`secret_values`), ``config`` the resolved mapping
    redacted with them (:func:`redact`), ``plain`` the names it lists as plain (:func:`plain_names`), so that a
    command line or Hydra's overrides are redacted the same way (:meth:`args`) and so is anything a model reports
    (:meth:`__call__`)."""

    values: dict[str, str]
    config: Any
    plain: frozenset[str]

    @classmethod
    def of(cls, raw: Any) -> RedactedConfig:
        values = secret_values(raw)
        return cls(values, redact(raw, values), frozenset(plain_names(raw)))

    def args(self, args: Sequence[str]) -> list[str]:
        """``args`` redacted by place, then by shape (:func:`redact_overrides`)."""
        return redact_overrides(args, self.plain, self.values)

    def __call__(self, obj: Any) -> Any:
        """A copy of ``obj`` with this configuration's secrets (and anything shaped like one) redacted."""
        return redact(obj, self.values)


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

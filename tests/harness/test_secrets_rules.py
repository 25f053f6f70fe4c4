"""The rules of harness/secrets.py one at a time, at their boundaries: which names are secret, which config and
environment values are registered (lengths, types, nesting), the process registry, the ``Bearer``/``Basic`` and
``NAME=value`` shapes, and the log filter (a record's text frozen scrubbed, its traceback scrubbed, installed once
per handler)."""

from __future__ import annotations

import logging

import pytest

from harness import secrets
from harness.secrets import REDACTED, environment_secrets, is_secret_name, redact, scrub, secret_values


@pytest.fixture(autouse=True)
def empty_registry(monkeypatch):
    for k in [k for k in __import__("os").environ if is_secret_name(k)]:
        monkeypatch.delenv(k)
    secrets.clear_registry()
    yield
    secrets.clear_registry()


@pytest.mark.parametrize("name, secret", [
    ("pass", True), ("AUTH", True), ("pw", True), ("pat", True), ("oauth", True),  # one part, unqualified: secret
    ("key", False), ("session", False),  # one part that needs a qualifier
    ("api_key", True), ("user_session", True), ("", False), ("PWD", False), ("token_file", False),
    ("max_tokens", False),
])
def test_a_name_is_secret_by_its_words_and_parts(name, secret):
    assert is_secret_name(name) is secret


# -- values of a config ----------------------------------------------------------------------------------------------
def test_env_values_must_be_scalars_and_booleans_are_settings():
    cfg = {"env": {"MY_FLAG": True, "MY_VAL": "abcdefgh", "MY_N": 12345, "MY_LIST": ["abcdefgh"]}}
    assert secret_values(cfg) == {"abcdefgh": "MY_VAL", "12345": "MY_N"}
    assert redact(cfg)["env"] == {"MY_FLAG": True, "MY_VAL": REDACTED, "MY_N": REDACTED, "MY_LIST": ["abcdefgh"]}


def test_a_secret_named_key_holds_a_secret_only_as_text_of_four_characters_or_more():
    assert secret_values({"api_token": "abcd"}) == {"abcd": "api_token"}
    assert secret_values({"api_token": "abc"}) == {}
    assert secret_values({"api_token": 12345678}) == {}  # a number under a secret-looking key is a setting
    assert secret_values({"api_token": {"inner_secret": "wxyz"}}) == {"wxyz": "inner_secret"}
    assert redact({"api_token": "abc", "n_token": 5}) == {"api_token": "abc", "n_token": 5}
    assert redact({"api_token": "abcd"}) == {"api_token": REDACTED}


def test_secrets_inside_lists_of_a_config_are_found():
    cfg = {"runs": [{"db_password": "hunter22"}, [{"env": {"X": "abcdefgh"}}]], "t": ("q", {"auth": "zzzz"})}
    assert secret_values(cfg) == {"hunter22": "db_password", "abcdefgh": "X", "zzzz": "auth"}


# -- values of the environment ----------------------------------------------------------------------------------------
def test_environment_secrets_are_secret_named_and_eight_non_blank_characters_or_more():
    env = {"API_TOKEN": "12345678", "GH_TOKEN": "1234567", "HOME": "/a/long/home/folder", "DB_PASSWORD": " " * 10,
           "MY_SECRET": " abcdefg"}
    assert environment_secrets(env) == {"12345678": "API_TOKEN", " abcdefg": "MY_SECRET"}


def test_the_environment_is_read_once_per_process_and_the_registry_can_be_cleared(monkeypatch):
    monkeypatch.setenv("FIRST_TOKEN", "first-value-1")
    assert secrets.registered() == {"first-value-1": "FIRST_TOKEN"}
    monkeypatch.setenv("LATER_TOKEN", "later-value-2")
    assert "later-value-2" not in secrets.registered()  # read once: a variable set later is not looked at
    secrets.register({"registered-3": "X"})
    assert secrets.registered() == {"first-value-1": "FIRST_TOKEN", "registered-3": "X"}
    secrets.clear_registry()
    monkeypatch.delenv("FIRST_TOKEN")
    monkeypatch.delenv("LATER_TOKEN")
    assert secrets.registered() == {}  # cleared, and the environment read again (now without them)


def test_the_generation_changes_when_the_registered_values_do_and_only_then(monkeypatch):
    monkeypatch.setenv("FIRST_TOKEN", "first-value-1")
    start = secrets._GENERATION
    g0 = secrets.generation()  # loads the environment's values first: a change
    assert g0 == start + 1 and secrets.registered() == {"first-value-1": "FIRST_TOKEN"}
    assert secrets.generation() == g0  # read again: no change
    secrets.register({"first-value-1": "FIRST_TOKEN", " ": "BLANK"})  # known already, and a blank value: no change
    assert secrets.generation() == g0
    secrets.register({"registered-3": "X"})
    g1 = secrets.generation()
    assert g1 == g0 + 1
    secrets.register({"registered-3": "X", "fresh-5": "F"})  # one known value and one new: a change
    assert secrets.generation() == g1 + 1 and secrets.registered()["fresh-5"] == "F"
    secrets.register({"registered-3": "Y"})  # a known value under another name is a change too
    assert secrets.generation() == g1 + 2 and secrets.registered()["registered-3"] == "Y"
    secrets.clear_registry()
    assert secrets._GENERATION == g1 + 3


# -- shapes ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, redacted", [
    ("abcdefghijklmnopqrst", True),  # 20 letters: long enough to be a credential
    ("abcdefghijklmnopqrs", False),  # 19 letters and nothing else: prose ("Basic settings")
    ("abcdefg1", True), ("abcdefg=", True), ("abcdefgh", False),
])
def test_an_authorisation_value_is_a_credential_when_it_is_long_or_has_a_digit_or_symbol(value, redacted):
    for scheme in ("Bearer", "basic"):
        out = scrub(f"send {scheme} {value} now")
        assert out == (f"send {scheme} {REDACTED} now" if redacted else f"send {scheme} {value} now")


@pytest.mark.parametrize("text, kept", [
    ("API_TOKEN=abcdefgh", False),
    ("xAPI_TOKEN=abcdefgh", True),  # inside a longer lower-case word: not an env-style name
    ("a xAPI_TOKEN=abcdefgh", True),
    ("_API_TOKEN=abcdefgh", True),  # a name starts with a letter
    ("9_TOKEN=abcdefgh", True),
    ("API_TOKEN=null", True), ("API_TOKEN=None", True), ("API_TOKEN=~", True),  # no value
    ("API_TOKEN=${API_TOKEN}", True), ("API_TOKEN=<redacted>", True),
    ("A API_TOKEN=abcdefgh", False),
])
def test_an_assignment_is_redacted_only_for_an_env_style_name_with_a_value(text, kept):
    assert (scrub(text) == text) is kept
    if not kept:
        assert scrub(text).endswith(f"API_TOKEN={REDACTED}")


# -- logs --------------------------------------------------------------------------------------------------------------
def _record(msg, args=None, exc_text=None) -> logging.LogRecord:
    r = logging.LogRecord("t", logging.INFO, __file__, 1, msg, args, None)
    r.exc_text = exc_text
    return r


def test_the_filter_scrubs_a_records_text_and_its_traceback():
    f = secrets.RedactFilter()
    r = _record("token hf_abcdefghijklmnop here", exc_text="Traceback: key=sk-abcdefghijklmnopqr")
    assert f.filter(r) is True
    assert r.getMessage() == f"token {REDACTED} here" and r.exc_text == f"Traceback: key={REDACTED}"
    clean = _record("nothing here")
    assert f.filter(clean) is True and clean.msg == "nothing here" and clean.exc_text is None


def test_the_filter_freezes_a_formatted_message_so_formatting_again_cannot_bring_a_secret_back():
    class Flips:
        calls = 0

        def __str__(self):
            Flips.calls += 1
            return "fine" if Flips.calls == 1 else "hf_abcdefghijklmnop"

    r = _record("value %s", (Flips(),))
    assert secrets.RedactFilter().filter(r) is True
    assert (r.msg, r.args, r.getMessage()) == ("value fine", None, "value fine")


def test_a_record_that_cannot_be_formatted_is_left_to_the_handler():
    r = _record("%d items", ("many",))
    assert secrets.RedactFilter().filter(r) is True and r.args == ("many",)


def test_the_log_filter_goes_on_every_handler_once():
    lg = logging.getLogger("harness-test-secrets-rules")
    plain, other = logging.NullHandler(), logging.NullHandler()
    other.addFilter(logging.Filter("x"))
    lg.addHandler(plain)
    lg.addHandler(other)
    try:
        for _ in range(2):
            secrets.install_log_filter()
        for h in (plain, other):
            assert sum(isinstance(f, secrets.RedactFilter) for f in h.filters) == 1
    finally:
        lg.removeHandler(plain)
        lg.removeHandler(other)


def test_a_fresh_import_reads_the_environment_on_first_use(monkeypatch):
    """Nothing needs to clear the registry first: the first ``registered()`` of a process (here: of a freshly
    executed module) registers the environment's secrets."""
    import importlib

    monkeypatch.setenv("FRESH_TOKEN", "fresh-value-9")
    importlib.reload(secrets)  # the module's code runs again in the same module object (its globals start over)
    assert secrets.registered() == {"fresh-value-9": "FRESH_TOKEN"}


@pytest.mark.parametrize("text", [
    "Authorization: Token abcdefgh12345678", "authorization: Bearer abcdefgh12345678", "x-api-key: abcdefgh1234",
    "https://user:p@ss@host/x?api_key=abcdefgh1234&b=2", "DB_PASSWORD=123456789 HF_TOKEN=hf_abcdefghijklmnop",
    '{"API_KEY": "abcdefghijkl", "MY_TOKEN": 12345}'])
def test_scrubbing_twice_changes_nothing(text):
    """What one pass leaves is not found again by a second: the scheme word of ``Token <redacted>`` stays (it is
    no credential once the value after it is redacted)."""
    once = secrets.scrub(text)
    assert once != text and secrets.scrub(once) == once


def test_a_secret_named_key_with_a_json_value_that_is_no_text_keeps_the_file_valid():
    """JSON (or a Python repr) under a secret-named key: a number, a boolean, null, a list or a mapping is not a
    credential, and redacting it would write a file no parser reads; text values are still redacted. Outside JSON
    (a shell line, an unquoted YAML key) a number is still redacted, and a boolean never is."""
    import json

    doc = {"AUTH_ENABLED": True, "MY_TOKEN": 12345, "X_PASSWORD": [1, 2], "SESSION_KEY": {"a": 1},
           "OLD_SECRET": None, "API_KEY": "abcdefghijkl"}
    out = json.loads(secrets.scrub(json.dumps(doc)))
    assert out == {**doc, "API_KEY": secrets.REDACTED}
    assert secrets.scrub(repr({"MY_TOKEN": 12345})) == repr({"MY_TOKEN": 12345})
    assert secrets.scrub("DB_PASSWORD=123456789 MY_TOKEN: 1234567") == (
        f"DB_PASSWORD={secrets.REDACTED} MY_TOKEN: {secrets.REDACTED}")
    for literal in ("true", "False", "NULL", "none", "~"):
        assert secrets.scrub(f"AUTH_ENABLED={literal}") == f"AUTH_ENABLED={literal}"
    assert secrets.scrub("AUTH_ENABLED=trueish") == f"AUTH_ENABLED={secrets.REDACTED}"  # a literal is a whole value


def test_a_sealed_file_with_non_text_values_under_secret_names_is_written(tmp_path):
    import json

    from harness import io as hio

    sealed = hio.write_sealed_json(tmp_path / "m.json", {"MY_TOKEN": 12345, "AUTH_ENABLED": True})
    assert sealed["MY_TOKEN"] == 12345 and sealed["AUTH_ENABLED"] is True
    assert hio.seal_problem(json.loads((tmp_path / "m.json").read_text())) is None


# -- issue 44: character classes ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, secret", [
    ('GET http://u:pa"ss-Q1@h/x', 'pa"ss-Q1'), ("GET http://u:pa'ss-Q2@h/x", "pa'ss-Q2"),
    ("GET http://u:pa/ss-Q3@h:9/x", "ss-Q3"), ("GET http://u:pa ss-Q4@h/x", "ss-Q4"),
    ("GET http://u:pa#ss-Q5@h/x", "ss-Q5"), ("GET http://u:pa?ss-Q6@h/x", "ss-Q6"),
    ("GET http://u:pa\\ss-Q7@h/x", "ss-Q7"), ("http://u:pa<ss-Q8@[::1]:80/x", "ss-Q8"),
    ('{"url": "http://u:pa\\"ss-Q9@h/x"}', "ss-Q9"),  # the JSON form of a quote
    ("http://h/v1#access_token=frag-Q10&token_type=bearer", "frag-Q10"),  # a fragment (OAuth's implicit flow)
    ("http://h/cb#access_token=frag-Q22", "frag-Q22"),  # a fragment alone (no '?' or '&' in the text)
    ("http://h/v1;jsessionid=path-Q11?x=1", "path-Q11"), ("http://h/a;token=path-Q12/b", "path-Q12"),
    ("Cookie: theme=dark; sid=cookie-Q13", "cookie-Q13"), ("Set-Cookie: session=cookie-Q14; Path=/", "cookie-Q14"),
    ("{'Cookie': 'a=1; sid=cookie-Q15'}", "cookie-Q15"),
    ("X-Api-Key: 'two words-Q16'", "two"), ('"Authorization": "Token a b-Q17"', "a b-Q17"),
    ("DB_PASS='two words-Q18' next", "words-Q18"), ('DB_PASS="a \\" b-Q19"', "b-Q19"),
    ("API_SECRET: 'it''s-Q20 x'", "s-Q20"),  # YAML's doubled quote
    ('{"cmd": "export DB_PASS=\\"a b-Q21\\"; ls"}', "b-Q21"),  # a quoted shell value inside a JSON string
])
def test_every_character_class_is_removed_whole(text, secret):
    """Each text holds the secret before scrubbing and no part of it after; scrubbing again changes nothing; a
    JSON text stays JSON."""
    import json

    once = scrub(text)
    if text.startswith("{\""):
        json.loads(once)
    assert secret in text and secret not in once, once
    assert scrub(once) == once


def test_the_edges_of_the_shapes():
    """Boundaries the shapes must hold exactly: a quoted shell value in a JSON string from its first character, a URL
    cut after its scheme, a quoted key whose value is no text (JSON stays JSON), an empty shell default."""
    assert scrub('{"cmd": "export DB_PASS=\\"a b-Q21\\"; ls"}') == '{"cmd": "export DB_PASS=\\"<redacted>\\"; ls"}'
    assert scrub("mail a@b.example or http://") == "mail a@b.example or http://"
    assert secrets.url_secrets("http://host") == []
    doc = '{"Authorization": 12345, "Cookie": {"a": "b"}, "x-api-key": ["k"]}'
    assert scrub(doc) == doc
    assert scrub("${DB_PASS:-}") == "${DB_PASS:-}" and scrub("${DB_PASS:-x1}") == "${DB_PASS:-" + REDACTED + "}"
    assert scrub("${HF_TOKEN:?set HF_TOKEN} and $HF_TOKEN: set") == "${HF_TOKEN:?set HF_TOKEN} and $HF_TOKEN: set"
    assert scrub("DB_PASS='abc") == f"DB_PASS='{REDACTED}" and scrub("DB_PASS='ab\\'' next") == f"DB_PASS='{REDACTED}' next"
    assert scrub("http://a:b/c-1@h1,http://x:y/z-2@h2") == f"http://a:{REDACTED}@h1,http://x:{REDACTED}@h2"
    assert scrub("(see http://u:pw-1@h,x@(y))") == f"(see http://u:{REDACTED}@h,x@(y))"  # '@(' ends no userinfo
    assert scrub("authorization: null\nx-api-key: none") == "authorization: null\nx-api-key: none"
    secrets.register({"pw-123456": "MY_PW"})  # a registered value inside a URL keeps its name
    assert scrub("http://u:pw-123456@h/x") == "http://u:<redacted:MY_PW>@h/x"


@pytest.mark.parametrize("text", [
    "http://127.0.0.1:9/v1 and mail bob@example.com",  # a port and a path, then prose with an e-mail address
    "served at http://localhost:8000 is up, mail bob@x.com", "served at http://localhost:8000 is up mail bob@x.com",
    '["http://a:9/v1","y@host"]', '{"a": "http://x:9/v", "b": "y@host"}',  # a quote closes the string
    "ssh://git@github.com:org/repo", '{"Authorization": null, "Cookie": null}', "key from $OPENAI_API_KEY: not set",
    "export HF_TOKEN=\"${HF_TOKEN:?set HF_TOKEN in your environment}\"", "see #section;x=1 and a;b",
    '{"prompt": "a plate with a cookie: it crumbles"}',  # prose: a cookie header holds name=value pairs
    "sent as `Authorization: Bearer` in the handshake, or `Authorization: Bearer <token>`",  # a scheme alone
    "https://registry.npmjs.org:443/@scope/pkg and http://h:8080/a@b/c",  # a port, then a path holding '@'
])
def test_ordinary_text_around_the_shapes_is_kept(text):
    assert scrub(text) == text


def test_a_path_parameter_ends_at_the_next_parameter_or_the_path():
    assert scrub("http://h/a;token=pp-1/b;x=2") == f"http://h/a;token={REDACTED}/b;x=2"
    assert scrub("http://h/a;jsessionid=pp-2;lang=en") == f"http://h/a;jsessionid={REDACTED};lang=en"
    assert scrub("http://h/?token=qq-3/b") == f"http://h/?token={REDACTED}"  # a query value may hold '/'
    assert secret_values({"u": "http://h/a;token=pp-4/b"}) == {"pp-4": ""}


def test_a_shell_default_may_be_a_credential_but_a_reference_is_not():
    assert scrub("export DB_PASS=${DB_PASS:-fallback pw}") == "export DB_PASS=${DB_PASS:-" + REDACTED + "}"
    assert scrub("x ${API_TOKEN=tok-1} ${MODE:-fast} ${HF_TOKEN:?set HF_TOKEN} y") == (
        "x ${API_TOKEN=" + REDACTED + "} ${MODE:-fast} ${HF_TOKEN:?set HF_TOKEN} y")
    assert scrub("the key in $DB_PASS: not set") == "the key in $DB_PASS: not set"
    assert scrub("DB_PASS='a API_TOKEN=bbbb' x") == f"DB_PASS='{REDACTED}' x"  # one quoted value, redacted once


def test_a_url_password_ends_at_the_host_not_at_a_later_address():
    assert scrub("http://bob:pw-1@host/p?email=a@b.com") == f"http://bob:{REDACTED}@host/p?email=a@b.com"
    assert scrub("http://a:pw-1@h1/x and http://b:pw-2@h2/y") == f"http://a:{REDACTED}@h1/x and http://b:{REDACTED}@h2/y"


def test_a_url_in_a_config_registers_its_password_and_credential_parameters():
    """Registered by value, a password is removed in every escaped form, even where no shape finds it."""
    cfg = {"judge": {"base_url": "http://u:pa ss\"x-1@h:9/v1?api_key=qk-2&m=x#access_token=fk-3"},
           "mirrors": ["https://m:p/w-4@mirror/x"], "env": {"HF_ENDPOINT": "https://e:ep-5@hub"}}
    assert secret_values(cfg) == {'pa ss"x-1': "", "qk-2": "", "fk-3": "", "p/w-4": "", "ep-5": ""}
    # a value that is one URL: its password may hold what free text would not (a closing quote, spaces with '/')
    assert secret_values({"u": 'http://u:pa", x-7@h/v', "v": "http://u:pa ss/x-8@h/v1"}) == {
        'pa", x-7': "", "pa ss/x-8": ""}
    secrets.register(secret_values(cfg))
    assert scrub('log: "pa ss\\"x-1" and p%2Fw-4') == f'log: "{REDACTED}" and {REDACTED}'
    assert environment_secrets({"DATABASE_URL": "postgres://u:db/pw-6@db/x"}) == {"db/pw-6": ""}


def test_a_short_or_literal_secret_is_removed_after_its_own_name_only():
    """Too short (or a literal such as a number) to cut out of every text, it is redacted where it follows its own
    name; a JSON number becomes the string "<redacted>" (the file stays valid); other text keeps it."""
    import json

    secrets.register({"Q8x": "MY_CREDS", "4821": "PIN"})
    assert scrub("MY_CREDS=Q8x PIN: 4821 and Q8x, 4821 elsewhere, PIN=48210") == (
        f"MY_CREDS={REDACTED} PIN: {REDACTED} and Q8x, 4821 elsewhere, PIN=48210")
    assert json.loads(scrub(json.dumps({"PIN": 4821, "other": 4821}))) == {"PIN": REDACTED, "other": 4821}
    assert scrub("{'MY_CREDS': 'Q8x'}") == f"{{'MY_CREDS': '{REDACTED}'}}"


@pytest.mark.parametrize("arg, expected", [
    ("+model.env={A: q8x, MODE: 'a, b', N: 98765, Q: 'two words'}",
     f"+model.env={{A: {REDACTED}, MODE: 'a, b', N: {REDACTED}, Q: {REDACTED}}}"),
    ("+model.env.X_Y=Q9", f"+model.env.X_Y={REDACTED}"), ("model.env.MODE=plain-1", "model.env.MODE=plain-1"),
    ("+model.env={A: 1},{A: 2}", f"+model.env={{A: {REDACTED}}},{{A: {REDACTED}}}"),  # a sweep of mappings
    ("+model.env={A: [1, 2], B: {c: d}}", f"+model.env={{A: {REDACTED}, B: {REDACTED}}}"),
    ("evaluate.judge.api_key=12", f"evaluate.judge.api_key={REDACTED}"),
    ("evaluate.judge.api_key_env=FOO", "evaluate.judge.api_key_env=FOO"),
    ("hydra.job.env_set.MY_CREDS=abc", f"hydra.job.env_set.MY_CREDS={REDACTED}"),
    ("--cfg", "--cfg"), ("model=sana_wm", "model=sana_wm"), ("+model.env={}", "+model.env={}"),
    ("+model.env={A: q8x , B: y}", f"+model.env={{A: {REDACTED} , B: {REDACTED}}}"),  # spaces before a comma
    ("+model.env={MY_CREDS:Q7z,PIN:4821}", f"+model.env={{MY_CREDS:{REDACTED},PIN:{REDACTED}}}"),  # Hydra's echo
    ("+model.env={A: q8x,MODE: plain-2}", f"+model.env={{A: {REDACTED},MODE: plain-2}}"),  # a name right after ',
    ("+model.env={A: q8x", f"+model.env={{A: {REDACTED}"),  # not closed
    ("+model.env={A: , MODE: m}", "+model.env={A: , MODE: m}"),  # no value: nothing to redact
    ("+model.env={A: '', MODE: m}", f"+model.env={{A: {REDACTED}, MODE: m}}"),  # an empty quoted value
])
def test_overrides_are_redacted_by_the_place_of_each_secret(arg, expected):
    from harness.secrets import redact_overrides

    assert redact_overrides([arg, "+model.env_plain=[MODE]"]) == [expected, "+model.env_plain=[MODE]"]


def test_names_listed_as_plain_in_the_config_keep_their_override_values_readable():
    from harness.secrets import plain_names, redact_overrides

    cfg = {"model": {"env": {"A": "x"}, "env_plain": ["A"]}, "runs": [{"env_plain": ("B",)}], "env_plain": "C"}
    assert plain_names(cfg) == {"A", "B"}  # a list or tuple beside any env mapping; not a bare string
    assert redact_overrides(["model.env.A=1", "model.env.B=2", "model.env.C=3"], plain_names(cfg)) == [
        "model.env.A=1", "model.env.B=2", f"model.env.C={REDACTED}"]
    assert redact_overrides(["+model.env.X=", "model.env={}"]) == ["+model.env.X=", "model.env={}"]  # no value


def test_override_secrets_finds_every_value_and_url_part():
    from harness.secrets import override_secrets

    found = override_secrets(["+model.env={A: 'x, y', B: 7}", "model.env.C=\"q z\"", "+model.env_plain=[D]",
                              "model.env.D=plain", "evaluate.judge.base_url='http://u:p w@h/v1'"])
    assert found == {"x, y": "A", "7": "B", "q z": "C", "p w": ""}
    assert override_secrets(["x.base_url=http://u:p=w-1@h/v1", "model.env.Q='it'"]) == {"p=w-1": "", "it": "Q"}


# -- quoted values, URL userinfo and references at their edges ---------------------------------------------------------
def test_a_double_quoted_header_value_ends_at_its_quote_even_before_a_single_quote():
    """Only YAML's single-quoted text doubles its quote: ``"'`` closes a double-quoted value (a repr around it)."""
    assert scrub("'x-api-key: \"k-123\"' tail") == f"'x-api-key: \"{REDACTED}\"' tail"


def test_a_single_quoted_value_ending_in_a_doubled_quote_closes_at_the_next_quote():
    """YAML's ``'k-1'''`` is the text ``k-1'``: the rest of the mapping after it stays."""
    assert scrub("{x-api-key: 'k-1''', mode: m}") == f"{{x-api-key: '{REDACTED}', mode: m}}"


def test_a_url_path_with_an_at_sign_and_no_userinfo_is_left_alone():
    assert scrub("pip install git+https://github.com/org/repo@v1.2") == (
        "pip install git+https://github.com/org/repo@v1.2")


def test_a_url_with_an_empty_password_is_left_alone():
    assert scrub("http://user:@host/x") == "http://user:@host/x"


def test_a_password_in_free_text_never_spans_a_closing_quote():
    assert scrub('a="http://u:pw-1";b="me@host"') == 'a="http://u:pw-1";b="me@host"'


def test_a_password_with_spaces_in_free_text_ends_at_the_first_host_after_it():
    assert scrub("ftp://me:open sesame@files and mail admin@corp") == (
        f"ftp://me:{REDACTED}@files and mail admin@corp")


def test_a_config_value_holding_two_urls_is_free_text_for_its_password():
    """Spaces with ``/`` make a password only in a value that is one URL."""
    assert secret_values({"note": "http://u:p w/x@h http://mirror/a"}) == {}
    assert secret_values({"note": "http://u:p w/x@h"}) == {"p w/x": ""}


def test_an_assignment_inside_a_redacted_quoted_value_is_not_redacted_again():
    assert scrub('API_TOKEN="a b MY_TOKEN=c"') == f'API_TOKEN="{REDACTED}"'


def test_a_reference_to_a_variable_at_the_start_of_the_text_is_not_an_assignment():
    assert scrub("$API_TOKEN: not set") == "$API_TOKEN: not set"


def test_a_quoted_value_that_starts_with_an_escaped_quote_is_redacted_whole():
    assert scrub('API_TOKEN="\\"ab\\" cd"') == f'API_TOKEN="{REDACTED}"'


def test_a_shell_default_that_references_another_variable_is_kept():
    assert scrub("pw=${DB_PASS:-$FALLBACK}") == "pw=${DB_PASS:-$FALLBACK}"

"""Secrets by value and by shape, not only by name: no configured secret, URL password, bearer token or value of a
secret-looking variable reaches a file, a log line or the console (``harness.secrets.scrub``, applied by
``harness.io`` to every text written, by ``RedactFilter`` to every log record, by ``ScrubbedStream`` to the console
and by ``run_logged`` to ``upstream.log``)."""

from __future__ import annotations

import json
import logging
import sys
from types import SimpleNamespace

import pytest

from tests.hostile.conftest import SMALL

VALUES = {"DB_PASS": "dbpass-5e1f9a7c", "AUTH_BEARER": "bearer-77a1c3e9", "GITHUB_PAT": "ghpat-0d4b8f21",
          "MY_PWD": "pwd-9c2e4a6b", "HF_TOKEN": "hf_abcdefghijklmnopqrstuv"}


def _leaks(root, needles) -> list[str]:
    return [f"{p}: {n}" for p in root.rglob("*") if p.is_file() for n in needles if n.encode() in p.read_bytes()]


@pytest.mark.parametrize("name", [*VALUES, "apiKey", "dbPass", "session_cookie", "OAUTH_CLIENT_SECRET", "X_PW"])
def test_names_that_look_secret(name):
    from harness.secrets import is_secret_name

    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["PATH", "PWD", "OLDPWD", "key", "max_tokens", "api_key_env", "HF_TOKEN_FILE",
                                  "MODE", "SEED", "CUDA_VISIBLE_DEVICES", "keyframes", "author", "KEYRING"])
def test_names_that_do_not(name):
    from harness.secrets import is_secret_name

    assert not is_secret_name(name)


@pytest.mark.parametrize("text, secret", [
    ("GET http://bob:hunter2pass@127.0.0.1:8000/v1/models", "hunter2pass"),
    ("Authorization: Bearer abc.def-123456789", "abc.def-123456789"),
    ("token=hf_ABCDEFGHIJKLMNOP1234 printed by upstream", "hf_ABCDEFGHIJKLMNOP1234"),
    ("export DB_PASS=s3cr3t-value and more", "s3cr3t-value"),
    ('{"GITHUB_PAT": "ghx-1234"}', "ghx-1234"),
    ("MY_PWD: pw-value-9", "pw-value-9"),
    ("clone https://ghp_abcdefghijklmnopqrstuvwx@github.com/x", "ghp_abcdefghijklmnopqrstuvwx"),
])
def test_scrub_removes_credentials_by_shape(text, secret):
    """The check can fail: each text holds the secret before scrubbing and not after."""
    from harness.secrets import scrub

    assert secret in text and secret not in scrub(text)


def test_scrub_keeps_ordinary_text_and_references():
    from harness.secrets import scrub

    for text in ('export HF_TOKEN="${HF_TOKEN:?set HF_TOKEN in your environment}"', "PATH=/usr/bin:/bin",
                 '{"key": "reference/fov/seed-1/lrlr/x", "owner_token": "abc"}', "launcher=basic settings",
                 "max_tokens: 4096", "http://127.0.0.1:8000/v1", "api_key_env: OPENAI_API_KEY"):
        assert scrub(text) == text, text


def test_registered_values_are_scrubbed_from_every_file_written(tmp_path):
    from harness import secrets
    from harness.io import write_json, write_text

    secrets.clear_registry()
    try:
        secrets.register({"zz-my-secret-zz": "API_SECRET"})
        write_json(tmp_path / "a.json", {"msg": "failed with zz-my-secret-zz", "q": 'he said "zz-my-secret-zz"'})
        write_text(tmp_path / "b.txt", "zz-my-secret-zz\n")
        assert not _leaks(tmp_path, ["zz-my-secret-zz"])
        assert json.loads((tmp_path / "a.json").read_text())["msg"] == "failed with <redacted:API_SECRET>"
    finally:
        secrets.clear_registry()


def test_environment_secrets_are_known_without_being_configured(monkeypatch):
    from harness import secrets

    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-1234567890abcdef")
    secrets.clear_registry()
    try:
        assert "tok-1234567890abcdef" not in secrets.scrub("the value tok-1234567890abcdef leaked")
    finally:
        secrets.clear_registry()


def test_secret_named_env_vars_never_reach_command_meta_or_hydra_dumps(harness, tmp_path):
    """``DB_PASS``, ``AUTH_BEARER``, ``GITHUB_PAT``, ``MY_PWD`` were written in plain text (the name list was too
    narrow)."""
    env = ", ".join(f"{k}: {v}" for k, v in VALUES.items())
    r = harness("model=sana_wm", "context=fullkv", "dry_run=true", "run=sec", "evaluate=off",
                "cases.include=[environment_rocket]", f"+model.env={{{env}, MY_MODE: plain}}", "progress=false",
                "+model.env_plain=[MY_MODE]")
    assert r.code == 0, r.err
    assert not [v for v in VALUES.values() if v in r.text]
    out = tmp_path / "outputs" / "sec"
    assert not _leaks(out, VALUES.values())
    cmd = next(out.rglob("command.sh")).read_text()
    for k in VALUES:
        assert f'export {k}="${{{k}:?' in cmd, k
    assert "export MY_MODE=plain" in cmd
    meta = json.loads(next(out.rglob("meta.json")).read_text())
    assert meta["model"]["env"]["DB_PASS"] == "<redacted>" and meta["model"]["env"]["MY_MODE"] == "plain"
    assert list((out / ".hydra").rglob("config.yaml")) and list((out / ".hydra").rglob("overrides.yaml"))


def test_a_sweep_keeps_secrets_out_of_hydra_files_and_its_status_lines(harness, tmp_path):
    """Also a short value (issue 44: redacted after its own name), in ``multirun.yaml`` and the job lines; one line
    per job and no job output on the console. The swept value is itself a secret (two short PINs): the job label is
    the overrides that vary, so each line shows the PIN's name and ``<redacted>``."""
    r = harness("-m", "+model.env.MY_PIN=48213,59327", "model=sana_wm", "context=native", "dry_run=true", "run=sw",
                "evaluate=off", "cases.include=[environment_rocket]", f"+model.env={{DB_PASS: {VALUES['DB_PASS']}, "
                "MY_CREDS: Q7z, PIN: 4821}", "progress=false")
    assert r.code == 0, r.err
    # Hydra's launcher lines (``Launching 2 jobs locally``, ``#0 : ...``) and each job's verdict went to the console;
    # the local launcher prints one line per job (its varying overrides) and keeps job output in its log
    assert "Launching" not in r.text and "#0 :" not in r.text and "run directory:" not in r.text
    lines = [ln for ln in r.out.splitlines() if ln.startswith("job ")]
    assert len(lines) == 2 and all("MY_PIN=<redacted>" in ln for ln in lines), r.out
    assert lines[0].startswith("job 1 of 2") and lines[1].startswith("job 2 of 2"), r.out
    logs = list((tmp_path / "outputs" / "sw").rglob("job.log"))
    assert len(logs) == 2 and all("compiled (dry run)" in p.read_text() for p in logs)  # each job's output
    assert list((tmp_path / "outputs" / "sw").rglob("multirun.yaml"))
    secrets = [VALUES["DB_PASS"], "Q7z", "48213", "59327"]  # the PINs are short numbers: redacted by their place
    assert not [v for v in secrets if v in r.text] and not _leaks(tmp_path / "outputs", secrets)
    for name, value in (("MY_CREDS", "Q7z"), ("PIN", "4821")):
        assert not _named(tmp_path / "outputs", name, value) and not _named_text(r.text, name, value), name


def test_cfg_job_prints_no_secret_of_the_local_config(harness, tmp_path):
    """``--cfg job`` printed the secrets of ``conf/local`` (here: a config dir with ``local/default.yaml``)."""
    local = tmp_path / "extra" / "local"
    local.mkdir(parents=True)
    (local / "default.yaml").write_text("models:\n  sana_wm:\n    env: {HF_TOKEN: hf_localsecret0123456789, "
                                        "my_api_key: localkey-abcdef}\n")
    r = harness("--config-dir", str(tmp_path / "extra"), "model=sana_wm", "--cfg", "job")
    assert r.code == 0, r.err
    assert "models:" in r.out and "sana_wm" in r.out  # the local file was composed
    assert "hf_localsecret0123456789" not in r.text and "localkey-abcdef" not in r.text


def test_upstream_log_is_scrubbed(tmp_path):
    """``upstream.log`` kept upstream's output verbatim, including a token it printed."""
    from harness.io import run_logged

    script = tmp_path / "up.py"
    script.write_text("import os\nprint('loading with', os.environ['MY_DB_PASS'])\n"
                      "print('hub token hf_zyxwvutsrqponmlkjihg12', flush=True)\n"
                      "print('fetch https://user:pa55word@example.org/x')\n")
    log = tmp_path / "upstream.log"
    import os

    code = run_logged([sys.executable, str(script)], log, env={**os.environ, "MY_DB_PASS": "db-pass-value-42"})
    text = log.read_text()
    assert code == 0 and "loading with" in text and "hub token" in text
    for secret in ("db-pass-value-42", "hf_zyxwvutsrqponmlkjihg12", "pa55word"):
        assert secret not in text


def test_the_upstream_adapter_writes_its_log_through_the_scrubber(tmp_path, monkeypatch):
    """The adapter's launch goes through ``run_logged``: a token the upstream script prints never lands on disk."""
    from adapters.base import build_adapter
    from adapters.upstream import LaunchSpec, UpstreamRunError
    from harness.config_groups import group_yaml

    script = tmp_path / "generate.py"
    script.write_text("import os\nprint('token', os.environ['HF_TOKEN'])\n")
    adapter = build_adapter({**group_yaml("model", "lingbot_v2"), "upstream_dir": str(tmp_path),
                             "checkpoint": str(tmp_path), "python": sys.executable})
    monkeypatch.setenv("HF_TOKEN", "hf_uptoken0123456789abcd")
    monkeypatch.setattr(adapter, "launch", lambda req, controls: LaunchSpec(
        script=str(script), args=[], interpreter=[sys.executable], out_dir=str(tmp_path / "out")))
    item = tmp_path / "item"
    item.mkdir()
    req = SimpleNamespace(item_dir=item, path=SimpleNamespace(num_frames=5))
    with pytest.raises(UpstreamRunError):
        adapter.generate(req, None, lambda f: None)
    text = (item / "upstream.log").read_text()
    assert "token" in text and "hf_uptoken0123456789abcd" not in text


def test_library_log_records_are_scrubbed(capsys):
    """httpx logs the request URL (with its password) at INFO through the root handlers: the filter scrubs it."""
    from harness.secrets import RedactFilter

    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RedactFilter())
    lg = logging.getLogger("httpx.test-hostile")
    lg.addHandler(handler)
    lg.propagate = False
    lg.setLevel(logging.INFO)
    try:
        lg.info('HTTP Request: POST %s "HTTP/1.1 200 OK"', "http://judge:s3cretpw@127.0.0.1:9/v1/chat/completions")
    finally:
        lg.removeHandler(handler)
    err = capsys.readouterr().err
    assert "HTTP Request: POST http://judge:<redacted>@127.0.0.1:9/v1" in err and "s3cretpw" not in err


def test_a_password_in_the_judge_url_reaches_no_file(tmp_path, monkeypatch):
    """``evaluate.judge.base_url=http://user:pw@host`` reached metrics.json, the judge files and summary.json."""
    import dataclasses

    from evaluate.judge import JudgeSession, JudgeSettings, score_item
    from evaluate.stage import EvalConfig
    from harness.io import write_json
    from tests.evaluate.judge.test_judge import make_input, truth
    from tests.support import stored
    from tests.support.fake_judge import FakeJudgeServer

    with FakeJudgeServer(truth(), script=["500"]) as srv:
        url = srv.base_url.replace("http://", "http://judge:pw-in-url-77@")
        s = JudgeSettings.from_dict({"base_url": url, "timeout": 1.0, "max_retries": 2, "backoff_s": 0.01})
        out = stored(score_item(make_input(), s, tmp_path, JudgeSession(s)))
    write_json(tmp_path / "metrics.json", {"metrics": out, "settings": dataclasses.asdict(EvalConfig.from_dict(
        {"judge": {"base_url": url}}))})
    assert list((tmp_path / "judge").rglob("*.json")) and not _leaks(tmp_path, ["pw-in-url-77"])


def test_judge_check_prints_its_findings_on_stdout_and_no_password_anywhere(harness):
    """httpx's request lines went to stdout (Hydra's job logging) and printed the URL's password twice."""
    from tests.evaluate.judge.test_judge import truth
    from tests.support.fake_judge import FakeJudgeServer

    with FakeJudgeServer(truth()) as srv:
        url = srv.base_url.replace("http://", "http://judge:pw-in-url-99@")
        r = harness("judge", "check", f"evaluate.judge.base_url={url}")
    assert r.code == 0, r.err
    assert "ready" in r.out and "judge server: http://judge:<redacted>@" in r.out
    assert "HTTP Request" not in r.out  # library status lines: stderr
    assert "pw-in-url-99" not in r.text


# -- issue 33: secrets by shape and by default -----------------------------------------------------------------------
@pytest.mark.parametrize("text, secret", [
    ("GET https://bob:p@ss:w0rd-9@host.example/v1", "p@ss:w0rd-9"),  # '@' and ':' inside the password
    ("GET https://bob:p@ss:w0rd-9@host.example/v1", "ss:w0rd-9"),
    ("https://me@corp.example:hunter2-x@h/x", "hunter2-x"),  # '@' in the user name
    ("http://127.0.0.1:9/v1?api_key=qs-secret-1&model=x", "qs-secret-1"),
    ("http://h/v1?model=x&access_token=qs-secret-2", "qs-secret-2"),
    ("http://h/v1?key=AIzaQsSecret3&alt=json", "AIzaQsSecret3"),
    ("https://bucket.s3/x?X-Amz-Signature=abcdef0123456789", "abcdef0123456789"),
    ("Authorization: Token tok-secret-4", "tok-secret-4"),
    ("x-api-key: hdr-secret-5", "hdr-secret-5"),
    ('{"headers": {"X-Api-Key": "hdr-secret-6"}}', "hdr-secret-6"),
    ('"Authorization": "Bearer abc.def-123456789"', "abc.def-123456789"),
])
def test_scrub_removes_credentials_of_every_shape(text, secret):
    """URL userinfo with any characters (``@`` included), query-string credentials and credential headers."""
    from harness.secrets import scrub

    assert secret in text and secret not in scrub(text), scrub(text)


def test_the_shapes_keep_ordinary_urls_and_references():
    from harness.secrets import scrub

    for text in ("http://host:8080/path", "https://github.com/org/repo?tab=readme&page=2",
                 "ssh://git@github.com:org/repo", "X-Api-Key: ${JUDGE_KEY}", "see ?model=x&seed=3",
                 "https://h/v1?key_name=judge"):
        assert scrub(text) == text, text


def test_a_registered_secret_is_removed_in_its_escaped_forms():
    """A value with ``@``, a space and a quote, as JSON, a URL and a shell script write it."""
    from harness import secrets

    secrets.clear_registry()
    try:
        secrets.register({"p@ss w'rd!": "GPG_PASSPHRASE"})
        for form in ("p@ss w'rd!", "p%40ss%20w%27rd%21", "p%40ss+w%27rd%21", "'p@ss w'\"'\"'rd!'"):
            out = secrets.scrub(f"x {form} y")
            assert "p@ss" not in out and "%40ss" not in out and "<redacted:GPG_PASSPHRASE>" in out, (form, out)
    finally:
        secrets.clear_registry()


def test_a_query_string_credential_in_the_judge_url_reaches_no_file(tmp_path):
    """``evaluate.judge.base_url=...?api_key=...`` reached every metrics.json, the report and its tables."""
    from harness.io import write_json, write_text

    url = "http://127.0.0.1:9/v1?api_key=qs-key-in-url-31"
    write_json(tmp_path / "metrics.json", {"settings": {"judge": {"base_url": url}}})
    write_text(tmp_path / "report.md", f"| judge | {url} |\n")
    assert not _leaks(tmp_path, ["qs-key-in-url-31"])
    assert "api_key=<redacted>" in (tmp_path / "report.md").read_text()


@pytest.mark.parametrize("name", ["GPG_PASSPHRASE", "MY_CREDS", "SIGNING_PHRASE", "CONN_STRING"])
def test_every_model_env_value_is_secret_unless_listed_as_plain(name):
    from harness.secrets import PLAIN_ENV, env_is_secret, redact, secret_values

    assert env_is_secret(name) and not env_is_secret(name, [name])
    assert env_is_secret("HF_TOKEN", ["HF_TOKEN"])  # a credential's name is never plain
    assert not env_is_secret("CUDA_VISIBLE_DEVICES") and not env_is_secret("NCCL_DEBUG") and "PYTHONPATH" in PLAIN_ENV
    cfg = {"model": {"env": {name: "value-of-it-1", "MODE": "plain-mode", "OMP_NUM_THREADS": "4"},
                     "env_plain": ["MODE"]}}
    assert secret_values(cfg) == {"value-of-it-1": name}
    assert redact(cfg)["model"]["env"] == {name: "<redacted>", "MODE": "plain-mode", "OMP_NUM_THREADS": "4"}


def test_env_values_of_any_name_never_reach_command_meta_or_hydra_dumps(harness, tmp_path):
    """``GPG_PASSPHRASE`` and ``MY_CREDS`` (names outside the list) were written in plain text to ``command.sh``,
    ``meta.json`` and the Hydra dumps."""
    values = {"GPG_PASSPHRASE": "gpg-phrase-8d1e", "MY_CREDS": "creds-4a7b9c"}
    env = ", ".join(f"{k}: {v}" for k, v in values.items())
    r = harness("model=sana_wm", "context=fullkv", "dry_run=true", "run=sec", "evaluate=off",
                "cases.include=[environment_rocket]", f"+model.env={{{env}, MY_MODE: plain}}",
                "+model.env_plain=[MY_MODE]", "progress=false")
    assert r.code == 0, r.err
    out = tmp_path / "outputs" / "sec"
    assert not [v for v in values.values() if v in r.text]
    assert not _leaks(out, values.values())
    cmd = next(out.rglob("command.sh")).read_text()
    for k in values:
        assert f'export {k}="${{{k}:?' in cmd, k
    assert "export MY_MODE=plain" in cmd
    meta = json.loads(next(out.rglob("meta.json")).read_text())
    assert meta["model"]["env"]["MY_CREDS"] == "<redacted>" and meta["model"]["env"]["MY_MODE"] == "plain"


def test_an_env_value_of_any_name_given_on_the_command_line_is_never_echoed(harness, tmp_path):
    """The dot form (``+model.env.MY_CREDS=...``): ``--cfg job`` prints the config, and a failing command its error
    line; neither shows the value (secret by default whatever its name), a plain-listed one stays readable."""
    r = harness("model=sana_wm", "+model.env.MY_CREDS=creds-echo-5521", "+model.env.MY_MODE=plain-mode-1",
                "+model.env_plain=[MY_MODE]", "--cfg", "job")
    assert r.code == 0 and "MY_CREDS" in r.out and "plain-mode-1" in r.out, r.err
    assert "creds-echo-5521" not in r.text
    r = harness("run=x", *SMALL, "+model.env.MY_CREDS=creds-echo-5521", "+overwite=true")
    assert r.code == 2 and "overwite" in r.err, r.err
    assert "creds-echo-5521" not in r.text and not (tmp_path / "outputs").exists()


def test_a_literal_env_value_is_redacted_by_name_but_never_scrubbed_from_every_text():
    """Every env value is secret by default: a value like ``true`` or ``1024`` must not be cut out of every file (a
    JSON ``true`` replaced would corrupt it); the variable itself still shows ``<redacted>``."""
    from harness import secrets

    cfg = {"model": {"env": {"USE_FAST": "true", "CHUNK": "1024", "MY_CREDS": "creds-77aa"}}}
    secrets.clear_registry()
    try:
        secrets.register(secrets.secret_values(cfg))
        text = secrets.scrub('{"dry_run": true, "frames": 1024, "c": "creds-77aa"}')
        assert text == '{"dry_run": true, "frames": 1024, "c": "<redacted:MY_CREDS>"}'
        assert secrets.redact(cfg)["model"]["env"] == {"USE_FAST": "<redacted>", "CHUNK": "<redacted>",
                                                       "MY_CREDS": "<redacted>"}
    finally:
        secrets.clear_registry()


# -- issue 44: secrets by character class ------------------------------------------------------------------------------
#: a URL password of each character class that leaked: whole (a quote) or its tail (``/``, a space); and the others
#: a password may hold (``#``, ``?``, a backslash, ``@`` and ``:``, a comma)
URL_PASSWORDS = {"double quote": 'pa"ss-Qd4', "single quote": "pa'ss-Qs4", "slash": "pa/ss-Qf4",
                 "space": "pa ss-Qw4", "hash and question": "pa#s?s-Qh4", "backslash": "pa\\ss-Qb4",
                 "at and colon": "p@s:s-Qa4", "comma": "pa,ss-Qc4"}


def _url_override(password: str, host: str = "127.0.0.1:9") -> str:
    quote = "'" if "'" not in password else '"'
    return f"evaluate.judge.base_url={quote}http://judge:{password}@{host}/v1{quote}"


def _judge_check(harness, *overrides: str):
    """``judge check`` against a judge server of this process (answers at once)."""
    from tests.evaluate.judge.test_judge import truth
    from tests.support.fake_judge import FakeJudgeServer

    with FakeJudgeServer(truth()) as srv:
        host = srv.base_url.split("://", 1)[1].split("/", 1)[0]
        return host, harness("judge", "check", *(o.replace("127.0.0.1:9", host) for o in overrides))


def test_a_url_password_of_any_character_class_reaches_no_file_and_no_console(harness, tmp_path):
    """Before: a password holding a quote leaked whole to config.yaml, overrides.yaml, meta.json and ``judge
    check``'s console; one holding ``/`` or a space leaked its tail. After: every password is gone everywhere, and
    each URL still reads ``http://judge:<redacted>@host/...``. The judge's URL holds the quote; plain-listed
    ``model.env`` variables (no secret by name) hold the other classes, found in the URL itself."""
    kinds = list(URL_PASSWORDS)
    mirrors = {f"MIRROR_{i}": URL_PASSWORDS[k] for i, k in enumerate(kinds[1:])}
    mapping = ", ".join(f"{n}: {chr(34) if chr(39) in pw else chr(39)}http://m:{pw}@h{n[-1]}.example/x"
                        f"{chr(34) if chr(39) in pw else chr(39)}" for n, pw in mirrors.items())
    overrides = [_url_override(URL_PASSWORDS[kinds[0]]), f"+model.env={{{mapping}}}",
                 f"+model.env_plain=[{', '.join(mirrors)}]"]
    needles = [n for pw in URL_PASSWORDS.values() for n in (pw, pw[-5:])]
    r = harness("model=sana_wm", "context=fullkv", "dry_run=true", "run=u", "cases.include=[environment_rocket]",
                "progress=false", *overrides)
    assert r.code == 0, r.err
    cfg = harness("model=sana_wm", *overrides, "--cfg", "job")  # prints the config: every URL of it
    for text in (r.text, cfg.text):  # judge check's console: test_judge_check_says_whether_the_key_is_set
        assert not [n for n in needles if n in text], text
    out = tmp_path / "outputs" / "u"
    assert not _leaks(out, needles)
    config = next(out.rglob("config.yaml")).read_text()
    assert "http://judge:<redacted>@127.0.0.1:9/v1" in config and "http://m:<redacted>@h0.example/x" in config
    assert all(f"http://m:<redacted>@h{n[-1]}.example/x" in config + cfg.out for n in mirrors), config
    assert "http://judge:<redacted>@127.0.0.1:9/v1" in next(out.rglob("overrides.yaml")).read_text()
    meta = json.loads(next(out.rglob("meta.json")).read_text())
    assert any("http://judge:<redacted>@127.0.0.1:9/v1" in a for a in meta["argv"])


ENV_OVERRIDES = {"SHORT": "Q8x", "QUOTED": "two words-Q7x", "COMMA": "a, b-Q6x", "BRACE": "x}y-Q5x"}


def _named(root, name: str, value: str) -> list[str]:
    """Files where ``value`` follows ``name`` (``NAME: value``, ``NAME=value``, quoted or not)."""
    import re

    pat = re.compile(re.escape(name).encode() + rb"['\"]?\s*[:=]\s*['\"]?" + re.escape(value).encode())
    return [str(p) for p in root.rglob("*") if p.is_file() and pat.search(p.read_bytes())]


def test_env_values_of_every_class_reach_no_file_and_no_console(harness, tmp_path):
    """Before: short or numeric ``model.env`` values were written verbatim in overrides.yaml and meta.json's argv
    (only long values were scrubbed from the override strings). After: every value of a secret variable is redacted
    by its place in an override, whatever its length, type or quoting; a plain-listed one stays readable."""
    mapping = ", ".join(f"{k}: '{v}'" if " " in v or "," in v or "}" in v else f"{k}: {v}"
                        for k, v in ENV_OVERRIDES.items())
    r = harness("model=sana_wm", "context=fullkv", "dry_run=true", "run=e", "evaluate=off", "progress=false",
                "cases.include=[environment_rocket]", f"+model.env={{{mapping}, NUM: 98765, MODE: plain-Q3x}}",
                "+model.env.DOT=Q9", "+model.env.DOTNUM=31337", "+model.env_plain=[MODE]")
    assert r.code == 0, r.err
    out = tmp_path / "outputs" / "e"
    assert not _leaks(out, ENV_OVERRIDES.values()) and not [v for v in ENV_OVERRIDES.values() if v in r.text]
    for name, value in (("NUM", "98765"), ("DOT", "Q9"), ("DOTNUM", "31337")):
        assert not _named(out, name, value) and not _named_text(r.text, name, value), name
    meta = json.loads(next(out.rglob("meta.json")).read_text())
    argv = " ".join(meta["argv"])
    assert "SHORT: <redacted>" in argv and "+model.env.DOT=<redacted>" in argv and "MODE: plain-Q3x" in argv
    overrides = next(out.rglob("overrides.yaml")).read_text()
    assert "NUM: <redacted>" in overrides and "+model.env.DOTNUM=<redacted>" in overrides


def _named_text(text: str, name: str, value: str) -> bool:
    import re

    return re.search(re.escape(name) + r"['\"]?\s*[:=]\s*['\"]?" + re.escape(value), text) is not None


def test_short_env_values_never_reach_cfg_job_or_a_failing_sweeps_message(harness, tmp_path):
    """``--cfg job`` prints the config; a failing sweep names the job's overrides: neither shows a short value (a
    sweep's files and job lines: test_a_sweep_keeps_secrets_out_of_hydra_files_and_its_status_lines)."""
    r = harness("model=sana_wm", "+model.env.MY_CREDS=Q7z", "--cfg", "job")
    assert r.code == 0 and "MY_CREDS: <redacted>" in r.out and "Q7z" not in r.text, r.text
    r = harness("-m", "context=fullkv,native", "dry_run=true", "run=x", *SMALL, "+model.env.MY_CREDS=Q7z")
    assert r.code == 2 and "model.env" in r.err and "Q7z" not in r.text, r.err  # the reference model takes no env


@pytest.mark.parametrize("key_set", [False, True])
def test_judge_check_says_whether_the_key_is_set(harness, monkeypatch, key_set):
    """Before: ``key from $OPENAI_API_KEY: not set`` was scrubbed into ``<redacted> set`` (read as an assignment),
    and a URL password holding a quote was printed whole. After: the truth about the key, and no password."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    if key_set:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-judgekey0123456789abcdef")
    pw = URL_PASSWORDS["double quote"]
    host, r = _judge_check(harness, _url_override(pw))
    assert f"(key from $OPENAI_API_KEY: {'set' if key_set else 'not set'})" in r.out, r.text
    assert f"judge server: http://judge:<redacted>@{host}/v1" in r.out, r.text
    for secret in ("sk-judgekey0123456789abcdef", pw, pw[-5:]):
        assert secret not in r.text


def test_quoted_values_with_spaces_and_short_env_values_leave_no_tail_in_upstream_log(tmp_path):
    """Upstream printing ``DB_PASSWORD="two words"`` left `` words`` in ``upstream.log``; a short value of a
    configured secret variable printed after its name stayed whole."""
    import os

    from harness import secrets
    from harness.io import run_logged

    script = tmp_path / "up.py"
    script.write_text("print('DB_PASSWORD=\"two words-tail1\" and MY_TOKEN=\\'three word tail2\\'')\n"
                      "print(\"export API_SECRET='it''s-tail3 x'\")\nprint('MY_CREDS=Q8x PIN: 4821')\n")
    log = tmp_path / "upstream.log"
    secrets.clear_registry()
    try:
        secrets.register({"Q8x": "MY_CREDS", "4821": "PIN"})  # as a run registers its model.env
        assert run_logged([sys.executable, str(script)], log, env=dict(os.environ)) == 0
    finally:
        secrets.clear_registry()
    text = log.read_text()
    assert "DB_PASSWORD=" in text and "MY_CREDS=<redacted>" in text and "PIN: <redacted>" in text, text
    for tail in ("tail1", "tail2", "tail3", "words", "Q8x", "4821"):
        assert tail not in text, (tail, text)

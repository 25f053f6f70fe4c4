"""Secret-looking environment values: found in configs and argv, redacted everywhere, referenced in scripts."""

from __future__ import annotations

import subprocess

from harness.secrets import is_secret_name, redact, secret_values, shell_export


def test_secret_names():
    for n in ("HF_TOKEN", "WANDB_API_KEY", "aws_secret_access_key", "DB_PASSWORD", "GOOGLE_CREDENTIALS"):
        assert is_secret_name(n), n
    for n in ("MODE", "NUM_CHUNKS", "CUDA_VISIBLE_DEVICES", "SEED"):
        assert not is_secret_name(n), n


def test_redaction_keeps_ordinary_keys_and_scrubs_values():
    cfg = {"model": {"env": {"HF_TOKEN": "hf_abcdef123", "MODE": "x"}, "env_plain": ["MODE"]},
           "manifest": {"key": "a/b"},
           "argv": ["+model.env={HF_TOKEN: hf_abcdef123}"], "error": "auth failed for hf_abcdef123"}
    values = secret_values(cfg)
    assert values == {"hf_abcdef123": "HF_TOKEN"}
    out = redact(cfg, values)
    assert out["model"]["env"] == {"HF_TOKEN": "<redacted>", "MODE": "x"}
    assert out["manifest"] == {"key": "a/b"}  # a key named 'key' outside env mappings is not a secret
    assert "hf_abcdef123" not in repr(out)


def test_command_scripts_reference_secrets_and_still_run(tmp_path):
    script = "set -euo pipefail\n" + shell_export("HF_TOKEN", "never-written") + "\n" + shell_export(
        "MODE", "a b") + '\necho "$HF_TOKEN|$MODE"\n'
    assert "never-written" not in script
    ok = subprocess.run(["bash", "-c", script], env={"HF_TOKEN": "from-env", "PATH": "/usr/bin:/bin"},
                        capture_output=True, text=True)
    assert ok.stdout.strip() == "from-env|a b"
    missing = subprocess.run(["bash", "-c", script], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert missing.returncode != 0 and "set HF_TOKEN" in missing.stderr


def test_argv_secrets_are_found():
    from harness.app.argv import argv_secrets as _argv_secrets

    found = _argv_secrets(["h", "+model.env={HF_TOKEN: hf_x1y2z3, MODE: plain}", "model.env.WANDB_API_KEY=k3y999",
                           "seed=1", "+model.env_plain=[MODE]"])
    assert found == {"hf_x1y2z3": "HF_TOKEN", "k3y999": "WANDB_API_KEY"}
    # not listed as plain: every env value is a secret, whatever its name
    assert _argv_secrets(["h", "+model.env={MODE: plain}", "model.env.MY_CREDS=c-1"]) == {"plain": "MODE",
                                                                                          "c-1": "MY_CREDS"}


def test_only_scalar_non_empty_env_values_are_secret_values():
    """Every env value is secret by default, but an empty one is nothing to scrub and a nested mapping or list is
    walked (its own secret-named keys count), never registered or redacted whole."""
    cfg = {"env": {"EMPTY": "", "LIST": ["a-long-item"], "NESTED": {"inner": "plain-value"}, "NUM": 12345}}
    assert secret_values(cfg) == {"12345": "NUM"}
    out = redact(cfg)["env"]
    assert out == {"EMPTY": "<redacted>", "LIST": ["a-long-item"], "NESTED": {"inner": "plain-value"},
                   "NUM": "<redacted>"}


def test_escaped_forms_of_a_value_go_whole_longest_first():
    """A value as JSON writes it (quote and backslash escaped) and as a shell script quotes it is removed whole,
    quotes included; a 3-character value and a literal are never scrubbed by value."""
    import json

    from harness.secrets import clear_registry, register, scrub, scrubbable

    clear_registry()
    try:
        register({'pw"q\\x-1': "JSON_PW", "p@ss w0rd": "SHELL_PW"})
        assert scrub(json.dumps({"k": 'pw"q\\x-1'})) == '{"k": "<redacted:JSON_PW>"}'
        assert scrub("export X='p@ss w0rd'; echo") == "export X=<redacted:SHELL_PW>; echo"
    finally:
        clear_registry()
    assert not scrubbable("abc") and scrubbable("abcd") and not scrubbable("true") and not scrubbable("-1.5e3")


def test_a_secret_name_is_a_reference_even_when_the_caller_says_plain():
    assert shell_export("HF_TOKEN", "x", False).startswith('export HF_TOKEN="${HF_TOKEN:?')
    assert shell_export("MY_CREDS", "v", True).startswith('export MY_CREDS="${MY_CREDS:?')
    assert shell_export("MY_MODE", "fast", False) == "export MY_MODE=fast"


def test_scrub_finds_each_shape_on_its_own():
    """Each shape's quick pre-check lets its own text through (no other shape in the text to mask it)."""
    from harness.secrets import clear_registry, register, scrub

    for text, secret in (("a=1&token=qs-secret-7", "qs-secret-7"), ("x-access-token: tok-abcdef1", "tok-abcdef1"),
                         ("sent Bearer abc.def-123456789 on", "abc.def-123456789"),
                         ("sent Basic dXNlcjpwYXNzd29yZA== on", "dXNlcjpwYXNzd29yZA==")):
        assert secret not in scrub(text), text
    clear_registry()
    try:  # overlapping values: the longest goes first, whole
        register({"abcd-1234": "SHORT", "abcd-1234-5678": "LONG"})
        assert scrub("v=abcd-1234-5678 w=abcd-1234") == "v=<redacted:LONG> w=<redacted:SHORT>"
    finally:
        clear_registry()
    assert secret_values({"env": ["not", "a", "mapping"], "model": {"env": {"A_B": "val-1"}, "env_plain": None}}) \
        == {"val-1": "A_B"}
    assert redact({"env": ["not", "a", "mapping"]}) == {"env": ["not", "a", "mapping"]}
    assert redact({"api_key": "abcd", "other_key": "abc"}) == {"api_key": "<redacted>", "other_key": "abc"}

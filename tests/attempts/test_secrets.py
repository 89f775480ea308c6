"""A configured secret never reaches a stored object, whatever route and encoding it takes.

The stand-ins get the secret from their environment (as a harness would) and push it into
every retained thing: envelope keys and values, the texts of envelope problems, workspace
files, their names, symlink targets, ref names, stdout; raw and in the encodings a program
commonly applies (base64 standard and URL-safe at every alignment, hex in both cases, URL
encoding). The needles the tests look for are computed here, independently of yyb.
"""

from __future__ import annotations

import base64
import urllib.parse
import uuid

import pytest

# Lowercase (lowercasing cannot hide a leak); the specials give URL encoding and the two
# base64 alphabets something to differ on.
SECRET = "sekrit-" + uuid.uuid4().hex + "~~~??? @+"
TOKEN = "tok-" + uuid.uuid4().hex  # a plain one, fit for a ref name
NAME = "YYB_T_SECRET"
MARK = f"[REDACTED:{NAME}]"


def encodings(secret: str) -> dict[str, str]:
    """Every encoded form a stand-in writes, by the name of the file it writes it to."""
    raw = secret.encode()
    forms = {"raw": secret}
    for shift, prefix in enumerate((b"", b"x", b"xy")):
        std = base64.b64encode(prefix + raw).decode()
        forms[f"b64-{shift}"] = std
        forms[f"b64url-{shift}"] = base64.urlsafe_b64encode(prefix + raw).decode()
    forms["hex"] = raw.hex()
    forms["HEX"] = raw.hex().upper()
    forms["url"] = urllib.parse.quote(secret, safe="")
    forms["url-plus"] = urllib.parse.quote_plus(secret)
    return forms


def needles(secret: str) -> dict[str, str]:
    """The middle of each encoded form: what must not survive anywhere (a redaction that
    touched only its ends would leave it)."""
    return {kind: form[6:-6] for kind, form in encodings(secret).items()}


# The stand-in computes the same forms itself, from its environment, with Python's standard
# library (available in the sandbox as part of the OS).
WRITER = r"""
python3 - <<'PY'
import base64, os, urllib.parse
secret = os.environ["YYB_T_SECRET"]
raw = secret.encode()
forms = {"raw": secret}
for shift, prefix in enumerate((b"", b"x", b"xy")):
    forms[f"b64-{shift}"] = base64.b64encode(prefix + raw).decode()
    forms[f"b64url-{shift}"] = base64.urlsafe_b64encode(prefix + raw).decode()
forms["hex"] = raw.hex()
forms["HEX"] = raw.hex().upper()
forms["url"] = urllib.parse.quote(secret, safe="")
forms["url-plus"] = urllib.parse.quote_plus(secret)
for kind, form in forms.items():
    with open(f"leak-{kind}.txt", "w") as handle:
        handle.write(f"token: {form}\n")
    print(f"{kind}: {form}")
# Large enough to be streamed into the store, the secret past the first MiB.
with open("leak-large.bin", "wb") as handle:
    handle.truncate(20 << 20)
    handle.seek(17 << 20)
    handle.write(b"...." + raw + b"....")
with open(f"named-{secret}.txt", "w") as handle:
    handle.write("a file whose name is the secret\n")
os.symlink("target-" + secret, "link-to-secret")
PY
git branch "leak-$YYB_T_TOKEN"
touch "untracked-$YYB_T_TOKEN"
git add leak-raw.txt
envelope succeeded
"""


@pytest.fixture
def secret(bench, monkeypatch):
    monkeypatch.setenv(NAME, SECRET)
    monkeypatch.setenv("YYB_T_TOKEN", TOKEN)
    bench.configure(secrets=[NAME, "YYB_T_TOKEN"])
    return SECRET


def _leaks(bench, secret: str) -> dict[str, list[str]]:
    found = {kind: bench.holding(needle) for kind, needle in needles(secret).items()}
    found["token"] = bench.holding(TOKEN)
    return {kind: oids for kind, oids in found.items() if oids}


def test_encodings_are_distinct_enough_to_test_something():
    forms = encodings(SECRET)
    assert len(set(forms.values())) == len(forms)
    assert all(len(n) >= 8 for n in needles(SECRET).values())


def test_a_secret_in_workspace_files_is_stored_redacted_and_marked(bench, secret):
    model = bench.behaviour("writer", WRITER)
    _, [result] = bench.run([model])
    assert result.terminal_class == "grader_failure", result.reason
    assert _leaks(bench, secret) == {}
    terminal = bench.terminal(result)
    post = bench.record(terminal["links"]["manifest"])
    listing = bench.record(post["links"]["listing"])
    marked = dict((path, names) for path, names in listing["redacted"])
    for kind in encodings(secret):
        assert marked.get(f"leak-{kind}.txt") == [NAME], kind
    assert marked.get("leak-large.bin") == [NAME]
    assert marked.get("link-to-secret") == [NAME]
    files = {path: listing["links"]["files"][i] for path, _, i in listing["entries"]}
    assert bench.body(files["leak-raw.txt"]) == f"token: {MARK}\n".encode()
    large = bench.body(files["leak-large.bin"])
    assert large[(17 << 20) : (17 << 20) + 8 + len(MARK)] == f"....{MARK}....".encode()
    # A name that holds the secret is not retained at all: it is omitted, its name redacted.
    assert not [p for p in files if p.startswith("named-")]
    assert [p for p, _ in listing["omitted"] if p.startswith("named-")] != []
    patch = bench.linked(result, "patch").decode()
    assert f"+token: {MARK}" in patch
    stdout = bench.linked(result, "stdout").decode()
    assert stdout.count(MARK) == len(encodings(secret))
    assert bench.doctor_errors() == []


@pytest.mark.parametrize(
    "extra",
    [
        '"usage": {"$YYB_T_SECRET": 3, "tokens": 1}',
        '"usage": {"$(printf %s "$YYB_T_SECRET" | base64 -w0)": 3}',
        '"session_id": "$(printf %s "$YYB_T_SECRET" | od -An -tx1 | tr -d " \\n")"',
    ],
    ids=["usage-key", "usage-key-base64", "session-hex"],
)
def test_a_secret_anywhere_in_the_envelope_is_redacted(bench, secret, extra):
    model = bench.behaviour("envelope-keys", _with_extra('stand "$NAME" "$extra"', extra))
    _, [result] = bench.run([model])
    assert result.terminal_class == "grader_failure", result.reason
    assert _leaks(bench, secret) == {}
    envelope = bench.record(bench.terminal(result)["links"]["envelope"])
    assert MARK in str(envelope)


def _with_extra(args: str, extra: str, status: str = "succeeded") -> str:
    """A behaviour that writes its envelope with ``extra`` fields, expanded by the shell."""
    return f"extra=$(cat <<EOF\n{extra}\nEOF\n)\nenvelope {status} {args}\n"


@pytest.mark.parametrize(
    "status, extra",
    [('"$YYB_T_SECRET"', ""), ("succeeded", '"$YYB_T_SECRET": 1')],
    ids=["status", "unknown-field"],
)
def test_a_secret_in_an_unusable_envelope_is_not_in_its_problem(bench, secret, status, extra):
    model = bench.behaviour("bad-envelope", _with_extra('stand "$NAME" "$extra"', extra, status))
    _, [result] = bench.run([model])
    assert result.terminal_class == "harness_failure", result.reason
    assert _leaks(bench, secret) == {}
    assert SECRET not in result.reason

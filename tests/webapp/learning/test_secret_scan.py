"""The secret detector on labelled secrets and ordinary text, and how a turn names where its
secret is (pure: no database)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.secret_alarms import set_figures
from webapp.learning.secret_guard import holds_secret, turn_secret
from webapp.learning.secret_scan import entropy, secret_kinds, secrets_in

DATA = Path(__file__).resolve().parents[3] / "bench" / "data"
LABELLED = json.loads((DATA / "secrets_labelled.json").read_text())


@pytest.mark.parametrize(
    ("name", "found", "alarms"),
    [
        ("secrets_labelled", 1.0, 0.0),
        ("secrets_blind", 1.0, 0.0),
        ("secrets_held_out", 0.98, 0.01),
    ],
)
def test_the_sets_the_rules_were_tuned_on_keep_their_figures(name, found, alarms) -> None:
    figures = set_figures(name)
    assert figures["found"] >= found * figures["secrets"]
    assert figures["alarms"] <= alarms * figures["ordinary"]


def test_on_the_held_out_set_it_finds_four_in_five_secrets_and_few_false_alarms() -> None:
    """secrets_fresh: written blind to the rules, never tuned on (its reading: 101/122 found,
    4/177 false alarms); a floor under that reading, in many languages."""
    figures = set_figures("secrets_fresh")
    assert figures["secrets"] >= 80 and len(figures["by"]) >= 12
    assert figures["found"] / figures["secrets"] >= 0.8
    assert figures["alarms"] / figures["ordinary"] <= 0.03


def test_the_labelled_set_covers_at_least_ten_kinds_and_every_secret_is_found() -> None:
    kinds = {case["kind"] for case in LABELLED["secrets"]}
    assert len(kinds) >= 10
    missed = [case["kind"] for case in LABELLED["secrets"] if not secret_kinds(case["text"])]
    assert missed == []


def test_ordinary_text_and_code_about_passwords_and_keys_raise_no_alarm() -> None:
    alarms = {text: secret_kinds(text) for text in LABELLED["ordinary"]}
    assert {text: kinds for text, kinds in alarms.items() if kinds} == {}


@pytest.mark.parametrize(
    "text",
    [
        "password = input('Password: ')",
        "export API_KEY=<your-api-key>",
        "token = os.environ['TOKEN']",
        "password: ********",
        "def __init__(self, *, api_key: str = api_key) -> None:",
        "git checkout 3f786850e387550fdab836ed7e6dc881de23001b",
        "estimatedPromptTokens=6160 sessionId=parley-check-1796506816",
        "See HuggingFaceTB/SmolLM2-135M-Instruct.",
        "",
    ],
)
def test_placeholders_identifiers_and_hashes_are_not_secrets(text: str) -> None:
    assert secrets_in(text) == []


def test_a_blob_pasted_on_one_line_is_read_to_its_end() -> None:
    text = "x" * 50_000 + " AKIAQ4NRXG7VJ2MHT5LD"
    assert "AWS Access Key" in secret_kinds(text)


def test_entropy_is_the_bits_per_character() -> None:
    assert entropy("aaaa") == 0.0
    assert entropy("abcd") == pytest.approx(2.0)


def test_a_turn_names_the_kind_and_where_without_quoting_the_secret() -> None:
    reason = turn_secret(
        prompt_messages=[
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": [{"type": "text", "text": "Read my .env"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"function": {"name": "read", "arguments": '{"path": ".env"}'}}],
            },
            {"role": "tool", "content": "KEY=AKIAQ4NRXG7VJ2MHT5LD"},
        ],
        texts={"the answer": "Done.", "the comment": None},
    )
    assert reason == "contains a secret: AWS Access Key in a tool result"
    assert holds_secret(reason)
    assert turn_secret(prompt_messages=[], texts={"the answer": "Paris."}) is None
    assert not holds_secret("excluded by an admin")


def test_a_key_that_ends_a_sentence_is_found() -> None:
    assert secret_kinds("My AWS secret key is xCsZjr/6v/Cjk+sPhHXboNqbJvdqOcvU/QZT+nfw.")


@pytest.mark.parametrize(
    "text",
    [
        '{"stdout": "host: db\\npassword: Tr0ub4dor&3\\n"}',  # a tool's output as JSON
        "PGPASSWORD=Zq9vLm2x! psql -h db",
        "redis://:Sup3rS3cret@redis:6379/0",
        "Authorization: Bearer 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "-----BEGIN CERTIFICATE-----MIIBkTCB+wIJAKHBfpegPjMC-----END CERTIFICATE-----\n"
        "and the key: Zx8Kq2vLm9Tr4Wp7Yd3Nf6Hs1Jc5Bg0Qa",
    ],
)
def test_secrets_in_json_environment_urls_headers_and_after_a_certificate(text: str) -> None:
    assert secret_kinds(text)


def test_a_tool_call_that_writes_a_password_holds_it() -> None:
    arguments = json.dumps({"path": ".env", "content": "password: Tr0ub4dor&3\n"})
    call = {"id": "c", "type": "function", "function": {"name": "write", "arguments": arguments}}
    reason = turn_secret(
        prompt_messages=[{"role": "assistant", "content": None, "tool_calls": [call]}], texts={}
    )
    assert reason == "contains a secret: Password or key named in words in a tool call"


@pytest.mark.parametrize(
    "line", ["WIFI:P:" * 1500, "password: " * 5000, "Bearer " * 7000, "a" * 50_000, "x=" * 25_000]
)
def test_no_pattern_backtracks_catastrophically_on_a_long_repeated_line(line: str) -> None:
    import time

    started = time.perf_counter()
    secrets_in(line)
    assert time.perf_counter() - started < 5  # a judge worker reads every judged turn

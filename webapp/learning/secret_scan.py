"""Secrets in text: what people paste and what their tools return (keys, tokens, passwords,
private keys, connection strings), found so that they never train a model.

detect-secrets' plugins find the formats services publish (cloud keys, private keys, JWTs,
Slack, GitHub, OpenAI and other tokens, passwords in URLs, keyword assignments in code). Chat
text is not a source file, so Parley's own rules sit beside them: Parley's API keys and other
services' formats, passwords on command lines, Basic credentials and session cookies, recovery
codes, an unquoted high-entropy token (not a hash, a public key or the base64 of text), and a
secret said in words in the languages people write (``webapp.learning.secret_words``). What
matters is that a secret is not missed; an ordinary text taken for one costs only that turn's
training (docs/security.md gives the rates measured on held-out cases and on the benchmarks').
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, lru_cache

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import BasePlugin
from detect_secrets.settings import default_settings

from webapp.learning.secret_words import password_like, placeholder, secrets_said

# Addresses are not secrets; the quoted high-entropy plugins are replaced by ENTROPY below,
# which also reads unquoted tokens and leaves commit hashes alone.
_NOT_SECRETS = {"Public IP (ipv4)", "Base64 High Entropy String", "Hex High Entropy String"}

PARLEY_KEY = re.compile(r"\bpk-[A-Za-z0-9_-]{40,}")

# Formats published by services that detect-secrets has no plugin for.
PREFIXED = {
    "Hugging Face token": r"\bhf_[A-Za-z0-9]{30,}",
    "GitHub Token": r"\b(?:github_pat_[A-Za-z0-9_]{40,}|gh[pousr]_[A-Za-z0-9]{36,})",
    "Anthropic key": r"\bsk-ant-[a-z]+\d*-[A-Za-z0-9_-]{40,}",
    "Google API key": r"\bAIza[0-9A-Za-z_-]{35}",
    "Google OAuth client secret": r"\bGOCSPX-[A-Za-z0-9_-]{20,}",
    "DigitalOcean token": r"\bdo[oprt]_v1_[a-f0-9]{64}",
    "Shopify token": r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
    "Stripe Access Key": r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{20,}",
    "Groq key": r"\bgsk_[A-Za-z0-9]{40,}",
    "Replicate token": r"\br8_[A-Za-z0-9]{30,}",
    "Docker Hub token": r"\bdckr_pat_[A-Za-z0-9_-]{20,}",
    "PyPI Token": r"\bpypi-AgE[A-Za-z0-9_-]{50,}",
    "Azure storage key": r"AccountKey=[A-Za-z0-9+/]{40,}={0,2}",
    "Webhook URL with its token": (
        r"hooks\.slack\.com/services/T\w+/B\w+/\w{16,}"
        r"|discord(?:app)?\.com/api/webhooks/\d+/[\w-]{30,}"
    ),
    "Notion token": r"\b(?:secret_|ntn_)[A-Za-z0-9]{40,}",
    "Atlassian token": r"\bATATT3x[A-Za-z0-9_=-]{40,}",
    "Wi-Fi key": r"WIFI:(?:[^;\n]*;)*?P:[^;\s]{6,};",
    "Key in a URL": (
        r"[?&](?:api[_-]?key|apikey|appid|key|access_token|token|auth|sig|signature|sv|"
        r"X-Amz-Signature|X-Goog-Signature|X-Amz-Credential)=[A-Za-z0-9%+/=_.-]{16,}"
    ),
}
_PREFIXED = [(kind, re.compile(pattern)) for kind, pattern in PREFIXED.items()]

URL_PASSWORD = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@]*:(?P<value>[^\s/@]+)@")
# A bearer token in an HTTP header or a curl command.
BEARER = re.compile(r"\bBearer\s+(?P<value>[A-Za-z0-9._~+/-]{20,}=*)")
# A password on a command line: sshpass -p …, mysql -p…, --password …, curl -u user:…
COMMAND_LINE = re.compile(
    r"(?:\bsshpass\s+-p\s*|\bmysql\b[^\n]*?\s-p|--password[= ]|\bcurl\b[^\n]*?\s-u\s*"
    r"[\"']?[^\s:]+:|\bdocker login\b[^\n]*?\s-p\s+)[\"']?(?P<value>[^\s\"']{6,})"
)
# HTTP Basic credentials, and a registry's in docker's config.json: base64 of user:password.
BASIC_AUTH = re.compile(r"(?i)(?:\bBasic\s+|\"auth\"\s*:\s*\")(?P<value>[A-Za-z0-9+/]{8,}={0,2})")
# A cookie of a signed-in session: Cookie: sid=…, Set-Cookie: session=…
COOKIE = re.compile(r"(?i)\b(?:set-)?cookie:\s*(?P<pairs>.+)")
COOKIE_PAIR = re.compile(r"[\w.-]+=(?P<value>[^;\s\"']{16,})")

# Codes to sign in with when a second factor is lost, listed after their name.
RECOVERY_NAME = re.compile(
    r"(?i)(?:recovery|backup|2fa|two-factor)[ -]?codes?|backup-codes|wiederherstellungscodes"
    r"|codes? de (?:secours|récupération|respaldo|recuperação)|恢复码|备用码|バックアップコード"
    r"|復旧コード|복구 코드|백업 코드|резервные коды|коды восстановления"
)
RECOVERY_CODE = re.compile(r"\b(?:[a-z0-9]{4,5}-[a-z0-9]{4,5}|\d{4} ?\d{4}|\d{8})\b")

# An unquoted token of a key's alphabet, long and as random as a key is.
# A sentence may end right after it: "My key is xCsZjr/6v/…QZT+nfw."
TOKEN = re.compile(r"(?<![\w/.+-])[A-Za-z0-9+/_-]{24,}={0,2}(?![\w/+=-]|\.\w)")
ENTROPY_BITS = 4.0
# Words in a name (HuggingFaceTB/SmolLM2-135M-Instruct): a key has few.
_WORD = re.compile(r"[A-Z]?[a-z]*[aeiou][a-z]*")
PUBLIC_BEGIN = re.compile(r"-----BEGIN (?:[A-Z ]*PUBLIC KEY[A-Z ]*|CERTIFICATE[A-Z ]*)-----")
PUBLIC_END = re.compile(r"-----END (?:[A-Z ]*PUBLIC KEY[A-Z ]*|CERTIFICATE[A-Z ]*)-----")
PUBLIC_BLOCK = re.compile(
    r"-----BEGIN (?:[A-Z ]*PUBLIC KEY[A-Z ]*|CERTIFICATE[A-Z ]*)-----.*?"
    r"-----END (?:[A-Z ]*PUBLIC KEY[A-Z ]*|CERTIFICATE[A-Z ]*)-----"
)
_HASH_PREFIX = re.compile(r"(?i)(?:sha\d+|md5)[-:]$|^(?:sha\d+|md5)[-:]")


@dataclass(frozen=True)
class Secret:
    """One secret found: its kind, in the words docs/security.md uses, and the text found."""

    kind: str
    value: str


@cache
def _plugins() -> tuple[BasePlugin, ...]:
    with default_settings():
        return tuple(
            plugin()
            for kind, plugin in sorted(get_mapping_from_secret_type_to_class().items())
            if kind not in _NOT_SECRETS
        )


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _random_token(value: str) -> bool:
    """A key's look: letters of both cases and digits, no run of one kind long enough to be
    a word or a number, few words, entropy near a random string's, and not the base64 of
    text (a key decodes to noise; a JSON cursor or an SVG to words)."""
    if not (re.search(r"[a-z]", value) and re.search(r"[A-Z]", value)):
        return False
    if not re.search(r"\d", value) or re.search(r"[a-z]{12,}|\d{12,}", value):
        return False
    if value.startswith("AAAA"):  # an SSH public key's base64
        return False
    in_words = sum(len(word) for word in _WORD.findall(value) if len(word) >= 4)
    if in_words >= len(value) / 2 or entropy(value) < ENTROPY_BITS:
        return False
    return not _base64_of_text(value)


def _decoded_text(value: str) -> str:
    """The text ``value`` is the base64 of, or "" when it decodes to bytes that are no text."""
    try:
        decoded = base64.b64decode(value[: len(value) // 4 * 4], validate=True)
    except (binascii.Error, ValueError):
        return ""
    printable = sum(32 <= byte < 127 or byte in (9, 10, 13) for byte in decoded)
    if not decoded or printable / len(decoded) <= 0.95:
        return ""
    return decoded.decode("ascii", errors="replace")


def _base64_of_text(value: str) -> bool:
    return bool(_decoded_text(value))


def _formats(line: str) -> Iterator[Secret]:
    """Secrets in the formats services publish (detect-secrets' plugins: call it inside
    ``default_settings()``) and the other formats Parley knows."""
    for plugin in _plugins():
        for found in plugin.analyze_line(filename="chat.txt", line=line):
            value = str(found.secret_value or "")
            if placeholder(value):
                continue
            # detect-secrets' keyword rule reads code; a translated word is no value
            if plugin.secret_type == "Secret Keyword" and not password_like(value):
                continue
            yield Secret(plugin.secret_type, value)
    for match in PARLEY_KEY.finditer(line):
        yield Secret("Parley API key", match[0])
    for kind, pattern in _PREFIXED:
        for match in pattern.finditer(line):
            if not placeholder(match[0]):
                yield Secret(kind, match[0])
    for pattern, kind in (
        (URL_PASSWORD, "Password in a URL"),
        (COMMAND_LINE, "Password on a command line"),
    ):
        for match in pattern.finditer(line):
            if not placeholder(match["value"]):
                yield Secret(kind, match["value"])
    for match in BEARER.finditer(line):
        value = match["value"]
        if not placeholder(value) and (_random_token(value) or re.search(r"[0-9a-f]{32}", value)):
            yield Secret("Bearer token", value)
    for match in BASIC_AUTH.finditer(line):
        if ":" in _decoded_text(match["value"]):  # user:password in base64
            yield Secret("Basic auth credentials", match["value"])
    for cookie in COOKIE.finditer(line):
        for pair in COOKIE_PAIR.finditer(cookie["pairs"]):
            if entropy(pair["value"]) >= 3.5:
                yield Secret("Session cookie", pair["value"])


def _in_line(line: str, *, public_block: bool) -> Iterator[Secret]:
    yield from _formats(line)
    for kind, value in secrets_said(line):
        yield Secret(kind, value)
    if public_block:  # a certificate's or public key's body is meant to be shared
        return
    for match in TOKEN.finditer(line):
        before = line[max(0, match.start() - 8) : match.start()]
        if _HASH_PREFIX.search(before) or _HASH_PREFIX.search(match[0]):
            continue
        if before.endswith("base64,"):  # a data: URI
            continue
        if _random_token(match[0]):
            yield Secret("High-entropy string", match[0])


def _recovery_codes(text: str) -> Iterator[Secret]:
    for name in RECOVERY_NAME.finditer(text):
        codes = RECOVERY_CODE.findall(text[name.end() : name.end() + 2_000])
        if len(codes) >= 4:
            yield Secret("Recovery codes", " ".join(codes[:4]))


def _unescaped(text: str) -> str:
    """JSON-escaped text as it reads (a tool's output in a JSON string: "host: db\\npassword:
    …"), so that each of its lines is read as a line."""
    return text.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"')


def secrets_in(text: str) -> list[Secret]:
    """Every secret found in ``text``, line by line, each once; JSON-escaped text is read
    unescaped too."""
    found: dict[tuple[str, str], Secret] = {}
    readings = [text, _unescaped(text)] if "\\" in text else [text]
    with default_settings():
        for reading in readings:
            for secret in _secrets_in_lines(reading):
                found.setdefault((secret.kind, secret.value), secret)
    return list(found.values())


def _secrets_in_lines(text: str) -> Iterator[Secret]:
    public_block = False
    for line in text.splitlines():
        if PUBLIC_BEGIN.search(line):
            public_block = True
        if PUBLIC_END.search(line):  # the end may be on the line it begins on
            public_block = False
            yield from _in_line(PUBLIC_BLOCK.sub(" ", line), public_block=False)
            continue
        if len(line) > 10_000:  # a pasted blob: its lines are read in pieces
            pieces = [line[i : i + 10_000] for i in range(0, len(line), 9_000)]
        else:
            pieces = [line]
        for piece in pieces:
            yield from _in_line(piece, public_block=public_block)
    yield from _recovery_codes(text)


@lru_cache(maxsize=4096)
def _kinds(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(secret.kind for secret in secrets_in(text)))


def secret_kinds(text: str) -> list[str]:
    """The kinds of secret in ``text``, each once, in the order found (remembered for the
    texts read last: a conversation's context is read again for each of its turns)."""
    return list(_kinds(text))

"""Secrets said in words: "my password is …", "das Passwort für den Server ist jetzt …",
"пароль поменял на …", "the door code is 3938A", "login admin / …", in the languages people
write. The value is what follows the name within a sentence and looks like a password (it
holds a digit or a sign, and is no word, placeholder, address or expression of code).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

PASSWORD_NAMES = (
    r"password|passwd|passphrase|pwd|pass code|passcode|passwort|kennwort|wlan-schlüssel|"
    r"contraseña|contrasena|clave|mot de passe|mdp|senha|wachtwoord|lösenord|hasło|haslo|"
    r"şifre|sifre|heslo|salasana|adgangskode|passord|jelszó|parolă|parola|пароль|"
    r"wi-?fi key|network key|口令|密码|密碼|パスワード|비밀번호|비번|암호|"
    r"كلمة المرور|كلمة السر|باسورد|पासवर्ड|mật khẩu|kata sandi|סיסמה"
)
KEY_NAMES = (
    r"secret|api[ _-]?key|access[ _-]?key|secret[ _-]?key|private[ _-]?key|auth[ _-]?token|"
    r"access[ _-]?token|token|schlüssel|ключ|токен|토큰"
)
PIN_NAMES = (
    r"pin|pin code|pin-code|unlock code|door code|alarm code|gate code|türcode|"
    r"código(?: pin| de (?:la )?(?:alarma|puerta|acceso))|code (?:de la porte|d'accès|pin)|"
    r"пин-код|пин|暗証番号|暗码"
)
SEPARATORS = (
    r"(?<![A-Za-z0-9_])(?:is|ist|es|est|era|é|è|são|sono|je|to|är|er)(?![A-Za-z0-9_])"
    r"|:=|=|:|：|는|은|は|是|为|為"
)
# The name, then its value right after a separator: "password: …", "API_KEY = …".
NAMED = re.compile(
    rf"(?i)(?<![a-z])(?:{PASSWORD_NAMES}|{KEY_NAMES})(?![a-z])[\"']?\s*(?:{SEPARATORS})\s*"
    r"[\"'`]?(?P<value>[^\s\"'`,;，。、；]{6,})"
)
PASSWORD_NAME = re.compile(rf"(?i)(?<![a-z])(?:{PASSWORD_NAMES})(?![a-z])")
PIN = re.compile(
    rf"(?i)(?<![a-z])(?:{PIN_NAMES})(?![a-z])[^\n.!?。！？\d]{{0,50}}?(?P<value>\d{{4,8}}[A-Z]?)\b"
)
# An app password as Google shows it, after a password's name: "Password: cprf uene nrut zkkh".
APP_PASSWORD = re.compile(
    rf"(?i)(?<![a-z])(?:{PASSWORD_NAMES})(?![a-z])\s*[:=：]\s*"
    r"(?P<value>[a-z]{4}(?: [a-z]{4}){3})\b"
)
# A private key said in words, then its hex or base58 value: "приватний ключ 0x93de…".
PRIVATE_KEY = re.compile(
    r"(?i)(?:private key|приватн\w* ключ|закрыт\w* ключ|clé privée|chiave privata|clave privada|"
    r"privater schlüssel|chave privada|秘密鍵|私钥|私鑰|개인 ?키)[^\n]{0,60}?"
    r"(?P<value>\b(?:0x)?[a-fA-F0-9]{64}\b|\b[1-9A-HJ-NP-Za-km-z]{50,}\b)"
)
# An environment variable or setting that holds one: PGPASSWORD=…, MYSQL_ROOT_PASSWORD: …
ENVIRONMENT = re.compile(
    r"\b[A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY)[A-Z0-9_]*"
    r"[\"']?\s*[=:]\s*[\"'`]?(?P<value>[^\s\"'`,;]{6,})"
)
# A login and its password written as a pair: "the login is admin / BKq65RUev@F4b".
USER_PASS = re.compile(
    r"(?i)(?<![a-z])(?:login|user(?:name)?|benutzer|usuario|utilisateur|логин)(?![a-z])\s*"
    r"(?:is|:|=)?\s*[^\s/]+\s*/\s*(?P<value>[^\s\"'`,;，。、；]{6,})"
)
# Within this many characters after a password's name, in the same sentence, its value.
WINDOW = 90
_SENTENCE_END = re.compile(r"[.!?。！？](?:\s|$)|\n")
_WORD = re.compile(r"[^\s\"'`,;，。、；()\[\]]+")

PLACEHOLDER = re.compile(
    r"(?i)^(?:<.*>|\{.*\}|\[.*\]|%\w+%|\.{3,}.*|my.*|changeme|placeholder|redacted|secret"
    r"|pass|passw(?:or)?d\d*|none|null|true|false|undefined)$"
    r"|your|here|example|x{4}|\*{4}|•{3}"
)
CODE = re.compile(
    r"[()\[\]{}]|^(?:os\.|env\.|process\.|self\.|config\.|settings\.)"
    r"|^[A-Za-z_]+(?:\.[A-Za-z_]+)+$"  # an attribute of code: form.password.value
    r"|^\.?[\w-]+\.(?:json|ya?ml|env|txt|toml|ini|cfg|conf|py|js|ts|md|gitignore)$"  # a file
    r"|^[A-Za-z][\w.-]*:\d+$"  # a host and port, an image and tag: postgres:16
    r"|^x:\d+:"  # a line of /etc/passwd
    r"|^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$|^_?[a-z]+\d{0,2}(?:_[a-z]+\d{0,2})+$"  # names_of_code
    r"|^\$\{?[A-Z_][A-Z0-9_]*\}?$"  # an environment variable: $DB_PASSWORD
    r"|^\w+=[\w.]+$"  # a keyword argument: rounds=12
)
ADDRESS = re.compile(r"://|^www\.|^[/?&~=@:]|^[\w.+-]+@[\w-]+\.[\w.]+$")
# Keys and passwords are written in printable ASCII.
ASCII = re.compile(r"[\x21-\x7e]+")


def placeholder(value: str) -> bool:
    """A placeholder ("<your-key>", "xxxx", "sk-…-here") or one sign repeated
    ("sk_test_xxxxxxxx")."""
    tail = re.sub(r"^[a-z]+_(?:live|test)_", "", value)
    return bool(PLACEHOLDER.search(value) or len(set(tail.lower())) <= 3)


def not_a_secret(value: str) -> bool:
    """A placeholder or an expression of code (a name, an attribute, a file, an argument)."""
    return placeholder(value) or bool(CODE.search(value))


def password_like(value: str) -> bool:
    """A value as people choose passwords: ASCII, 6 or more signs, letters with a digit or a
    sign, or a long number; no address, path, placeholder or code."""
    if len(value) < 6 or not ASCII.fullmatch(value) or ADDRESS.search(value):
        return False
    if not_a_secret(value):
        return False
    letters = re.search(r"[A-Za-z]", value)
    # a digit or a sign words are not joined with ("password-protected", "o'clock" are words)
    others = re.search(r"[\d!@#$%^&*+=?~_|\\]", value)
    return bool((letters and others) or re.fullmatch(r"\d{8,}", value))


def _trimmed(value: str) -> str:
    return value.rstrip(".!?:)。，、")


def secrets_said(line: str) -> Iterator[tuple[str, str]]:
    """(kind, value) of each secret said in words in ``line``."""
    for match in [*NAMED.finditer(line), *ENVIRONMENT.finditer(line), *USER_PASS.finditer(line)]:
        value = _trimmed(match["value"])
        # an identifier of code ("api_key", "per_token") is a name, not a value
        if password_like(value) and re.search(r"\d|[^\w]", value):
            yield "Password or key named in words", value
    for match in PASSWORD_NAME.finditer(line):
        after = line[match.end() : match.end() + WINDOW]
        if re.match(r"[A-Za-z0-9_@=$.-]", after):  # part of a longer word: PASSWORD_MIN_LEN
            continue
        end = _SENTENCE_END.search(after)
        for word in _WORD.findall(after[: end.start()] if end else after):
            value = _trimmed(word)
            if password_like(value):
                yield "Password or key named in words", value
                break
    for match in PIN.finditer(line):
        yield "PIN or door code", match["value"]
    for match in APP_PASSWORD.finditer(line):
        yield "App password", match["value"]
    for match in PRIVATE_KEY.finditer(line):
        yield "Private key in words", match["value"]

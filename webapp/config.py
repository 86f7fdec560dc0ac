"""Reading configuration from the environment; no Django imports, so the launcher can use it.

>>> database_from_url("postgres://u:p@db.example:5433/app")["HOST"]
'db.example'
>>> database_from_url("postgres://postgres@%2Ftmp%2Fpg/parley")["HOST"]
'/tmp/pg'
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

INFRA_FILE = Path("run") / "infra.json"


class ConfigError(RuntimeError):
    """A setting is missing or wrong; the message says which and what to do."""


class EmbeddedInfraMissing(ConfigError):
    """No DATABASE_URL/REDIS_URL and the launcher has not started the embedded services."""


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value else default
    except ValueError as exc:
        raise ConfigError(f"{name}={value!r} is not a whole number") from exc


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "")
    try:
        return float(value) if value else default
    except ValueError as exc:
        raise ConfigError(f"{name}={value!r} is not a number") from exc


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name) or default
    if value not in choices:
        raise ConfigError(f"{name}={value!r}: use one of {', '.join(choices)}")
    return value


def gpu_host() -> bool:
    """Whether this host has an NVIDIA GPU (its device file; no driver call, no torch)."""
    return Path("/dev/nvidia0").exists()


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name, "")
    return [item.strip() for item in value.split(",") if item.strip()] if value else default


def context_window(model_dir: Path, limit: int) -> int:
    """The context served: ``limit`` (VLLM_MAX_MODEL_LEN), or the model's own window where that
    is smaller (vLLM refuses to start above it). A model folder not prepared yet, or one whose
    config names no window, leaves ``limit``.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "config.json").write_text('{"max_position_embeddings": 8192}')
    >>> context_window(folder, 32768), context_window(folder, 4096)
    (8192, 4096)
    >>> context_window(folder / "missing", 8192)
    8192
    """
    try:
        config = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return limit
    own = config.get("max_position_embeddings") if isinstance(config, dict) else None
    return min(limit, own) if isinstance(own, int) and own > 0 else limit


def env_networks(name: str) -> list[str]:
    """A comma-separated list of addresses or networks ("10.0.0.5, 172.16.0.0/12")."""
    import ipaddress

    entries = env_list(name, [])
    for entry in entries:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError as exc:
            raise ConfigError(f"{name}: {entry!r} is not an address or network") from exc
    return entries


def private_dir(path: Path) -> Path:
    """``path`` as a folder of this user's (created 0700), or ConfigError if another user owns
    it: a folder someone else made could let them read or swap the secrets written into it."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    owner = path.stat().st_uid
    if owner != os.getuid():
        raise ConfigError(
            f"{path} is owned by uid {owner}, not by you (uid {os.getuid()}); Parley keeps "
            "secrets there, so it will not use it: remove it, or set PARLEY_VAR_DIR elsewhere"
        )
    return path


def write_private(path: Path, text: str, *, replace: bool = True) -> bool:
    """Write ``text`` to ``path`` readable by its owner only, from the first byte (the file is
    created 0600, never chmod-ed later) and whole (a temporary renamed into place). With
    ``replace=False`` an existing file is kept; returns whether this call wrote the file."""
    private_dir(path.parent)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        if replace:
            os.replace(temporary, path)
            return True
        try:
            os.link(temporary, path)  # fails if it exists: two starters keep the first file
            return True
        except FileExistsError:
            return False
    finally:
        temporary.unlink(missing_ok=True)


def _kept_secret(path: Path) -> str:
    """A random secret generated once and kept in ``path`` (0600)."""
    if not path.exists():
        write_private(path, secrets.token_urlsafe(50), replace=False)
    return path.read_text().strip()


def secret_key(*, debug: bool, embedded: bool, var_dir: Path) -> str:
    """The env's key; in embedded or debug mode a key generated once and kept in var/."""
    key = os.environ.get("DJANGO_SECRET_KEY", "")
    if key:
        return key
    if not (debug or embedded):
        raise ConfigError(
            "DJANGO_SECRET_KEY is required when DATABASE_URL/REDIS_URL are set; "
            "generate one with: python -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
    return _kept_secret(var_dir / "secret_key")


def vllm_api_key(*, var_dir: Path) -> str:
    """The key vLLM is started with and every call to it carries: VLLM_API_KEY when set (docker
    sets it from the env file), else one generated once and kept in var/vllm_api_key (0600)."""
    return os.environ.get("VLLM_API_KEY", "") or _kept_secret(var_dir / "vllm_api_key")


def judge_api_key(*, judge_base_url: str, judge_key: str, vllm_key: str) -> str:
    """JUDGE_API_KEY, else the serving key when the judge is the serving vLLM (no base URL)."""
    return judge_key or ("" if judge_base_url else vllm_key)


def infra_urls(*, var_dir: Path) -> tuple[str, str]:
    """(database URL, redis URL): from the environment, else from the running launcher."""
    database_url = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    if database_url and redis_url:
        return database_url, redis_url
    infra = var_dir / INFRA_FILE
    if infra.exists():
        started = json.loads(infra.read_text())
        return database_url or started["database_url"], redis_url or started["redis_url"]
    raise EmbeddedInfraMissing(
        f"no DATABASE_URL/REDIS_URL set and no embedded services running ({infra} is missing); "
        "start Parley with `make run`, or set DATABASE_URL and REDIS_URL"
    )


def database_from_url(url: str) -> dict[str, Any]:
    """Django DATABASES entry for a postgres:// URL (a %2F-encoded host is a socket folder)."""
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql", "pgsql"}:
        raise ConfigError(f"DATABASE_URL must be a postgres:// URL, got scheme {parts.scheme!r}")
    host = unquote(parts.hostname or "") if "%2f" not in parts.netloc.lower() else None
    if host is None:
        host = unquote(parts.netloc.rsplit("@", 1)[-1].rsplit(":", 1)[0])
    options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(parts.port or ""),
        "CONN_MAX_AGE": 0,
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": {"connect_timeout": 5, **options},
    }


def redacted(url: str) -> str:
    """The URL with any password replaced by ***, for messages and logs."""
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@", 1)
    return url

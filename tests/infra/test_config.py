from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from webapp.config import ConfigError, context_window, database_from_url, redacted, secret_key


def test_database_url_with_host_port_and_password() -> None:
    db = database_from_url("postgres://parley:s3cret@db.internal:6543/app?sslmode=require")
    assert (db["HOST"], db["PORT"], db["USER"], db["PASSWORD"], db["NAME"]) == (
        "db.internal",
        "6543",
        "parley",
        "s3cret",
        "app",
    )
    assert db["OPTIONS"]["sslmode"] == "require"


def test_database_url_with_percent_encoded_socket_folder() -> None:
    db = database_from_url("postgres://postgres@%2Fwork%2Fvar%2Fpostgres/parley")
    assert db["HOST"] == "/work/var/postgres"
    assert db["NAME"] == "parley"


def test_the_context_window_is_the_setting_capped_at_the_models_own(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"max_position_embeddings": 8192}')
    assert context_window(tmp_path, 32768) == 8192  # vLLM would refuse to start above it
    assert context_window(tmp_path, 4096) == 4096
    assert context_window(tmp_path / "not-prepared", 8192) == 8192
    (tmp_path / "config.json").write_text("not json")
    assert context_window(tmp_path, 8192) == 8192


def test_the_default_model_is_served_with_its_whole_context(prepared_model: Path) -> None:
    """SmolLM2-135M reads 8,192 tokens; OpenClaw refuses a window under 4,000."""
    assert context_window(prepared_model, 8192) == 8192


def test_database_url_must_be_postgres() -> None:
    with pytest.raises(ConfigError, match="postgres://"):
        database_from_url("sqlite:///db.sqlite3")


def test_redacted_hides_the_password() -> None:
    assert redacted("postgres://u:hunter2@h/db") == "postgres://u:***@h/db"
    assert "hunter2" not in redacted("redis://:hunter2@h:6379/0")


def test_secret_key_is_required_outside_embedded_mode(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DJANGO_SECRET_KEY", raising=False)
    with pytest.raises(ConfigError, match="DJANGO_SECRET_KEY"):
        secret_key(debug=False, embedded=False, var_dir=tmp_path)


def test_embedded_secret_key_is_generated_once_and_kept(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DJANGO_SECRET_KEY", raising=False)
    first = secret_key(debug=False, embedded=True, var_dir=tmp_path)
    assert len(first) >= 50
    assert secret_key(debug=False, embedded=True, var_dir=tmp_path) == first
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0


def _import_settings(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import webapp.settings as s; print(s.LEARNING_SCOPE)"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_learning_scope_defaults_to_user_and_refuses_an_unknown_value() -> None:
    assert _import_settings().stdout.strip() == "user"
    assert _import_settings(PARLEY_LEARNING_SCOPE="shared").stdout.strip() == "shared"
    refused = _import_settings(PARLEY_LEARNING_SCOPE="team")
    assert refused.returncode != 0
    assert "PARLEY_LEARNING_SCOPE='team': use one of user, shared" in refused.stderr

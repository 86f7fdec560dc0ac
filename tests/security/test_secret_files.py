"""Secret files are private from the first byte, and a runtime folder of another user is refused.

The writers run with umask 0 and with every chmod forbidden: the only way a file can end up
0600 is to be created 0600, so there is no moment at which another user could open it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from webapp.config import ConfigError, private_dir, secret_key, vllm_api_key
from webapp.infra.embedded import write_infra_file
from webapp.infra.launcher import main as launcher_main


@pytest.fixture
def no_chmod(monkeypatch) -> Iterator[None]:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a secret file must be created private, not chmod-ed afterwards")

    monkeypatch.setattr(os, "chmod", refuse)
    monkeypatch.setattr(os, "fchmod", refuse)
    monkeypatch.setattr(Path, "chmod", refuse)
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_secret_key_is_created_0600(monkeypatch, tmp_path: Path, no_chmod) -> None:
    monkeypatch.delenv("DJANGO_SECRET_KEY", raising=False)
    key = secret_key(debug=False, embedded=True, var_dir=tmp_path / "var")
    assert _mode(tmp_path / "var" / "secret_key") == 0o600
    assert secret_key(debug=False, embedded=True, var_dir=tmp_path / "var") == key


def test_the_vllm_api_key_is_created_0600(tmp_path: Path, no_chmod) -> None:
    key = vllm_api_key(var_dir=tmp_path)
    assert len(key) >= 32 and _mode(tmp_path / "vllm_api_key") == 0o600
    assert vllm_api_key(var_dir=tmp_path) == key


def test_infra_json_is_created_0600_and_replaced_whole(tmp_path: Path, no_chmod) -> None:
    path = write_infra_file(tmp_path, database_url="postgres://a/b", redis_url="unix:///r")
    assert _mode(path) == 0o600
    write_infra_file(tmp_path, database_url="postgres://c/d", redis_url="unix:///r")
    assert _mode(path) == 0o600 and "postgres://c/d" in path.read_text()
    assert [p.name for p in path.parent.iterdir()] == ["infra.json"]  # no temporary left


@pytest.mark.django_db
def test_admin_txt_is_created_0600(settings, tmp_path: Path, monkeypatch, no_chmod) -> None:
    from django.core.management import call_command

    monkeypatch.delenv("DJANGO_SUPERUSER_PASSWORD", raising=False)
    settings.VAR_DIR = tmp_path
    call_command("ensure_admin")
    note = tmp_path / "admin.txt"
    assert _mode(note) == 0o600 and "password: " in note.read_text()


needs_root = pytest.mark.skipif(os.getuid() != 0, reason="giving a folder away needs root")


@needs_root
def test_a_runtime_folder_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "var"
    foreign.mkdir()
    os.chown(foreign, 12345, 12345)
    with pytest.raises(ConfigError, match="owned by uid 12345"):
        private_dir(foreign)
    mine = private_dir(tmp_path / "mine")
    assert mine.is_dir() and _mode(mine) == 0o700


@needs_root
def test_the_launcher_refuses_a_var_folder_of_another_user(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    foreign = tmp_path / "var"
    (foreign / "run").mkdir(parents=True)
    os.chown(foreign / "run", 12345, 12345)
    monkeypatch.setenv("PARLEY_VAR_DIR", str(foreign))
    assert launcher_main(["exec", "--", "true"]) == 2
    assert "owned by uid 12345" in capsys.readouterr().err

"""Run settings from sbtck.toml, or [tool.sbtck] of pyproject.toml, found walking up from the current folder.

As pytest finds its rootdir, the search goes up from the current folder: in
each folder, sbtck.toml wins over pyproject.toml's [tool.sbtck]; a
pyproject.toml without it is the project's root, where the search ends. The
command line overrides the file. Keys: iut, profile, expectations, tags, out.

A file found so is used only if it is the user's (or root's) and no one else
may write it, as git refuses a repository another user owns: its ``iut``
starts a program and its ``out`` names where to write. Another one is named
with ``--settings FILE`` or its folder listed in ``SBTCK_TRUSTED_SETTINGS``.
"""

from __future__ import annotations

import configparser
import difflib
import os
import tomllib
from pathlib import Path
from typing import Any

from sbtck.errors import ConfigError
from sbtck.fixtures.yamlfile import MAX_BYTES

KEYS = ("iut", "profile", "expectations", "tags", "out")
# the environment variable by which sbtck run tells the plugin which settings file it used (the report names it)
SETTINGS_FILE = "SBTCK_SETTINGS_FILE"
# the environment variable from which the protocol's client reads how long a request waits (sbtck run --timeout)
REQUEST_TIMEOUT = "SBTCK_REQUEST_TIMEOUT"
# folders, separated as PATH is, whose settings files are used whoever owns them
TRUSTED = "SBTCK_TRUSTED_SETTINGS"


def load(folder: Path, named: Path | None = None) -> tuple[dict[str, str], Path | None]:
    """The settings and the file they came from (None when there is none): the file NAMED (--settings), or the
    one in FOLDER or the nearest above it, if it is trusted."""
    if named is not None:
        named = named.resolve()
        if not named.is_file():
            raise ConfigError(f"--settings {named}: no such file")
        data = _read(named)
        source: Path | None = named
        if named.name == "pyproject.toml":
            tool = data.get("tool")
            data = tool.get("sbtck", {}) if isinstance(tool, dict) else {}
    else:
        source, data = _find(folder.resolve())
        if source is None:
            return {}, None
        _check_trusted(source)
    assert source is not None
    if not isinstance(data, dict):
        raise ConfigError(f'{source}: the sbtck settings are a table (key = "value" lines), got {data!r}'[:300])
    settings: dict[str, str] = {}
    for key, value in data.items():
        if key not in KEYS:
            hint = difflib.get_close_matches(key, KEYS, n=1)
            raise ConfigError(
                f"{source}: unknown setting {key!r}"
                + (f"; did you mean {hint[0]!r}?" if hint else f"; known: {', '.join(KEYS)}")
            )
        if not isinstance(value, str):
            raise ConfigError(f"{source}: {key} is a string, got {value!r}")
        # paths in the file are relative to the file
        settings[key] = str((source.parent / value).resolve()) if key in ("profile", "expectations", "out") else value
    return settings, source


def _check_trusted(
    source: Path, what: str = "its settings (which name a program to start)", named: bool = True
) -> None:
    """A settings file found walking up is the user's own, or one they allowed; otherwise the run stops."""
    allowed = [Path(f).resolve() for f in os.environ.get(TRUSTED, "").split(os.pathsep) if f]
    if source.parent in allowed:
        return
    info = source.stat()
    me = os.geteuid()
    if info.st_uid not in (me, 0):
        why = f"is owned by user {info.st_uid}, not by you ({me}) or root"
    elif info.st_mode & 0o002 or (info.st_mode & 0o020 and info.st_gid != os.getegid()):
        why = "may be written by other users"
    else:
        return
    # --settings names the kit's own settings file only: a pytest configuration is allowed by its folder alone
    by_option = f"run with --settings {source}, or " if named else ""
    raise ConfigError(
        f"{source} {why}, so {what} are not used; if you trust it, {by_option}list its folder in {TRUSTED}"
    )


def _find(start: Path) -> tuple[Path | None, Any]:
    for folder in (start, *start.parents):
        own, project = folder / "sbtck.toml", folder / "pyproject.toml"
        if own.is_file():
            return own, _read(own)
        if project.is_file():
            tool = _read(project).get("tool")
            if isinstance(tool, dict) and "sbtck" in tool:
                return project, tool["sbtck"]
            return None, None  # the project's root, which has no settings of the kit's
    return None, None


def pytest_settings(folder: Path) -> Path | None:
    """The pytest configuration file pytest itself would take for FOLDER: in each folder up from it, the first of
    pytest.ini, .pytest.ini, pyproject.toml with [tool.pytest.ini_options] or [tool.pytest], tox.ini with [pytest],
    setup.cfg with [tool:pytest]; trusted as a settings file is (its addopts may run or write anything)."""
    found = _pytest_settings(folder)
    if found is not None:
        _check_trusted(found, "its pytest options (addopts, which may write or run anything)", named=False)
    return found


def _pytest_settings(folder: Path) -> Path | None:
    for here in (folder.resolve(), *folder.resolve().parents):
        for name in ("pytest.ini", ".pytest.ini"):
            if (here / name).is_file():
                return here / name
        project = here / "pyproject.toml"
        if project.is_file():
            tool = _read(project).get("tool")
            if isinstance(tool, dict) and isinstance(tool.get("pytest"), dict):
                return project
        for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
            if (here / name).is_file() and section in _sections(here / name):
                return here / name
    return None


def _sections(path: Path) -> list[str]:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(path.read_text(encoding="utf-8", errors="replace")[:MAX_BYTES])
    except configparser.Error:
        return []
    return parser.sections()


def _read(path: Path) -> dict[str, Any]:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:  # settings are a few lines; pyproject.toml a few pages
            raise ConfigError(f"{path}: {size} bytes; a settings file is at most {MAX_BYTES} bytes")
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a settings file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at {exc.start}); save it as UTF-8"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None

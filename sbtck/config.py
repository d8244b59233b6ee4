"""Run settings from sbtck.toml, or [tool.sbtck] of pyproject.toml, in the current folder.

The command line overrides the file. Keys: iut, profile, expectations, tags, out.
"""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path
from typing import Any

from sbtck.errors import ConfigError
from sbtck.fixtures.yamlfile import MAX_BYTES

KEYS = ("iut", "profile", "expectations", "tags", "out")


def load(folder: Path) -> tuple[dict[str, str], Path | None]:
    """The settings and the file they came from (None when there is none)."""
    own, project = folder / "sbtck.toml", folder / "pyproject.toml"
    data: dict[str, Any]
    if own.is_file():
        source = own
        data = _read(own)
    elif project.is_file() and isinstance(_read(project).get("tool"), dict) and "sbtck" in _read(project)["tool"]:
        source = project
        data = _read(project)["tool"]["sbtck"]
    else:
        return {}, None
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

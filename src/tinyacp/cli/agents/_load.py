"""Loading ``config.toml``: the file ``--config`` names, else the default one when it exists (see
:mod:`tinyacp.cli.shared._dirs`), read as a regular file of at most 4 MiB of UTF-8 TOML, and handed whole to
:func:`~tinyacp.cli.agents._resolve.config_of`, which makes its tables agents over the built-in ones.

The file is read here and understood there: a command's arguments go down through the file once, then on to the
agents it names (:func:`~tinyacp.cli.agents._resolve.resolve_agent`), without coming back.
"""

from __future__ import annotations

from pathlib import Path

from ..._files import read_regular
from ..shared._dirs import default_config_path
from ._resolve import BUILTIN_AGENTS, Config, ConfigError, config_of

__all__ = ["load_config"]


def load_config(path: Path | None = None) -> Config:
    """Read the config file (``path``, else the default one if it exists) over the built-in agents.

    Raises:
        ConfigError: the file cannot be read or is not a regular file, is not TOML (or is nested too deep), has
            a key it does not know (the message names it, where it is, and the closest known key) or a value
            of the wrong type.
    """
    explicit = path is not None
    path = path if path is not None else default_config_path()
    try:
        data = read_regular(path, _MAX_CONFIG_BYTES)
        if len(data) > _MAX_CONFIG_BYTES:
            raise ConfigError(f"config file {path}: larger than {_MAX_CONFIG_BYTES // 1024 // 1024} MiB")
        text = data.decode("utf-8")
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"config file {path}: not found") from None
        return Config(dict(BUILTIN_AGENTS))
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path}: not UTF-8 text: {exc}") from exc
    import tomllib  # here: most runs have no config file, and the parser costs the command's start 7 ms

    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"config file {path}: not a config file: nested too deep") from None
    return config_of(path, document)


_MAX_CONFIG_BYTES = 4 * 1024 * 1024
"""A config file names a few agents; a larger one is not read whole into memory."""

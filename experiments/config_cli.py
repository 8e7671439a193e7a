"""The `--config` flag of the entry points, with one-line errors for a user's mistakes.

`--config=<file>[:<arg>]` loads a config file (ml_collections config_flags) and
`--config.<key>=<value>` overrides one knob. An unknown key, a missing file, an unknown arm or
phase and a bad flag value end the program with one line naming what is wrong and the valid
choices; an error raised by a config file's own code (a bug) keeps its traceback.

    _CONFIG = config_cli.define_config_flag(help_text)
    app.run(main, flags_parser=config_cli.flags_parser(default="configs/default.py"))
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from absl import flags
from ml_collections import ConfigDict, config_flags

from calclip_jax.config import ConfigError

FLAG = "config"


def define_config_flag(
    help_text: str, *, lock_config: bool = True, flag_values: flags.FlagValues = flags.FLAGS
) -> flags.FlagHolder:
    """The `--config` flag, without a default: a default would be parsed with the command line's
    overrides while the module is imported, beyond the reach of `flags_parser`."""
    return config_flags.DEFINE_config_file(
        FLAG, None, help_text, lock_config=lock_config, flag_values=flag_values
    )


def _chain(err: BaseException) -> Iterator[BaseException]:
    """`err` and the exceptions it was raised from or while handling."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def _config_arg(argv: list[str]) -> str | None:
    """The value of `--config=<v>` or `--config <v>` in argv (the last one), if any."""
    value = None
    for i, arg in enumerate(argv):
        name, eq, rest = arg.lstrip("-").partition("=")
        if arg.startswith("-") and name == FLAG:
            value = rest if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return value


def _override_keys(argv: list[str]) -> list[str]:
    """The dotted keys of `--config.<key>=<value>` (and `--[no]config.<key>`) in argv."""
    keys = []
    for arg in argv:
        name = arg.lstrip("-").split("=", 1)[0]
        name = name.removeprefix("no") if name.startswith(f"no{FLAG}.") else name
        if name.startswith(f"{FLAG}."):
            keys.append(name.removeprefix(f"{FLAG}."))
    return keys


def unknown_key(config: Any, dotted: str) -> str | None:
    """Why `dotted` names no knob of `config` (with the valid keys there), or None if it does."""
    node, path = config, FLAG
    for name in dotted.split("."):
        if not isinstance(node, ConfigDict | dict):
            return f"--{path}.{name}: {path} is a value ({node!r}), it has no keys"
        if name not in node:
            return f"--{path}.{name}: unknown key {name!r}; valid keys of {path}: {sorted(node)}"
        node, path = node[name], f"{path}.{name}"
    return None


def missing_file(arg: str | None) -> str | None:
    """Why `--config=<arg>` names no file (with the config files there are), or None."""
    path = None if arg is None else arg.split(":", 1)[0]
    if path is None or Path(path).is_file():
        return None
    return f"--{FLAG}={arg}: no such file {path!r}; config files: {', '.join(config_files())}"


def _user_error(err: BaseException, argv: list[str]) -> str | None:
    """One line describing a user's mistake behind `err`, or None when it is not one (a bug)."""
    # config_flags re-raises a config file's error as the same type with a traceback for text:
    # the original is the innermost one
    config_errors = [e for e in _chain(err) if isinstance(e, ConfigError)]
    if config_errors:
        return f"--{FLAG}: {config_errors[-1]}"
    arg = _config_arg(argv)
    if any(isinstance(e, KeyError | AttributeError) for e in _chain(err)) and arg is not None:
        try:
            config = load_config(arg)
        except Exception:  # the config file's own bug: the caller re-raises `err`
            return None
        for key in _override_keys(argv):
            problem = unknown_key(config, key)
            if problem is not None:
                return problem
    if isinstance(err, flags.Error) and "Error whilst parsing config file" not in str(err):
        return str(err).splitlines()[0]  # a bad flag value, e.g. --config.train.steps=abc
    return None


def load_config(arg: str) -> Any:
    """`get_config([<arg>])` of the file in `<file>[:<arg>]`, as config_flags calls it."""
    path, sep, config_arg = arg.partition(":")
    spec = importlib.util.spec_from_file_location("config_file", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config(config_arg) if sep else module.get_config()


def config_files() -> list[str]:
    """configs/*.py as a user passes them (relative to the repository root)."""
    root = Path(__file__).resolve().parent.parent
    return sorted(
        f"configs/{p.name}"
        for p in (root / "configs").glob("*.py")
        if p.name not in ("__init__.py", "arms.py")
    )


HELP_FLAGS = ("help", "helpshort", "helpfull", "h", "?")


def flags_parser(
    default: str | None = None,
    help_text: Callable[[], str] | None = None,
    flag_values: flags.FlagValues = flags.FLAGS,
) -> Callable[[list[str]], list[str]]:
    """An absl `flags_parser` for `app.run`: parses argv with `--config=<default>` put first when
    argv has no `--config`, and turns a user's mistake into one line on stderr (exit status 1).
    With a help flag, `help_text()` is appended to the main module's docstring (what absl's
    usage prints first)."""

    def parse(argv: list[str]) -> list[str]:
        if help_text is not None and any(a.lstrip("-") in HELP_FLAGS for a in argv[1:]):
            main = sys.modules["__main__"]
            main.__doc__ = (main.__doc__ or "") + help_text()
        if default is not None and _config_arg(argv[1:]) is None:
            argv = [argv[0], f"--{FLAG}={default}", *argv[1:]]
            sys.argv[:] = argv  # config_flags reads the overrides from sys.argv
        message = missing_file(_config_arg(argv[1:]))
        if message is None:
            try:
                return flag_values(argv)
            except Exception as err:
                message = _user_error(err, argv)
                if message is None:
                    raise
        sys.exit(f"error: {message}")

    return parse

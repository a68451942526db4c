"""Command-line options derived from the settings dataclasses, so that every default lives once.

A field becomes ``--field-name``; its ``metadata`` may give ``help``, ``flag`` (another option
name), ``parse`` (a function from the text), ``choices``, and bounds: ``min``/``max`` (the
smallest/largest value accepted), ``above``/``below`` (values it must lie strictly between).
``bounded`` makes the same checked parsers for options that belong to no dataclass. Fields without a default are left to the caller (positional arguments).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

T = TypeVar("T")


def _base_type(hint: Any) -> Any:
    """``Optional[int]`` -> ``int``; other hints unchanged."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1 else hint


def _user_errors(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    # argparse shows a ValueError only as "invalid value"; the parser's own message says why
    def wrapped(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return wrapped


BOUNDS = ("min", "max", "above", "below")


def _bounded(parse: Callable[[str], Any], bounds: dict) -> Callable[[str], Any]:
    # argparse names the option in front of the message
    def check(text: str) -> Any:
        value = parse(text)
        if "min" in bounds and value < bounds["min"]:
            raise argparse.ArgumentTypeError(f"must be at least {bounds['min']}, not {text}")
        if "above" in bounds and not value > bounds["above"]:
            raise argparse.ArgumentTypeError(f"must be above {bounds['above']}, not {text}")
        if "max" in bounds and value > bounds["max"]:
            raise argparse.ArgumentTypeError(f"must be at most {bounds['max']}, not {text}")
        if "below" in bounds and not value < bounds["below"]:
            raise argparse.ArgumentTypeError(f"must be below {bounds['below']}, not {text}")
        return value
    return check


# Integer options end up in C integers (TVM's FFI, torch, numpy seeds): a larger one failed deep
# inside TVM ("Expected `int` but got `ffi.BigInt`") instead of here.
INT_MAX = 2**31 - 1


def _number(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a{'n integer' if kind is int else ' number'}: {text!r}") from None
        if kind is float and value != value:  # NaN compares false with every bound
            raise argparse.ArgumentTypeError(f"not a number: {text!r}")
        if kind is int and abs(value) > INT_MAX:
            raise argparse.ArgumentTypeError(f"must be at most {INT_MAX} in size, not {text}")
        return value
    return parse


def bounded(kind: type, **bounds: Any) -> Callable[[str], Any]:
    """An int or float option's parser that refuses NaN and values outside ``bounds`` (BOUNDS)."""
    return _bounded(_number(kind), bounds)


def flag_of(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def add_options(parser: argparse.ArgumentParser, cls: type, skip: Iterable[str] = ()) -> None:
    """Add one option per field of the dataclass ``cls`` that has a default (and is not in ``skip``)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip or f.name.startswith("_") or not f.init:
            continue
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        flag, kind = flag_of(f), _base_type(hints[f.name])
        help_text = f.metadata.get("help", "")
        if kind is bool:
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=default,
                                help=help_text)
            continue
        parse = f.metadata.get("parse") or ({int: _number(int), float: _number(float)}.get(kind) or
                                            (Path if kind is Path else str))
        parse = _user_errors(parse)
        bounds = {k: f.metadata[k] for k in BOUNDS if k in f.metadata}
        if bounds:
            parse = _bounded(parse, bounds)
        shown = "" if default is None else f" (default: {default})"
        parser.add_argument(flag, dest=f.name, type=parse, default=default, choices=f.metadata.get("choices"),
                            help=help_text + shown)


def settings_from(cls: type[T], args: argparse.Namespace, **given: Any) -> T:
    """An instance of ``cls`` from parsed options (those ``add_options`` made) and ``given`` values."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
              if f.init and f.name not in given and hasattr(args, f.name)}
    return cls(**values, **given)



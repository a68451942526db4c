"""Command-line options derived from the settings dataclasses, so that every default lives once.

A field becomes ``--field-name``; its ``metadata`` may give ``help``, ``flag`` (another option
name), ``parse`` (a function from the text), ``choices``, and bounds: ``min``/``max`` (the
smallest/largest value accepted) or ``above`` (a value it must exceed). Fields without a default are left to the caller (positional arguments).
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


def _bounded(parse: Callable[[str], Any], meta: dict, flag: str) -> Callable[[str], Any]:
    def check(text: str) -> Any:
        value = parse(text)
        if "min" in meta and value < meta["min"]:
            raise argparse.ArgumentTypeError(f"{flag} must be at least {meta['min']}, not {text}")
        if "above" in meta and not value > meta["above"]:
            raise argparse.ArgumentTypeError(f"{flag} must be above {meta['above']}, not {text}")
        if "max" in meta and value > meta["max"]:
            raise argparse.ArgumentTypeError(f"{flag} must be at most {meta['max']}, not {text}")
        return value
    return check


def _number(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a{'n integer' if kind is int else ' number'}: {text!r}") from None
        if kind is float and value != value:  # NaN compares false with every bound
            raise argparse.ArgumentTypeError(f"not a number: {text!r}")
        return value
    return parse


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
        if {"min", "max", "above"} & set(f.metadata):
            parse = _bounded(parse, f.metadata, flag)
        shown = "" if default is None else f" (default: {default})"
        parser.add_argument(flag, dest=f.name, type=parse, default=default, choices=f.metadata.get("choices"),
                            help=help_text + shown)


def settings_from(cls: type[T], args: argparse.Namespace, **given: Any) -> T:
    """An instance of ``cls`` from parsed options (those ``add_options`` made) and ``given`` values."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
              if f.init and f.name not in given and hasattr(args, f.name)}
    return cls(**values, **given)



"""Command-line options derived from the settings dataclasses, so that every default lives once.

A field becomes ``--field-name``; a field that is itself a settings dataclass adds its own fields
(the options stay flat, the settings nested); its ``metadata`` may give ``help``, ``flag`` (another option
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

from ..bundled import default_dataset
from ..tenset.splits import SplitError, parse_split

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
        if dataclasses.is_dataclass(hints[f.name]):  # nested settings: their fields are options too
            add_options(parser, hints[f.name])
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
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name in given:
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            values[f.name] = settings_from(hints[f.name], args)
        elif hasattr(args, f.name):
            values[f.name] = getattr(args, f.name)
    return cls(**values, **given)


def split_option(text: str) -> str:
    try:
        parse_split(text)
    except SplitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def data_args(p: argparse.ArgumentParser, split_help: str) -> None:
    p.add_argument("--data", type=Path, default=default_dataset(),
                   help="a TenSet dataset, a MetaSchedule database directory or a directory of past tuning runs' "
                        "databases (featurized on first use, cached by content) or a feature store .h5 (default: the "
                        "bundled tenset-mini)")
    p.add_argument("--split", type=split_option, help="within_task[:F] | by_task[:F[:SEED]] | fold:I/K[:SEED] | holdout:all_five | holdout:NET,NET | all; "
                   + split_help)
    p.add_argument("--seed", type=bounded(int, min=0), default=0)
    p.add_argument("--jobs", type=bounded(int, min=1), default=2, help="featurization workers when --data is a directory")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.add_argument("--quiet", action="store_true")

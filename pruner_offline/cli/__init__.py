"""``pruner-train``: wires the stages together; each stage lives in its own package.

One module per command, each with ``add_parser(sub)`` and ``run(args) -> int``. Options of the
stages that have settings dataclasses (featurize, adapt, tune, collect) are derived from those
dataclasses (options.py), so a default is written once, where the stage defines it. ``main`` is
the error boundary: a user's error is one line and exit 2, a bug one line, a crash log and exit 70.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from ..errors import BadInput, crash_log, user_facing_warnings
from ..interrupts import exit_code, terminate_as_interrupt
from . import (adapt, check_replay, collect, compare, evaluate, failures, featurize, info, merge, pretrain,
               tune)

# in the order `pruner-train --help` lists them: the stages as data flows through them
COMMANDS = (info, featurize, failures, pretrain, evaluate, compare, check_replay, adapt, tune, collect, merge)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pruner-train", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with user_facing_warnings(), terminate_as_interrupt():
            return args.func(args)
    except BadInput as exc:
        print(f"pruner-train: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, a read-only or missing path: the user's to fix, not a bug
        print(f"pruner-train: {f'{exc.filename}: ' if exc.filename else ''}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print("pruner-train: interrupted", file=sys.stderr)
        return exit_code(exc)
    except Exception as exc:  # noqa: BLE001 - whatever it is, the user gets one line and a log, not a traceback
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        print(f"pruner-train: internal error ({type(exc).__name__}: {first}): this is a bug in pruner-offline; "
              f"the traceback is in {crash_log(exc)}, please attach it to a report", file=sys.stderr)
        return 70

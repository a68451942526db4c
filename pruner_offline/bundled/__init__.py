"""What the toolkit ships and needs at run time: datasets, training recipes, checkpoints.

In the repository they live at the top level (``datasets/``, ``training/``, ``checkpoints/``); a
wheel installs them inside this package (``pyproject.toml`` maps them here). Both layouts are
looked up, so a source checkout, an editable install and a wheel all find them.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parents[1]
# installed name -> the top-level directory of the repository it comes from
_TOP_LEVEL = {"datasets": "datasets", "recipes": "training", "checkpoints": "checkpoints"}


def bundled(kind: str, name: str) -> Path:
    """``bundled("datasets", "tenset-mini")``: the path of a shipped file or directory."""
    candidates = (_HERE / kind / name, _REPO / _TOP_LEVEL[kind] / name)
    for path in candidates:
        if path.exists():
            return path
    raise FileNotFoundError(f"bundled {kind[:-1]} {name!r} not found (looked in {', '.join(map(str, candidates))}); "
                            "the installation is incomplete: reinstall pruner-offline")


def default_dataset() -> Path:
    return bundled("datasets", "tenset-mini")


def recipe(name: str) -> Path:
    return bundled("recipes", name)


def checkpoint(name: str) -> Path:
    return bundled("checkpoints", name)

"""What is stored beside a collection's database: the settings it was measured with, the machine,
the TVM version, and each run of the command (start, end, programs measured), so that data of
other settings is never mixed into it unnoticed."""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import tvm

from ..atomic import atomic_write
from ..errors import BadInput, dumps
from ..sources.metaschedule import COLLECTION_MANIFEST
from .settings import CollectSettings

MANIFEST = COLLECTION_MANIFEST
FORMAT = 1
# what must match for a rerun to add to a collection (programs_per_task may grow, a shard's
# workers and timeouts may change)
_FIXED = ("target_kind", "device", "num_cores", "random_fraction", "shard")
_FIXED_MEASURE = ("number", "repeat", "min_repeat_ms", "cpu_cache_flush")


def machine() -> dict:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": cpu or platform.processor(), "cpus": os.cpu_count(),
            "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "platform": platform.platform(), "python": platform.python_version(), "tvm": tvm.__version__}


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def settings_json(s: CollectSettings, target: tvm.target.Target, measured_on: str) -> dict:
    out = asdict(s)
    out["measure"].pop("rpc", None)
    out["target"] = json.loads(str(target))
    out["measured_on"] = measured_on
    return out


def read_manifest(out: Path) -> Optional[dict]:
    path = out / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not format {FORMAT}")
        return data
    except ValueError as exc:
        raise BadInput(f"{path}: not a collection manifest of this version ({exc})") from None


def check_same(old: dict, new: dict, out: Path) -> None:
    """Refuse to add programs measured another way to a collection."""
    diffs = [f"{k} {old['settings'].get(k)!r} there, {new[k]!r} now" for k in _FIXED
             if old["settings"].get(k) != new[k]]
    diffs += [f"{k} {old['settings']['measure'].get(k)!r} there, {new['measure'][k]!r} now" for k in _FIXED_MEASURE
              if old["settings"].get("measure", {}).get(k) != new["measure"][k]]
    if diffs:
        raise BadInput(f"{out} holds a collection made with other settings ({'; '.join(diffs)}): rerun it with "
                       "those, or give another --out")


def write_manifest(out: Path, data: dict) -> None:
    with atomic_write(out / MANIFEST) as tmp:
        tmp.write_text(dumps(data, indent=1, sort_keys=True) + "\n")


def start_run(out: Path, s: CollectSettings, target: tvm.target.Target, measured_on: str, tasks: list[dict]) -> dict:
    """The manifest with this run begun: written before any program is measured. tasks: what this
    run collects for (name, workload hash, weight, origin), so that a collection of several
    networks says which network each workload came from."""
    new = settings_json(s, target, measured_on)
    data = read_manifest(out)
    if data is None:
        data = {"format": FORMAT, "settings": new, "machine": machine(), "runs": []}
    else:
        check_same(data, new, out)
        data["settings"] = new
    data["runs"].append({"started": now(), "ended": None, "measured": 0, "seconds": 0.0, "machine": machine(),
                         "tasks": tasks})
    write_manifest(out, data)
    return data


def record_run(out: Path, data: dict, measured: int, seconds: float, ended: bool) -> None:
    """This run's programs and seconds so far, after every batch: collect ends at once on a signal
    (interrupts.exit_at_once), so a run stopped that way keeps what it measured, with no end time."""
    data["runs"][-1].update(ended=now() if ended else None, measured=measured, seconds=round(seconds, 1))
    write_manifest(out, data)

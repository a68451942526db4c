"""Featurization speed per core on llvm and cuda records, against Ansor's own extractor and against
an earlier version of this code, all in the same run.

    PYTHONPATH=. python bench/featurize.py [DATASET] [--previous REF] [--ansor-python PY]

Every rate is records per second on one core (each measuring process is pinned to the same core)
through the real pipeline: ``build_store.featurize_unit`` on every record file of DATASET
(default: the bundled tenset-mini, with its unmeasured cuda programs), i.e. replay of the Ansor
steps on TIR and every stored feature (per-store, op tag, dataflow, PSA symbols, draft score).

- ``--previous REF``: the same measurement with the package as it was at git REF (default HEAD~1
  when omitted with a value of ``""``; pass e.g. 7e261cc), extracted to a temporary directory.
- ``--ansor-python PY``: an interpreter with hhb-tvm (TVM 0.16, Ansor); runs
  bench/ansor_features.py there on the same records: Ansor's C++ per-store features only, the
  reference TenSet's scripts used. hhb-tvm is never a dependency of the package.

Only ratios within one run mean anything on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def pin() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def measure(dataset: Path) -> dict:
    """{kind: {"records", "seconds"}} of featurize_unit over every unit of ``dataset``."""
    from pruner_offline.build_store import FeaturizeSettings, featurize_unit, plan_units
    from pruner_offline.sources.base import open_source

    pin()
    source = open_source(dataset)
    settings = FeaturizeSettings(str(dataset), include_unmeasured=True)
    units = plan_units(source, settings)
    for unit in (units[0], units[-1]):  # builds the extractors (llvm, cuda); kept out of the rates
        featurize_unit(source, settings, unit)
    out: dict = defaultdict(lambda: {"records": 0, "seconds": 0.0})
    for unit in units:
        start = time.perf_counter()
        got = featurize_unit(source, settings, unit)
        entry = out[got.target_kind]
        entry["seconds"] += time.perf_counter() - start
        entry["records"] += got.records_read
    return dict(out)


def measure_previous(ref: str, dataset: Path) -> dict:
    """``measure`` with the package of git ``ref``, in a fresh process."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "pruner_offline"], capture_output=True, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        code = (f"import json, sys; sys.path.insert(0, {tmp!r}); sys.path.insert(1, {str(REPO / 'bench')!r});"
                f"import featurize; print(json.dumps(featurize.measure(__import__('pathlib').Path({str(dataset)!r}))))")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp,
                              env={**os.environ, "PYTHONPATH": tmp})
    if proc.returncode:
        sys.exit(f"the previous version ({ref}) failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_ansor(python: str, dataset: Path) -> dict:
    proc = subprocess.run([python, str(REPO / "bench" / "ansor_features.py"), str(dataset), "--per-file", "0"],
                          capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"Ansor's extractor ({python}) failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rate(entry: dict) -> float:
    return entry["records"] / entry["seconds"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", type=Path, default=REPO / "datasets" / "tenset-mini")
    ap.add_argument("--previous", metavar="REF", help="also measure the package at this git ref")
    ap.add_argument("--ansor-python", metavar="PY", help="an interpreter with hhb-tvm, for Ansor's rate")
    args = ap.parse_args()
    dataset = args.dataset.resolve()
    runs = {"ours": measure(dataset)}
    if args.previous:
        runs[f"ours@{args.previous}"] = measure_previous(args.previous, dataset)
    if args.ansor_python:
        runs["ansor"] = measure_ansor(args.ansor_python, dataset)
    print(f"{dataset.name}: records/s on one core (records measured)")
    names = list(runs)
    print(f"{'target':>6}  " + "  ".join(f"{n:>22}" for n in names)
          + "".join(f"  {'ours / ' + n:>22}" for n in names[1:]))
    for kind in sorted(runs["ours"]):
        cells = [f"{rate(r[kind]):>12.1f} ({r[kind]['records']:>5})" if kind in r else f"{'-':>22}" for r in runs.values()]
        ratios = [f"{rate(runs['ours'][kind]) / rate(runs[n][kind]):>22.2f}" if kind in runs[n] else f"{'-':>22}"
                  for n in names[1:]]
        print(f"{kind:>6}  " + "  ".join(cells) + "".join(f"  {x}" for x in ratios))
    print(json.dumps(runs))


if __name__ == "__main__":
    main()

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
- ``--rounds N``: everything N times in turn; rates are medians, ratios the median of the ratios
  within each round, with their range (the load of a shared machine drifts between rounds).
- ``--breakdown``: where our time goes, per record: inside TVM's schedule primitives (the
  replay), inside the per-store columns' extractor (schema 3: ours, native; schema 2:
  MetaSchedule's PerStoreFeature ``extract_from``), and the rest (ours, in Python); then PerStoreFeature's own preprocessing passes timed one by one on a sample of the
  replayed programs (``--breakdown-sample`` per target). Both calls are timed by wrapping them,
  so these rates run a little slower than without the flag.

Rates are records per CPU second of the measuring process (``time.process_time``), where every
measurement reports it: per core by definition, and blind to the time a shared or virtual machine
gives to others (this one's steal time reached 20%), which wall time counts. Wall-time seconds are
in the JSON too. Only ratios within one run mean anything on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager, nullcontext
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def pin() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


class NativeTimes:
    """Seconds inside TVM's schedule primitives and inside PerStoreFeature's extract_from, by
    wrapping both while ``installed``."""

    def __init__(self) -> None:
        self.seconds = {"schedule": 0.0, "extract": 0.0}

    def _timed(self, fn, key: str):
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[key] += time.perf_counter() - start
        return call

    @contextmanager
    def installed(self):
        import functools

        from tvm.s_tir.meta_schedule.feature_extractor import FeatureExtractor

        from pruner_offline.features import extract as extract_module
        from pruner_offline.replay.unchecked import UncheckedSchedule

        getattr_, extract = UncheckedSchedule.__getattr__, FeatureExtractor.extract_from
        own = extract_module.per_store_rows

        def primitive(sch, name):
            got = getattr_(sch, name)  # a primitive comes back as a partial of the raw function
            if not isinstance(got, functools.partial):
                return got
            timed = self._timed(got, "schedule")
            setattr(sch, name, timed)  # where __getattr__ keeps the partial, for the next calls
            return timed

        UncheckedSchedule.__getattr__ = primitive
        FeatureExtractor.extract_from = self._timed(extract, "extract")
        extract_module.per_store_rows = self._timed(own, "extract")  # schema 3's extractor
        try:
            yield self
        finally:
            UncheckedSchedule.__getattr__, FeatureExtractor.extract_from = getattr_, extract
            extract_module.per_store_rows = own


def measure(dataset: Path, breakdown: bool = False) -> dict:
    """{kind: {"records", "seconds"}} of featurize_unit over every unit of ``dataset``; with
    ``breakdown``, also the seconds inside TVM's schedule primitives and PerStoreFeature."""
    from pruner_offline.build_store import FeaturizeSettings, featurize_unit, plan_units
    from pruner_offline.sources.base import open_source

    pin()
    source = open_source(dataset)
    settings = FeaturizeSettings(str(dataset), include_unmeasured=True)
    units = plan_units(source, settings)
    for unit in (units[0], units[-1]):  # builds the extractors (llvm, cuda); kept out of the rates
        featurize_unit(source, settings, unit)
    out: dict = defaultdict(lambda: {"records": 0, "seconds": 0.0, "cpu_seconds": 0.0})
    native = NativeTimes()
    with native.installed() if breakdown else nullcontext():
        for unit in units:
            before = dict(native.seconds)
            start, cpu_start = time.perf_counter(), time.process_time()
            got = featurize_unit(source, settings, unit)
            entry = out[got.target_kind]
            entry["seconds"] += time.perf_counter() - start
            entry["cpu_seconds"] += time.process_time() - cpu_start
            entry["records"] += got.records_read
            if breakdown:
                for key, total in native.seconds.items():
                    entry[f"{key}_seconds"] = entry.get(f"{key}_seconds", 0.0) + total - before[key]
    return dict(out)


def pass_seconds(dataset: Path, sample: int) -> dict:
    """{kind: {"programs", pass name: seconds per program}}: PerStoreFeature's preprocessing
    passes (features/regions.py's list, which leaves out its SimplifyForFeatureExtraction), each
    timed on the first ``sample`` replayed programs of each target."""
    import tvm
    from tvm import s_tir

    from pruner_offline.build_store import FeaturizeSettings, plan_units
    from pruner_offline.features.regions import per_store_feature_passes
    from pruner_offline.sources.base import open_source

    pin()
    source = open_source(dataset)
    funcs: dict = defaultdict(list)
    for unit in plan_units(source, FeaturizeSettings(str(dataset), include_unmeasured=True)):
        got = source.programs(unit)
        have = funcs[got.target_kind]
        for prog in got.programs:  # replayed as they are read
            if len(have) >= sample:
                break
            if prog.func is not None:
                have.append(prog.func)
    out: dict = {}
    for kind, programs in funcs.items():
        passes = per_store_feature_passes()
        seconds = [0.0] * len(passes)
        for func in programs:
            mod = func.mod if isinstance(func, s_tir.Schedule) else tvm.IRModule({"main": func})
            for i, p in enumerate(passes):
                start = time.perf_counter()
                mod = p(mod)
                seconds[i] += time.perf_counter() - start
        out[kind] = {"programs": len(programs)}
        for p, total in zip(passes, seconds):
            name = p.info.name.split(".")[-1]
            out[kind][name] = out[kind].get(name, 0.0) + total / len(programs)
    return out


def print_breakdown(ours: dict, passes: dict, ansor: dict | None) -> None:
    print("\nwhere our time goes, ms per record (share of ours)")
    print(f"{'target':>6}  {'all':>14}  {'TVM schedule':>14}  {'per-store columns':>17}  {'rest (ours)':>14}"
          + (f"  {'Ansor, all':>12}  {'per-store / Ansor':>18}" if ansor else ""))
    for kind, e in sorted(ours.items()):
        ms = {k: 1e3 * e[f"{k}_seconds"] / e["records"] for k in ("schedule", "extract")}
        total = 1e3 * e["seconds"] / e["records"]
        rest = total - ms["schedule"] - ms["extract"]
        cells = [f"{x:>8.2f} ({x / total:>3.0%})" for x in (ms["schedule"], ms["extract"], rest)]
        line = f"{kind:>6}  {total:>14.2f}  {cells[0]:>14}  {cells[1]:>16}  {cells[2]:>14}"
        if ansor and kind in ansor:
            a = 1e3 * ansor[kind]["seconds"] / ansor[kind]["records"]
            line += f"  {a:>12.2f}  {ms['extract'] / a:>18.2f}"
        print(line)
    for kind, e in sorted(passes.items()):
        timed = {k: v for k, v in e.items() if k != "programs"}
        total = sum(timed.values())
        print(f"{kind}: PerStoreFeature's passes on {e['programs']} programs, {1e3 * total:.2f} ms a program: "
              + ", ".join(f"{k} {1e3 * v:.2f} ({v / total:.0%})" for k, v in sorted(timed.items(), key=lambda kv: -kv[1])))


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
    """Records per CPU second where measured (an older Ansor script reports wall time only)."""
    return entry["records"] / entry.get("cpu_seconds", entry["seconds"])


def measure_round(dataset: Path, args, breakdown: bool) -> dict:
    runs = {"ours": measure(dataset, breakdown)}
    if args.previous:
        runs[f"ours@{args.previous}"] = measure_previous(args.previous, dataset)
    if args.ansor_python:
        runs["ansor"] = measure_ansor(args.ansor_python, dataset)
    return runs


def print_rates(dataset: Path, rounds: list[dict]) -> None:
    """Median rate of each measurement over the rounds, and the median of the ratios taken within
    each round (with their range when there are several): the load of a shared machine moves
    between rounds, and a ratio of two measurements made minutes apart carries that drift."""
    first = rounds[0]
    names = list(first)
    print(f"{dataset.name}: records/s on one core (records measured), median of {len(rounds)} round(s)")
    print(f"{'target':>6}  " + "  ".join(f"{n:>22}" for n in names)
          + "".join(f"  {'ours / ' + n:>26}" for n in names[1:]))
    for kind in sorted(first["ours"]):
        cells = [f"{statistics.median(rate(r[n][kind]) for r in rounds):>12.1f} ({first[n][kind]['records']:>5})"
                 if kind in first[n] else f"{'-':>22}" for n in names]
        ratios = []
        for n in names[1:]:
            if kind not in first[n]:
                ratios.append(f"{'-':>26}")
                continue
            within = [rate(r["ours"][kind]) / rate(r[n][kind]) for r in rounds]
            spread = f" [{min(within):.2f}-{max(within):.2f}]" if len(within) > 1 else ""
            ratios.append(f"{f'{statistics.median(within):.2f}{spread}':>26}")
        print(f"{kind:>6}  " + "  ".join(cells) + "".join(f"  {x}" for x in ratios))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?", type=Path, default=REPO / "datasets" / "tenset-mini")
    ap.add_argument("--previous", metavar="REF", help="also measure the package at this git ref")
    ap.add_argument("--ansor-python", metavar="PY", help="an interpreter with hhb-tvm, for Ansor's rate")
    ap.add_argument("--rounds", type=int, default=1, help="measure everything this many times in turn")
    ap.add_argument("--breakdown", action="store_true", help="where our time goes (see above)")
    ap.add_argument("--breakdown-sample", type=int, default=200, help="programs per target whose passes are timed")
    args = ap.parse_args()
    dataset = args.dataset.resolve()
    # the breakdown's wrappers slow ours a little: only the first round carries them
    rounds = [measure_round(dataset, args, args.breakdown and i == 0) for i in range(max(1, args.rounds))]
    print_rates(dataset, rounds)
    out: dict = {"rounds": rounds}
    if args.breakdown:
        passes = pass_seconds(dataset, args.breakdown_sample)
        print_breakdown(rounds[0]["ours"], passes, rounds[0].get("ansor"))
        out["passes"] = passes
    print(json.dumps(out))


if __name__ == "__main__":
    main()

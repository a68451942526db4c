"""The ProgramSource interface: detection, content keys, a source added from outside, live sources."""

import json
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pruner_offline.build_store import FeaturizeSettings, cached_store, run_featurize
from pruner_offline.sources import (ProgramSource, SourceError, SourceProgram, Unit, UnitPrograms, open_source,
                                    register_source)
from pruner_offline.errors import BadInput
from pruner_offline.sources.base import _SOURCES, TailedFile
from pruner_offline.sources.metaschedule import RECORD_FILE, WORKLOAD_FILE, MetaScheduleLog, MetaScheduleSource
from pruner_offline.sources.tenset import TenSetSource
from pruner_offline.store.reader import FeatureStore

from conftest import REPO

H200_MINI = REPO / "datasets" / "h200-ms-mini"


def test_open_source_tells_the_kinds_apart(tenset_mini, tmp_path):
    assert isinstance(open_source(tenset_mini), TenSetSource)
    # a database directory also holds .json files, which alone would pass for TenSet record files
    assert isinstance(open_source(H200_MINI), MetaScheduleSource)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="neither"):
        open_source(tmp_path / "empty")
    with pytest.raises(SourceError, match="not a directory"):
        open_source(tmp_path / "nothing-here")


def test_fingerprint_is_the_content_not_the_copy(tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(H200_MINI, copy)
    assert open_source(copy).fingerprint() == open_source(H200_MINI).fingerprint()
    with open(copy / RECORD_FILE, "a") as f:
        f.write((H200_MINI / RECORD_FILE).read_text().splitlines()[0] + "\n")
    assert open_source(copy).fingerprint() != open_source(H200_MINI).fingerprint()


def test_store_cache_is_keyed_by_content_not_by_name(tmp_path):
    """Two databases both called `online` used to share one cache entry."""
    lines = (H200_MINI / RECORD_FILE).read_text().splitlines()
    roots = []
    for i, workload in enumerate((0, 13)):
        root = tmp_path / f"run{i}" / "online"
        root.mkdir(parents=True)
        shutil.copy(H200_MINI / WORKLOAD_FILE, root / WORKLOAD_FILE)
        (root / RECORD_FILE).write_text("\n".join([l for l in lines if json.loads(l)[0] == workload][:5]) + "\n")
        roots.append(root)
    cache = tmp_path / "cache"
    first, made = cached_store(FeaturizeSettings(str(roots[0])), cache)
    second, made2 = cached_store(FeaturizeSettings(str(roots[1])), cache)
    assert made is not None and made2 is not None and first != second
    assert FeatureStore(first).load().task_keys != FeatureStore(second).load().task_keys
    again, none = cached_store(FeaturizeSettings(str(roots[0])), cache)
    assert again == first and none is None  # found, not featurized again
    other_device, made3 = cached_store(FeaturizeSettings(str(roots[0]), gpu="a100"), cache)
    assert other_device != first and made3 is not None


def test_stores_record_source_and_device_constants(tmp_path):
    out = tmp_path / "s.h5"
    lines = (H200_MINI / RECORD_FILE).read_text().splitlines()
    root = tmp_path / "db"
    root.mkdir()
    shutil.copy(H200_MINI / WORKLOAD_FILE, root / WORKLOAD_FILE)
    (root / RECORD_FILE).write_text("\n".join(lines[:4]) + "\n")
    run_featurize(FeaturizeSettings(str(root), gpu="t4"), out)
    meta = FeatureStore(out).meta
    assert meta["source_kind"] == "metaschedule" and meta["target_kinds"] == ["cuda"]
    assert meta["devices"]["cuda"]["name"] == "t4" and meta["devices"]["cuda"]["bandwidth_gbs"] == 320
    assert meta["source_fingerprint"] == open_source(root).fingerprint()


class _ScheduledMatmuls(ProgramSource):
    """A third kind of source, defined outside the package: `programs.jsonl` lines of
    {"n": size, "tile": split factor, "seconds": cost}, each a matmul scheduled here."""

    kind = "test-matmuls"

    @classmethod
    def detect(cls, path: Path) -> bool:
        return (path / "programs.jsonl").is_file()

    def files(self):
        return [self.root / "programs.jsonl"]

    def units(self, device=None, include_unmeasured=False):
        return [Unit(0, "test-cpu", "programs.jsonl")]

    def programs(self, unit):
        from tvm import s_tir, te

        rows = [json.loads(l) for l in (self.root / "programs.jsonl").read_text().splitlines()]
        best = min(r["seconds"] for r in rows)

        def schedule(pos, r):
            a = te.placeholder((r["n"], r["n"]), name="A")
            b = te.placeholder((r["n"], r["n"]), name="B")
            k = te.reduce_axis((0, r["n"]), name="k")
            c = te.compute((r["n"], r["n"]), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
            sch = s_tir.Schedule(te.create_prim_func([a, b, c]))
            i, _, _ = sch.get_loops(sch.get_sblock("C"))
            sch.split(i, [None, r["tile"]])
            return SourceProgram(pos + 1, pos, r["seconds"], 0, best / r["seconds"], sch.mod["main"])

        return UnitPrograms("matmul", "llvm", [schedule(i, r) for i, r in enumerate(rows)], len(rows))


def test_a_new_source_is_one_class(tmp_path):
    root = tmp_path / "mine"
    root.mkdir()
    (root / "programs.jsonl").write_text("".join(json.dumps({"n": 64, "tile": t, "seconds": s}) + "\n"
                                                 for t, s in ((4, 2e-4), (8, 1e-4), (16, 3e-4))))
    register_source(_ScheduledMatmuls)
    try:
        assert isinstance(open_source(root), _ScheduledMatmuls)
        report = run_featurize(FeaturizeSettings(str(root)), tmp_path / "mine.h5")
    finally:
        _SOURCES.remove(_ScheduledMatmuls)
    assert (report.records, report.replayed, report.failed) == (3, 3, 0)
    data = FeatureStore(tmp_path / "mine.h5").load()
    assert np.allclose(data.records["label"], [0.5, 1.0, 1 / 3])
    assert data.task_keys == ["matmul|llvm"] and data.statements.shape[1] == 174


def test_metaschedule_log_yields_records_as_a_tuning_run_appends_them(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    shutil.copy(H200_MINI / WORKLOAD_FILE, root / WORKLOAD_FILE)
    lines = (H200_MINI / RECORD_FILE).read_bytes().splitlines(keepends=True)[:5]
    log = MetaScheduleLog(root)
    assert log.poll() == []  # the run has not written a record yet
    with open(root / RECORD_FILE, "wb") as f:
        f.write(lines[0] + lines[1][:40])  # caught in the middle of the second line
    first = log.poll()
    assert [p.program.line for p in first] == [1] and first[0].program.func is not None
    assert first[0].task_key.startswith("ms:") and first[0].target_kind == "cuda"
    with open(root / RECORD_FILE, "ab") as f:
        f.write(lines[1][40:] + b"[0, not json\n" + lines[2])
    rest = log.poll()
    assert [getattr(p, "program", p).line if hasattr(p, "program") else p.source.line for p in rest] == [2, 3, 4]
    assert "bad tuning record" in rest[1].reason and log.lines_read == 4


def test_adapt_follows_a_metaschedule_database(tmp_path):
    """`adapt --follow` on the database a TVM tuning run writes, fed by a writer thread."""
    from pruner_offline.adapt.config import AdaptConfig
    from pruner_offline.adapt.follow import follow
    from pruner_offline.features import get_device
    from pruner_offline.training.export import load_model

    root = tmp_path / "work"
    root.mkdir()
    shutil.copy(H200_MINI / WORKLOAD_FILE, root / WORKLOAD_FILE)
    lines = [l for l in (H200_MINI / RECORD_FILE).read_bytes().splitlines(keepends=True)
             if json.loads(l)[0] == 13][:30]

    def writer():
        with open(root / RECORD_FILE, "wb") as f:
            for line in lines:
                f.write(line)
                f.flush()
                time.sleep(0.01)

    thread = threading.Thread(target=writer)
    thread.start()
    module, _ = load_model(REPO / "checkpoints" / "pacm_h200.pt")
    save = tmp_path / "adapted.pt"
    st = follow(module, MetaScheduleLog(root), "cuda", get_device("h200"), "finetune",
                AdaptConfig(round_size=10, retrain_every=1, epochs=1), save, idle_timeout=3.0, poll_interval=0.05)
    thread.join()
    assert (st.online, st.rounds, st.skipped) == (30, 3, 0)
    _, meta = load_model(save)
    assert meta["rounds"] == 3 and meta["devices"]["cuda"]["name"] == "h200"
    assert meta["adapted_from"] == str(root / RECORD_FILE)  # was the source object's repr

    # a restart on records that lost lines since the state was saved is refused, not replayed short
    (root / RECORD_FILE).write_bytes(b"".join(lines[:12]))
    with pytest.raises(BadInput, match=rf"holds 12 lines, but {save}.state was saved after line 30: the records "
                                       "were truncated or replaced since"):
        follow(module, MetaScheduleLog(root), "cuda", get_device("h200"), "finetune",
               AdaptConfig(round_size=10, retrain_every=1, epochs=1), save, idle_timeout=3.0, poll_interval=0.05)


@pytest.mark.parametrize("change", ["replaced", "rewritten", "shrank"])
def test_a_followed_file_that_changes_under_the_reader_is_refused(tmp_path, change):
    # read on from the old offset, a replaced file's first lines were lost and the line cut in the
    # middle reported as malformed
    path = tmp_path / "records.json"
    path.write_bytes(b"first line\nsecond line\n")
    tail = TailedFile(path)
    assert tail.poll() == [b"first line\n", b"second line\n"]
    if change == "replaced":
        (tmp_path / "other.json").write_bytes(b"another run's first line\nand its second\nand third\n")
        (tmp_path / "other.json").replace(path)
    elif change == "rewritten":
        with open(path, "r+b") as f:  # same file, other bytes, longer than before
            f.write(b"FIRST LINE\nSECOND LINE\nthird line\n")
    else:
        path.write_bytes(b"first\n")
    with pytest.raises(SourceError, match=f"{path}: {change} .*while followed, after 2 lines had been read"):
        tail.poll()

"""Out-of-core training data: the same split, scales, batches and models as the in-memory path,
read a chunk at a time and without the step vectors unless TLP needs them."""

import pickle
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from pruner_offline.models.batch import Batch
from pruner_offline.store.reader import FeatureStore, RowReader, open_file, open_rows
from pruner_offline.store.schema import StoreError
from pruner_offline.training.data import ChunkStream, StoreDataModule, gather_batch
from pruner_offline.training.evaluate import evaluate_module

from synthetic import synthetic_store

REPO = Path(__file__).resolve().parents[1]

SPLIT = "within_task:0.3"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return synthetic_store(tmp_path_factory.mktemp("ooc") / "s.h5")


def _modules(store, **kwargs):
    # chunks far smaller than the store, so that batches span chunks and buffers
    out = []
    for in_memory in (True, False):
        dm = StoreDataModule(str(store), split=SPLIT, batch_size=32, in_memory=in_memory, chunk_rows=50,
                             buffer_chunks=2, **kwargs)
        dm.setup("fit")
        out.append(dm)
    return out


def _fields(b: Batch) -> dict[str, torch.Tensor]:
    return {k: getattr(b, k) for k in ("statements", "symbols", "segment", "dataflow", "steps", "draft_score", "y",
                                       "task")}


def _records(batches) -> list[tuple]:
    """Every record served, as (task, label, draft score), in a canonical order."""
    return sorted((int(t), float(y), float(s)) for b in batches for t, y, s in zip(b.task, b.y, b.draft_score))


def test_same_split_scales_and_batches(store):
    mem, ooc = _modules(store, with_steps=True)
    for name in ("train_rows", "val_rows", "test_rows"):
        np.testing.assert_array_equal(getattr(mem, name), getattr(ooc, name))
    for name in ("statements", "symbols", "dataflow", "steps", "draft_score"):
        np.testing.assert_array_equal(getattr(mem.scales, name), getattr(ooc.scales, name))
    for loader in ("train_dataloader", "val_dataloader", "test_dataloader"):
        ours, theirs = list(getattr(ooc, loader)()), list(getattr(mem, loader)())
        assert _records(ours) == _records(theirs), loader
    stream = ooc.train_dataloader().dataset
    plan = [b for buffer in stream.batch_rows(0) for b in buffer]
    np.testing.assert_array_equal(np.sort(np.concatenate(plan)), ooc.train_rows)
    assert max(map(len, plan)) <= 32 and min(map(len, plan)) > 1
    # each batch holds exactly the features the in-memory store has for its rows
    for rows, b in zip(plan, ChunkStream(ooc.reader.read, ooc.train_rows, 32, True, chunk_rows=50, buffer_chunks=2)):
        for k, x in _fields(gather_batch(mem.data, rows)).items():
            assert torch.equal(x, _fields(b)[k]), k
    # evaluation order: the split's rows as they are
    val = ChunkStream(ooc.reader.read, ooc.val_rows, 32, False, chunk_rows=50)
    np.testing.assert_array_equal(np.concatenate([b for buf in val.batch_rows(0) for b in buf]), ooc.val_rows)
    rows = ooc.test_rows[::-3]  # any order, as callers of gather ask
    for k, x in _fields(mem.gather(rows)).items():
        assert torch.equal(x, _fields(ooc.gather(rows))[k]), k


def test_task_batches_serve_each_task_in_one_run_per_buffer(store):
    # in memory or not, a training epoch with task_batches serves every training row once, a task's
    # rows of a buffer one after another: batches of whole lists, not one record of each task
    for dm in _modules(store, task_batches=True):
        stream = dm.train_dataloader().dataset
        tasks = dm.columns(stream.rows)["task_id"]
        served = []
        for buffer in stream.batch_rows(1):
            rows = np.concatenate(buffer)
            served.append(rows)
            t = tasks[np.searchsorted(stream.rows, rows)]
            runs = t[np.r_[True, t[1:] != t[:-1]]]
            assert len(runs) == len(set(runs.tolist())), "a task's rows came apart inside a buffer"
        np.testing.assert_array_equal(np.sort(np.concatenate(served)), np.sort(dm.train_rows))
        batch = next(iter(dm.train_dataloader()))
        assert len(set(batch.task.tolist())) < len(batch.task)  # several records of one task in a batch
        # another epoch deals the tasks in another order
        assert not np.array_equal(np.concatenate(list(stream.batch_rows(2))[0]), served[0])


def test_ranks_share_chunks_evenly(store):
    _, ooc = _modules(store)
    for chunk_rows in (50, 4096):  # a store of many chunks; one that fits in a single chunk
        streams = [ChunkStream(ooc.reader.read, ooc.train_rows, 16, True, seed=3, rank=r, world=3,
                               chunk_rows=chunk_rows) for r in range(3)]
        batches = [[b for buf in s.batch_rows(1) for b in buf] for s in streams]
        assert len({len(b) for b in batches}) == 1  # DDP needs the same number of steps on every rank
        rows = [np.concatenate(b) for b in batches]
        assert sum(map(len, rows)) == len(np.unique(np.concatenate(rows)))  # no record on two ranks
        unit = streams[0].deal_rows()
        assert unit <= chunk_rows
        assert all(np.isin(r // unit, r2 // unit).sum() == 0 for i, r in enumerate(rows) for r2 in rows[i + 1:])
        # cutting every rank to the shortest share loses little of the epoch
        assert sum(map(len, rows)) >= 0.8 * len(ooc.train_rows), (chunk_rows, unit)


def test_steps_are_read_only_for_tlp(store, monkeypatch):
    read: set[str] = set()
    original = h5py.Dataset.__getitem__

    def counting(self, key):
        read.add(self.name)
        return original(self, key)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", counting)
    _, ooc = _modules(store)
    batches = list(ooc.train_dataloader()) + [ooc.gather(ooc.test_rows)]
    assert "/steps" not in read and "/statements" in read
    assert all(b.steps.shape == (b.size, 0, 37) for b in batches)
    _, tlp = _modules(store, with_steps=True)
    assert next(iter(tlp.train_dataloader())).steps.shape[1:] == (64, 37) and "/steps" in read


def test_reader_opens_its_file_in_each_process(store):
    _, ooc = _modules(store)
    rows = ooc.test_rows[:5]
    ooc.reader.read(rows)
    copy = pickle.loads(pickle.dumps(ooc.reader))  # what a spawned DataLoader worker receives
    assert copy._file is None
    np.testing.assert_array_equal(copy.read(rows).statements, ooc.reader.read(rows).statements)
    ooc.num_workers = 2  # forked workers, after this process opened the file
    served = list(ooc.train_dataloader())
    assert _records(served) == _records([ooc.gather(ooc.train_rows)])


def test_readers_hold_a_chunk_cache_of_their_chunks_not_hdf5s_default(store, tmp_path):
    """HDF5 2.0 caches 8 MB a dataset; at 10 M records RowReader's ~15 datasets held ~100 MB
    (bench/scale.py). A reader's cache is what a run of rows needs: two of the writer's whole-row
    chunks; a store chunked across columns (h5py's own guess for tall arrays) gets its rows' width."""
    _, ooc = _modules(store)
    ooc.reader.read(ooc.train_rows[:10])
    for name, d in ooc.reader._datasets.items():
        _, nbytes, _ = d.id.get_access_plist().get_chunk_cache()
        assert nbytes == 1 << 20, name
    with open_file(store) as f:
        assert f.id.get_access_plist().get_cache()[2] == 1 << 20
    legacy = tmp_path / "columns.h5"
    with h5py.File(legacy, "w") as f:
        f.create_dataset("statements", data=np.arange(4000 * 30, dtype=np.float32).reshape(4000, 30),
                         chunks=(2000, 1), compression="lzf")
    with open_file(legacy) as f:
        d = open_rows(f, "statements")
        _, nbytes, _ = d.id.get_access_plist().get_chunk_cache()
        assert nbytes >= 30 * 2000 * 4  # every chunk a row crosses
        np.testing.assert_array_equal(d[1999:2001, 29], [1999 * 30 + 29, 2000 * 30 + 29])


def test_bad_numbers_are_refused_in_the_chunk_that_holds_them(store, tmp_path):
    bad = tmp_path / "bad.h5"
    shutil.copy(store, bad)
    with h5py.File(bad, "r+") as f:
        row = int(f["records/stmt_offset"][300])  # a statement of record 300, in the chunk 300..349
        f["statements"][row, 5] = np.nan
    fs = FeatureStore(bad)
    index = fs.index()  # labels and draft scores only: still readable
    reader = RowReader(fs, index, with_steps=False, chunk_rows=50)
    reader.read(np.arange(0, 300))
    with pytest.raises(StoreError, match=r"statements row .* \(t5.json:1\) is not finite"):
        reader.read(np.array([0, 310]))
    with pytest.raises(StoreError, match="not finite"):
        fs.load()


@pytest.fixture(scope="module")
def bundled_store(tenset_mini, tmp_path_factory):
    from pruner_offline.build_store import FeaturizeSettings, cached_store

    store, _ = cached_store(FeaturizeSettings(str(tenset_mini)), tmp_path_factory.mktemp("cache"), jobs=2)
    return store


def test_pretraining_out_of_core_matches_in_memory(bundled_store, tmp_path):
    from pruner_offline.training.run import pretrain

    in_memory = tmp_path / "in_memory.yaml"
    in_memory.write_text("data:\n  in_memory: true\n")
    results = {}
    for name, extra in (("out_of_core", []), ("in_memory", [in_memory])):
        results[name] = pretrain(bundled_store, "pacm", "within_task", tmp_path / name, max_epochs=6, seed=0,
                                 extra_configs=extra, progress=False)
    ooc, mem = (results[k].evaluation.metrics for k in ("out_of_core", "in_memory"))
    # the two paths shuffle with different generators (seen: pairwise 0.631 vs 0.626, peak@5 0.836 vs
    # 0.832 after 6 epochs): the same model up to training noise
    assert ooc["pairwise_acc"] == pytest.approx(mem["pairwise_acc"], abs=0.03), (ooc, mem)
    assert ooc["peak@5"] == pytest.approx(mem["peak@5"], abs=0.05), (ooc, mem)
    # and one model scores the same through either path
    from pruner_offline.training.export import load_model

    module, _ = load_model(results["out_of_core"].model_file)
    scores = []
    for flag in (True, False):
        dm = StoreDataModule(str(bundled_store), split="within_task", in_memory=flag)
        dm.setup("test")
        scores.append(evaluate_module(module, dm).metrics)
    assert scores[0] == scores[1] == pytest.approx(ooc)


def test_two_processes_train_as_well_as_one(bundled_store, tmp_path):
    """`pretrain --devices 2 --strategy ddp` launches a second process (Lightning re-runs the command),
    each trains on its own chunks, and rank 0 alone evaluates, writes the model and prints."""
    import json
    import subprocess
    import sys

    from pruner_offline.training.export import load_model

    def pretrain_cli(out, *flags):
        cmd = [sys.executable, "-m", "pruner_offline.cli", "pretrain", "--model", "pacm", "--data", str(bundled_store),
               "--max-epochs", "8", "--seed", "0", "--accelerator", "cpu", "--out", str(out), "--json", "--quiet", *flags]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        assert len(lines) == 1, proc.stdout  # one report, from rank 0
        return json.loads(lines[0])["pacm"], proc.stderr

    one, said = pretrain_cli(tmp_path / "one", "--devices", "1")
    # --quiet: the result and nothing of Lightning's (its start-up report, model summary, hints)
    assert not any(s in said for s in ("Seed set", "GPU available", "LightningCLI", "Params", "Warning")), said
    two, _ = pretrain_cli(tmp_path / "two", "--devices", "2", "--strategy", "ddp")
    metas = [load_model(tmp_path / run / "pacm.pt")[1] for run in ("one", "two")]
    assert metas[0]["train_records"] == metas[1]["train_records"] > 0  # the same split, shared out
    # one seed of 8 epochs on 900 training records: the two differ by training noise only
    # (bench/ddp.py measures the mean over seeds at the recipe's length)
    assert two["pairwise_acc"] == pytest.approx(one["pairwise_acc"], abs=0.04), (one, two)
    assert two["peak@1"] >= one["peak@1"] - 0.06, (one, two)


@pytest.mark.parametrize("val_by_task", [False, True])
def test_the_split_is_the_same_however_many_blocks_it_is_computed_in(store, monkeypatch, val_by_task):
    from pruner_offline.tenset.splits import parse_split
    from pruner_offline.training import split_rows as sr

    fs = FeatureStore(store)
    tables = fs.tables()
    nets = [frozenset(n) for n in tables.task_networks]

    def split(block: int):
        monkeypatch.setattr(sr, "BLOCK", block)
        return sr.split_rows(fs, parse_split(SPLIT), 7, 0.2, val_by_task, len(tables.task_keys), nets)

    whole, blocks = split(1 << 20), split(37)  # one block; many, cut inside tasks
    for name in ("train", "val", "test"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(blocks, name))
    idx = fs.index().records
    labelled = np.flatnonzero(np.isfinite(idx["label"]))
    parts = np.concatenate([whole.train, whole.val, whole.test])
    assert len(parts) == len(np.unique(parts)) == whole.labelled and set(parts) == set(labelled)
    n_train = len(whole.train) + len(whole.val)
    if val_by_task:
        assert not set(idx["task_id"][whole.val]) & set(idx["task_id"][whole.train])
    else:
        assert len(whole.val) == round(0.2 * n_train)  # exactly the fraction, as a permutation would give
        other = sr.split_rows(fs, parse_split(SPLIT), 8, 0.2, False, len(tables.task_keys), nets)
        assert not np.array_equal(other.val, whole.val)  # the seed picks them

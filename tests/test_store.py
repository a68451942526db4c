import h5py
import numpy as np
import pytest

from pruner_offline.devices import device_to_json, get_device
from pruner_offline.store.merge import combine, merge, merge_stores
from pruner_offline.store.parts import check_manifest, done_indices, read_part, write_part
from pruner_offline.store.reader import FeatureStore
from pruner_offline.store.schema import LazyUnit, StoreError, UnitFeatures
from pruner_offline.store.writer import CHUNK_BYTES, assemble, write_store


def _unit(seed: int, n: int, name: str) -> UnitFeatures:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 5, n).astype(np.int32)
    s = int(counts.sum())
    arrays = {
        "line": np.arange(1, n + 1, dtype=np.int32), "position": np.arange(n, dtype=np.int32),
        "label": rng.random(n).astype(np.float32), "cost": rng.random(n), "error_no": np.zeros(n, np.int32),
        "stmt_count": counts, "draft_score": rng.random(n).astype(np.float32),
        "statements": rng.random((s, 174)).astype(np.float32), "symbols": rng.random((s, 11)).astype(np.float32),
        "dataflow": rng.random((n, 8, 23)).astype(np.float32),
        "steps": rng.random((n, 64, 37)).astype(np.float32),
    }
    return UnitFeatures(name, "dev", f'["k{seed}"]', "llvm", arrays, [(n + 1, "replay: boom")], n + 1)


META = {"feature_schema": "test-1", "settings": {"device": "k80"}}


def test_parts_round_trip_and_assemble_in_file_order(tmp_path):
    parts = tmp_path / "parts"
    check_manifest(parts, {"a": 1})
    units = {i: _unit(i, 3 + i, f"f{i}.json") for i in range(4)}
    for i in (2, 0, 3, 1):  # workers finish in any order
        write_part(parts, i, units[i])
    assert done_indices(parts) == {0, 1, 2, 3}
    back = read_part(parts / "0000002.npz")
    assert back.file == "f2.json" and back.failures == [(6, "replay: boom")]
    np.testing.assert_array_equal(back.arrays["statements"], units[2].arrays["statements"])
    out = tmp_path / "s.h5"
    assemble(out, [(i, parts / f"{i:07d}.npz") for i in (3, 1, 0, 2)], META, {'["k1"]|llvm': {"mlp": 2}})
    store = FeatureStore(out, expect_schema="test-1")
    data = store.load()
    assert data.n_records == sum(3 + i for i in range(4))
    assert data.file_paths == ["f0.json", "f1.json", "f2.json", "f3.json"]
    assert data.task_networks[1] == {"mlp": 2}
    off = data.records["stmt_offset"]
    row = 3  # first record of f1 (f0 has 3)
    np.testing.assert_array_equal(data.statements[off[row]:off[row + 1]],
                                  units[1].arrays["statements"][: units[1].arrays["stmt_count"][0]])
    assert store.meta["settings"] == {"device": "k80"}
    assert len(store.failures()) == 4


def test_a_manifest_with_other_settings_refuses_to_resume(tmp_path):
    check_manifest(tmp_path / "p", {"device": "k80"})
    check_manifest(tmp_path / "p", {"device": "k80"})
    with pytest.raises(StoreError, match="device"):
        check_manifest(tmp_path / "p", {"device": "a100"})


def test_shards_merge_into_the_whole(tmp_path):
    units = [(i, _unit(i, 5, f"f{i}.json")) for i in range(5)]
    whole = tmp_path / "whole.h5"
    write_store(whole, units, META, {})
    shards = []
    for k in range(2):
        p = tmp_path / f"s{k}.h5"
        write_store(p, [u for u in units if u[0] % 2 == k], {**META, "shard": f"{k}/2"}, {})
        shards.append(p)
    merged = tmp_path / "merged.h5"
    assert merge(merged, shards) == 25
    assert merge_stores(tmp_path / "merged2.h5", shards) == (25, "shards")  # what `pruner-train merge` calls
    assert (tmp_path / "merged2.h5").read_bytes() == merged.read_bytes()
    a, b = FeatureStore(whole).load(), FeatureStore(merged).load()
    for k in a.records:
        np.testing.assert_array_equal(a.records[k], b.records[k])
    np.testing.assert_array_equal(a.statements, b.statements)
    assert a.file_paths == b.file_paths
    with pytest.raises(StoreError, match="also in another shard"):
        merge(tmp_path / "x.h5", [shards[0], shards[0]])
    shuffled = tmp_path / "shuffled.h5"  # a damaged store cannot be split back into its files
    write_store(shuffled, units[:2], {**META, "shard": "0/2"}, {})
    with h5py.File(shuffled, "a") as f:
        f["records/file_id"][...] = f["records/file_id"][...][::-1]
    with pytest.raises(StoreError, match="not in file order"):
        merge(tmp_path / "z.h5", [shuffled])
    other = tmp_path / "other.h5"
    write_store(other, units[:1], {**META, "feature_schema": "test-2"}, {})
    with pytest.raises(StoreError, match="feature_schema"):
        merge(tmp_path / "y.h5", [shards[1], other])


def test_stores_of_two_datasets_combine_into_one_training_store(tmp_path):
    devices = {"llvm": device_to_json(get_device("epyc-2vcpu"))}
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    write_store(a, [(i, _unit(i, 4, f"f{i}.json")) for i in range(2)],
                {**META, "devices": devices, "dataset": "/data/tenset-mini", "source_fingerprint": "aa"},
                {'["k1"]|llvm': {"resnet": 1}})
    # the other dataset holds one of a's workloads (k1) under a file of the same name
    write_store(b, [(i, _unit(i + 1, 3, f"f{i}.json")) for i in range(2)],
                {**META, "devices": devices, "dataset": "/data/collection", "source_fingerprint": "bb"},
                {'["k1"]|llvm': {"bert": 2}})
    both = tmp_path / "both.h5"
    assert combine(both, [a, b]) == 14
    assert merge_stores(tmp_path / "both2.h5", [a, b]) == (14, "datasets")  # the sources' fingerprints differ
    store = FeatureStore(both)
    data = store.load()
    assert data.file_paths == ["tenset-mini/f0.json", "tenset-mini/f1.json", "collection/f0.json",
                               "collection/f1.json"]
    assert len(data.task_networks) == 3  # k0, k1 (both datasets), k2
    assert {"resnet": 1, "bert": 2} in data.task_networks
    assert store.meta["source_kind"] == "combined" and store.meta["devices"] == devices
    assert [p["records"] for p in store.meta["combined_from"]] == [8, 6]
    np.testing.assert_array_equal(data.records["label"][8:], FeatureStore(b).load().records["label"])
    assert [f[0] for f in store.failures()] == data.file_paths
    other = tmp_path / "other.h5"
    write_store(other, [(0, _unit(5, 3, "g.json"))], {**META, "devices": {"llvm": device_to_json(get_device("epyc-7452"))},
                                                      "source_fingerprint": "cc"}, {})
    with pytest.raises(StoreError, match="other devices"):
        combine(tmp_path / "x.h5", [a, other])


def test_the_writer_holds_one_unit_at_a_time_in_whole_row_chunks(tmp_path):
    units = [(i, _unit(i, 40 + i, f"f{i}.json")) for i in range(4)]
    loaded = []

    def load(unit: UnitFeatures) -> UnitFeatures:
        # every earlier unit has been written (and can be freed) before the next one is read
        loaded.append(unit.file)
        return UnitFeatures(unit.file, unit.device, unit.workload_key, unit.target_kind,
                            {k: v.copy() for k, v in unit.arrays.items()}, unit.failures, unit.records_read)

    lazy = [(i, LazyUnit(u.header, lambda u=u: load(u))) for i, u in units]
    write_store(tmp_path / "lazy.h5", lazy, META, {})
    assert loaded == [f"f{i}.json" for i in range(4)]
    write_store(tmp_path / "eager.h5", units, META, {})
    a, b = FeatureStore(tmp_path / "lazy.h5").load(), FeatureStore(tmp_path / "eager.h5").load()
    for k in a.records:
        np.testing.assert_array_equal(a.records[k], b.records[k])
    for k in ("statements", "symbols", "dataflow", "steps"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))
    np.testing.assert_array_equal(a.statements[:len(units[0][1].arrays["statements"])], units[0][1].arrays["statements"])
    with h5py.File(tmp_path / "lazy.h5") as f:
        for name in ("statements", "steps", "records/label"):
            chunks, shape = f[name].chunks, f[name].shape
            assert chunks[1:] == shape[1:]  # whole rows: reading records never decompresses other columns
            assert f[name].dtype.itemsize * np.prod(chunks) <= CHUNK_BYTES
    # a unit that is not what its header said (a part replaced mid-write) is refused
    bad = [(0, LazyUnit(units[0][1].header, lambda: units[1][1]))]
    with pytest.raises(StoreError, match="changed while the store was written"):
        write_store(tmp_path / "bad.h5", bad, META, {})
    assert not (tmp_path / "bad.h5").exists()


def test_the_layout_check_reads_columns_in_blocks_and_still_finds_a_bad_offset(tmp_path, monkeypatch):
    from pruner_offline.store import reader

    monkeypatch.setattr(reader, "BLOCK", 4)  # many blocks; the damage is in a late one
    p = tmp_path / "s.h5"
    write_store(p, [(i, _unit(i, 6, f"f{i}.json")) for i in range(3)], META, {})
    FeatureStore(p)
    with h5py.File(p, "a") as f:
        f["records/stmt_offset"][15] += 1
    with pytest.raises(StoreError, match="stmt_offset"):
        FeatureStore(p)
    write_store(p, [(i, _unit(i, 6, f"f{i}.json")) for i in range(3)], META, {})
    with h5py.File(p, "a") as f:
        f["records/task_id"][17] = 9
    with pytest.raises(StoreError, match="task_id: ids outside"):
        FeatureStore(p)


def test_damaged_or_foreign_stores_are_refused(tmp_path):
    p = tmp_path / "s.h5"
    write_store(p, [(0, _unit(0, 4, "f.json"))], META, {})
    with pytest.raises(StoreError, match="schema 'test-1'.*featurize the dataset again"):
        FeatureStore(p, expect_schema="v9")
    with h5py.File(p, "a") as f:
        del f["dataflow"]
        f.create_dataset("dataflow", data=np.zeros((1, 8, 23), np.float32))
    with pytest.raises(StoreError, match="inconsistent arrays: dataflow"):
        FeatureStore(p)
    (tmp_path / "junk.h5").write_bytes(b"not hdf5 at all")
    with pytest.raises(StoreError, match="cannot read HDF5"):
        FeatureStore(tmp_path / "junk.h5")
    with h5py.File(tmp_path / "foreign.h5", "w") as f:
        f["x"] = 1
    with pytest.raises(StoreError, match="not a pruner-offline feature store"):
        FeatureStore(tmp_path / "foreign.h5")

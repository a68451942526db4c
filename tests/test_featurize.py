import json
import os
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from pruner_offline.build_store import FeaturizeSettings, run_featurize
from pruner_offline.features import EXTRACTABLE_SCHEMAS, FEATURE_SCHEMA_VERSION
from pruner_offline.store.merge import merge
from pruner_offline.store.reader import FeatureStore

SMALL = ("8c53ca2904398da2889aa7508082d7bb", "7d79c516e212fe1d73f5dbb90eaca2cf")  # pools and softmaxes


@pytest.fixture(scope="module")
def small_dataset(tenset_mini, tmp_path_factory):
    """Four real llvm record files (239 records), one real cuda file, and the real task pickles."""
    root = tmp_path_factory.mktemp("ds") / "mini"
    dev = root / "measure_records" / "epyc-zen3"
    dev.mkdir(parents=True)
    for f in (tenset_mini / "measure_records" / "epyc-zen3").glob("*.json"):
        if any(h in f.name for h in SMALL):
            shutil.copy(f, dev / f.name)
    (root / "to_measure_programs").mkdir()
    cuda = next(f for f in (tenset_mini / "to_measure_programs").glob("*.json") if SMALL[0] in f.name)
    shutil.copy(cuda, root / "to_measure_programs" / cuda.name)
    shutil.copytree(tenset_mini / "network_info", root / "network_info")
    for p in root.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return root


def _arrays(path):
    with h5py.File(path, "r") as f:
        out = {}
        f.visititems(lambda name, obj: out.__setitem__(name, obj[...]) if isinstance(obj, h5py.Dataset) else None)
        return out


def _same(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.fixture(scope="module")
def whole(small_dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("whole") / "whole.h5"
    report = run_featurize(FeaturizeSettings(str(small_dataset), include_unmeasured=True), out)
    return out, report


def test_featurize_real_records(whole):
    out, report = whole
    assert report.records == 24 + 23 + 96 + 96 + 100
    assert report.replayed == report.records and report.failed == 0
    data = FeatureStore(out, expect_schema=FeatureStore(out).meta["feature_schema"]).load()
    assert data.n_records == report.records
    assert data.statements.shape[1] == 174 and data.symbols.shape[1] == 11
    assert data.dataflow.shape[1:] == (8, 23)
    assert np.isfinite(data.statements).all() and np.isfinite(data.records["draft_score"]).all()
    labels = data.records["label"]
    measured = np.array([d != "(unmeasured)" for d in data.file_devices])[data.records["file_id"]]
    assert np.isnan(labels[~measured]).all()
    assert (labels[measured] > 0).all() and labels[measured].max() == pytest.approx(1.0)
    assert data.task_networks[0]  # networks and weights travel with the store
    assert data.file_paths[0].startswith("measure_records/epyc-zen3/")


def test_killed_run_resumes_to_the_same_store(small_dataset, whole, tmp_path):
    out = tmp_path / "resumed.h5"
    cmd = [sys.executable, "-m", "pruner_offline.cli", "featurize", str(small_dataset), "--out", str(out),
           "--include-unmeasured", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    parts = tmp_path / "resumed.h5.parts"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(parts.glob("*.npz"))) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(list(parts.glob("*.npz")))
    assert 2 <= done < 5 and not out.exists(), "the run was not cut part way"
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert report["records"] == whole[1].records and report["processed"] < report["records"]
    _same(_arrays(whole[0]), _arrays(out))
    assert not parts.exists()


def test_shards_merge_to_the_whole(small_dataset, whole, tmp_path):
    shards = []
    for i in range(2):
        p = tmp_path / f"shard{i}.h5"
        run_featurize(FeaturizeSettings(str(small_dataset), include_unmeasured=True, shard=(i, 2)), p)
        shards.append(p)
    merged = tmp_path / "merged.h5"
    merge(merged, shards[::-1])
    a, b = _arrays(whole[0]), _arrays(merged)
    _same(a, b)
    # the README's claim: what a local run writes, byte for byte (the shard attribute and the order
    # of the attributes differed)
    assert merged.read_bytes() == whole[0].read_bytes()
    with pytest.warns(UserWarning, match="merging 1 of 2 shards: 0/2 is missing, so their records are not in"):
        merge(tmp_path / "half.h5", shards[1:])


def test_more_shards_than_record_files_still_merge_to_the_whole(small_dataset, whole, tmp_path):
    # a shard with no file of its own failed ("nothing to featurize"), and so did the merge after it
    from pruner_offline.sources import open_source

    n = len(open_source(small_dataset).units(None, True)) + 2
    shards = [tmp_path / f"s{i}.h5" for i in range(n)]
    for i, p in enumerate(shards):
        run_featurize(FeaturizeSettings(str(small_dataset), include_unmeasured=True, shard=(i, n)), p)
    assert FeatureStore(shards[-1]).tables().n_records == 0
    merged = tmp_path / "merged.h5"
    merge(merged, shards)
    assert merged.read_bytes() == whole[0].read_bytes()


def test_resuming_with_other_settings_is_refused(small_dataset, tmp_path):
    parts = tmp_path / "s.h5.parts"
    parts.mkdir()
    (parts / "manifest.json").write_text(json.dumps({"gpu": "h200"}))
    with pytest.raises(Exception, match="interrupted run with other settings"):
        run_featurize(FeaturizeSettings(str(small_dataset)), tmp_path / "s.h5")


def test_ray_gives_the_local_store_byte_for_byte_and_resumes(small_dataset, whole, tmp_path):
    """`featurize --ray`: the same units as Ray tasks on a local instance, each writing its part;
    an interrupted run (here: two parts already written) resumes from the parts."""
    pytest.importorskip("ray", reason="Ray is an extra: pip install 'pruner-offline[ray]'")
    from pruner_offline.build_store import _work, plan_units
    from pruner_offline.executors import RayExecutor
    from pruner_offline.sources import open_source
    from pruner_offline.store.parts import check_manifest

    settings = FeaturizeSettings(str(small_dataset), include_unmeasured=True)
    out = tmp_path / "ray.h5"
    parts = tmp_path / "ray.h5.parts"
    source = open_source(settings.dataset)
    units = plan_units(source, settings)
    check_manifest(parts, settings.manifest([u.name for u in units]))
    for u in units[:2]:  # what a run stopped part way leaves behind
        _work((source, settings, u, parts))
    report = run_featurize(settings, out, executor=RayExecutor(num_cpus=2))
    assert report.records == whole[1].records and 0 < report.processed < report.records
    assert out.read_bytes() == whole[0].read_bytes()
    assert not parts.exists()


def test_the_feature_schema_picks_the_per_store_extractor(small_dataset, whole, tmp_path):
    """--feature-schema picks who computes the 164 per-store columns (2: MetaSchedule's
    PerStoreFeature, what models trained before schema 3 read; 3: the package's own extractor);
    every other array of the two stores is the same."""
    other = next(s for s in EXTRACTABLE_SCHEMAS if s != FEATURE_SCHEMA_VERSION)
    out = tmp_path / "other.h5"
    code = subprocess.run([sys.executable, "-m", "pruner_offline.cli", "featurize", str(small_dataset), "--out",
                           str(out), "--include-unmeasured", "--feature-schema", str(other), "--quiet"],
                          capture_output=True, text=True)
    assert code.returncode == 0, code.stderr
    assert FeatureStore(out).meta["feature_schema"] == str(other)
    assert FeatureStore(whole[0]).meta["feature_schema"] == str(FEATURE_SCHEMA_VERSION)
    theirs, ours = _arrays(out), _arrays(whole[0])
    assert sorted(theirs) == sorted(ours)
    for name in ("symbols", "steps", "records/label", "records/draft_score"):
        np.testing.assert_array_equal(theirs[name], ours[name], err_msg=name)
    np.testing.assert_array_equal(theirs["statements"][:, 164:], ours["statements"][:, 164:])
    assert not np.array_equal(theirs["statements"][:, :164], ours["statements"][:, :164])

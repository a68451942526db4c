import numpy as np
import pytest
import torch

from pruner_offline.models.batch import Batch
from pruner_offline.models.losses import lambda_rank, mse, pairwise_logistic
from pruner_offline.models.metrics import ndcg, pairwise_accuracy, peak_score, ranking_report, topk_score
from pruner_offline.models.registry import build_model


def test_peak_score_by_hand():
    y = np.array([0.2, 1.0, 0.5, 0.1, 1.0, 0.5])
    task = np.array([0, 0, 0, 0, 1, 1])
    worst_first = -y
    # task 0 picks y=0.1 first (0.1/1), task 1 picks 0.5 (0.5/1); weights 4 and 2
    assert peak_score(worst_first, y, task, 1) == pytest.approx((0.1 * 4 + 0.5 * 2) / 6)
    # @5, task 0 (4 records): running best 0.1,0.2,0.5,1.0 then 1.0 for the 5th slot
    t0 = (0.1 + 0.2 + 0.5 + 1.0 + 1.0) / 5
    t1 = (0.5 + 1.0 + 1.0 + 1.0 + 1.0) / 5
    assert peak_score(worst_first, y, task, 5) == pytest.approx((t0 * 4 + t1 * 2) / 6)
    assert peak_score(y, y, task, 1) == 1.0


def test_topk_score_uses_network_weights():
    cost = np.array([1.0, 2.0, 4.0, 3.0])
    task = np.array([0, 0, 1, 1])
    pred = np.array([0.0, 1.0, 0.0, 1.0])  # picks cost 2 for task 0 and 3 for task 1
    weights = {"a": {0: 1.0}, "b": {0: 1.0, 1: 3.0}}
    a = 1.0 / 2.0
    b = (1.0 * 1.0 + 3.0 * 3.0) / (1.0 * 2.0 + 3.0 * 3.0)
    assert topk_score(pred, cost, task, 1, weights) == pytest.approx((a + b) / 2)
    assert topk_score(pred, cost, task, 2, weights) == pytest.approx(1.0)


def test_pairwise_and_ndcg():
    y = np.array([0.1, 0.5, 1.0, 0.5])
    task = np.zeros(4, int)
    assert pairwise_accuracy(y, y, task) == 1.0
    assert pairwise_accuracy(-y, y, task) == 0.0
    assert ndcg(y, y, task, 10) == pytest.approx(1.0)
    assert ndcg(-y, y, task, 10) < 0.9
    rep = ranking_report(y, y, 1 / y, task)
    assert set(rep) == {"peak@1", "peak@5", "topk@1", "topk@5", "pairwise_acc", "ndcg@10"}


def test_losses_prefer_the_right_order():
    y = torch.tensor([0.1, 0.5, 1.0, 0.3])
    good, bad = y * 10, -y * 10
    for loss in (lambda_rank, pairwise_logistic):
        assert loss(good, y) < loss(bad, y)
    p = torch.zeros(4, requires_grad=True)
    lambda_rank(p, y).backward()
    assert p.grad[2] < 0 < p.grad[0]  # gradient descent raises the best, lowers the worst
    assert mse(y, y) == 0


def _batch(n=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    counts = torch.tensor([1, 3, 2, 1, 4][:n])
    s = int(counts.sum())
    flow = torch.rand(n, 8, 23, generator=g)
    flow[0] = 0  # a program without the dataflow pattern
    steps = torch.rand(n, 64, 37, generator=g)
    steps[:, 30:] = 0
    return Batch(torch.rand(s, 174, generator=g), torch.rand(s, 11, generator=g),
                 torch.repeat_interleave(torch.arange(n), counts), flow, steps, torch.rand(n, generator=g),
                 torch.rand(n, generator=g), torch.zeros(n, dtype=torch.long))


@pytest.mark.parametrize("name, max_params", [("pacm", 500_000), ("mlp", 350_000), ("draft", 20_000),
                                              ("tlp", 200_000)])
def test_models_score_ragged_batches(name, max_params):
    model = build_model(name).eval()
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params <= max_params
    out = model(_batch())
    assert out.shape == (5,) and torch.isfinite(out).all()
    # a program's score does not depend on the other programs in the batch (eval mode)
    b = _batch()
    keep = b.segment < 2
    first_two = Batch(b.statements[keep], b.symbols[keep], b.segment[keep], b.dataflow[:2], b.steps[:2],
                      b.draft_score[:2], b.y[:2], b.task[:2])
    assert torch.allclose(model(first_two), out[:2], atol=1e-5)


def test_pacm_is_published_size():
    n = sum(p.numel() for p in build_model("pacm").parameters())
    assert 350_000 < n < 450_000  # ~0.4 M as published

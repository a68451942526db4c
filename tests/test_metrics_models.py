import numpy as np
import pytest
import torch

from pruner_offline.models.batch import Batch
from pruner_offline.models.losses import LOSSES, lambda_rank, mse, pairwise_logistic
from pruner_offline.models.metrics import ndcg, pairwise_accuracy, peak_score, ranking_report, topk_score
from pruner_offline.errors import BadInput
from pruner_offline.models.registry import build_model
from pruner_offline.training.module import CostModelModule


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


def test_task_losses_compare_records_of_one_task_only():
    # two tasks whose labels interleave: each task is ranked right, but across tasks the
    # scores put every record of task 1 above task 0's best
    y = torch.tensor([1.0, 0.2, 0.6, 0.5])
    task = torch.tensor([0, 0, 1, 1])
    pred = torch.tensor([1.0, 0.0, 11.0, 10.0])
    for name in ("lambdarank", "pairwise"):
        assert LOSSES[name + "_task"](pred, y, task) < 0.5 * LOSSES[name](pred, y, task)
    # within one task, LambdaRank is the one-list loss; over several, the per-task losses
    # weighted by their pairs
    g = torch.Generator().manual_seed(0)
    p, y, task = torch.randn(40, generator=g), torch.rand(40, generator=g), torch.randint(0, 3, (40,), generator=g)
    pairs = [int((y[task == t][:, None] > y[task == t][None, :]).sum()) for t in range(3)]
    by_task = sum(lambda_rank(p[task == t], y[task == t]) * n for t, n in enumerate(pairs)) / sum(pairs)
    assert lambda_rank(p, y, task) == pytest.approx(float(by_task), rel=1e-5)
    assert lambda_rank(p, y, torch.zeros(40, dtype=torch.long)) == pytest.approx(float(lambda_rank(p, y)), rel=1e-5)


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


def test_width_scales_the_hidden_layers():
    wide = build_model("pacm", width=2.0)
    assert wide.statement[0].out_features == 512 and wide.flow_attn.attn.embed_dim == 256
    assert build_model("draft", width=0.5).statement[0].out_features == 16
    with pytest.raises(BadInput, match="model.width"):
        CostModelModule(model="pacm", width=0.0)


@pytest.mark.parametrize("name", ["pacm", "draft"])
def test_draft_prior_adds_the_analytic_score(name):
    torch.manual_seed(0)
    plain, prior = build_model(name).eval(), build_model(name, draft_prior=True).eval()
    # one extra input column and one weight: the learned part is the same network
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    extra_inputs = next(m for m in prior.head.modules() if isinstance(m, torch.nn.Linear)).out_features
    assert n(prior) == n(plain) + (extra_inputs if name == "pacm" else 0) + 1
    # with the learned part silenced, the model ranks exactly as the analytic draft score
    last = [m for m in prior.head.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.zero_()
    b = _batch()
    assert torch.allclose(prior(b), 16.0 * b.draft_score)


def test_pacm_scores_with_its_correction_scaled_and_trains_it_whole():
    from pruner_offline.training.module import CostModelModule

    torch.manual_seed(0)
    module = CostModelModule("pacm", draft_prior=True, correction_scale=0.25).eval()
    b = _batch()
    with torch.no_grad():
        fitted, scored = module.fitted(b), module(b)
        prior = module.net.prior.weight * module.normalized(b).draft_score
    assert not torch.allclose(fitted, prior)  # an untrained correction is not zero
    assert torch.allclose(scored, prior + 0.25 * (fitted - prior), atol=1e-5)
    # the loss sees the correction whole: a training step moves the same weights whatever the scale
    whole = CostModelModule("pacm", draft_prior=True, correction_scale=1.0)
    whole.load_state_dict(module.state_dict())
    whole.correction_scale.fill_(1.0)  # the state dict carried the 0.25 over
    assert float(module.correction_scale) == 0.25
    for m in (module, whole):
        m.train()
        m.training_step(b, 0).backward()
    grads = [[p.grad for p in m.parameters()] for m in (module, whole)]
    assert all(torch.equal(g, h) for g, h in zip(*grads))
    # measured for PaCM with the prior only: other models, and files from before it, score at 1
    assert CostModelModule("mlp", correction_scale=0.25).hparams.correction_scale == 1.0
    assert CostModelModule("draft", draft_prior=True, correction_scale=0.25).hparams.correction_scale == 1.0
    assert CostModelModule("pacm", draft_prior=True).hparams.correction_scale == 1.0
    with pytest.raises(ValueError, match="correction_scale must be in"):
        CostModelModule("pacm", draft_prior=True, correction_scale=2.0)

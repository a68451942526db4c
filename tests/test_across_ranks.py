"""A ranking loss and BatchNorm under DDP (training/across_ranks.py, models/layers.py): two ranks
holding uneven halves of a batch take the optimizer step one process takes on the whole batch."""

import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from pruner_offline.models.layers import BatchNormAcrossRanks
from pruner_offline.models.losses import LOSSES
from pruner_offline.training.across_ranks import whole_batch

SPLIT = 23  # rank 0 holds the first 23 records, rank 1 the other 41


def _batch() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), BatchNormAcrossRanks(8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    torch.manual_seed(0)
    model.apply(lambda m: m.reset_parameters() if isinstance(m, torch.nn.Linear) else None)
    x = torch.randn(64, 6, generator=g)
    y = torch.rand(64, generator=g)
    task = torch.randint(0, 5, (64,), generator=g)
    return model, x, y, task


def _grad(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def _rank(rank: int, port: int, loss_name: str, out: dict) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        model, x, y, task = _batch()
        part = slice(0, SPLIT) if rank == 0 else slice(SPLIT, None)
        pred, y_all, task_all, factor = whole_batch(model(x[part]).squeeze(1), y[part], task[part])
        loss = LOSSES[loss_name](pred, y_all, task_all)
        (loss * factor).backward()
        grad = _grad(model)
        dist.all_reduce(grad)  # what DDP does: the mean of the ranks' gradients
        out[rank] = (loss.item(), (grad / 2).tolist(), len(y_all), model[1].running_var.tolist())
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("loss_name", ["lambdarank_task", "pairwise_task"])
def test_two_ranks_step_as_one_process(loss_name):
    model, x, y, task = _batch()
    loss = LOSSES[loss_name](model(x).squeeze(1), y, task)
    loss.backward()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = mp.Manager().dict()
    mp.spawn(_rank, args=(port, loss_name, out), nprocs=2)
    for rank in (0, 1):
        ranked_loss, grad, records, running_var = out[rank]
        assert records == 64
        assert torch.tensor(running_var) == pytest.approx(model[1].running_var, rel=1e-5)
        assert ranked_loss == pytest.approx(loss.item(), rel=1e-5)
        assert torch.tensor(grad) == pytest.approx(_grad(model), rel=1e-4, abs=1e-7)


def test_one_process_is_left_alone():
    pred, y, task = torch.randn(5, requires_grad=True), torch.rand(5), torch.zeros(5, dtype=torch.long)
    got = whole_batch(pred, y, task)
    assert got[0] is pred and got[1] is y and got[2] is task and got[3] == 1.0

"""The global batch of a DDP step, for a loss that compares records with each other.

A ranking loss is not a mean over records: LambdaRank weighs each pair by the NDCG change of its
task's list, and normalises by the pairs in the batch. Each of N ranks holding 1/N of the global
batch would rank lists 1/N as long, a different objective (2 CPU processes trained 0.078 peak@1
worse than one). So every rank scores the lists of the whole global batch: the other ranks'
predictions come in without gradient, its own keep theirs, and the loss is multiplied by N, so
that DDP's mean of the ranks' gradients is the gradient of the global loss, as in one process.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def _gather(x: torch.Tensor, sizes: list[int]) -> list[torch.Tensor]:
    """Every rank's ``x`` (1-D, of length ``sizes[rank]``), padded for the collective, trimmed back."""
    padded = torch.zeros(max(sizes), dtype=x.dtype, device=x.device)
    padded[:len(x)] = x
    out = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(out, padded)
    return [o[:n] for o, n in zip(out, sizes)]


def whole_batch(pred: torch.Tensor, y: torch.Tensor,
                task: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """(predictions, labels, tasks of the global batch, the factor for the loss). In one process:
    the inputs and 1. Ranks' batches may differ in size by a few records."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return pred, y, task, 1.0
    world, rank = dist.get_world_size(), dist.get_rank()
    size = torch.tensor([len(pred)], dtype=torch.long, device=pred.device)
    counts = [torch.empty_like(size) for _ in range(world)]
    dist.all_gather(counts, size)
    sizes = [int(c) for c in counts]
    preds = _gather(pred.detach(), sizes)
    preds[rank] = pred
    return (torch.cat(preds), torch.cat(_gather(y, sizes)), torch.cat(_gather(task, sizes)), float(world))

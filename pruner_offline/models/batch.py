"""A mini-batch of records as every model sees it: ragged statements flattened with segment ids."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch


@dataclass
class Batch:
    statements: torch.Tensor  # [S, stmt_dim], normalized
    symbols: torch.Tensor  # [S, 11] PSA symbols, normalized
    segment: torch.Tensor  # [S] long: the record each statement row belongs to
    dataflow: torch.Tensor  # [B, 8, 23], normalized
    steps: torch.Tensor  # [B, L, step_dim], normalized
    draft_score: torch.Tensor  # [B] analytic draft score (log-scaled)
    y: torch.Tensor  # [B] labels
    task: torch.Tensor  # [B] long task ids (for metrics)

    @property
    def size(self) -> int:
        return int(self.y.shape[0])

    def to(self, device: torch.device) -> "Batch":
        return Batch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

"""PaCM: statement branch + temporal-dataflow attention branch + ranking head (Pruner, ASPLOS'25).

With ``use_dataflow=False`` it is the TenSet-MLP baseline: the statement branch alone.

``draft_prior``: the (log-scaled) analytic draft score enters the head and is added to its output
with a learned weight, so the model starts from a prior that needs no training data and learns a
correction. The analytic score ranks programs of workloads no training set held; the learned
branches alone fit the workloads they saw. ``correction_scale`` weighs the correction against the
prior when scoring (training fits it at scale 1; ``training.module`` says which scale predicts).
"""

from __future__ import annotations

import torch
from torch import nn

from .batch import Batch
from .layers import DraftPrior, RankHead, TokenAttention, mlp, segment_sum


class PaCM(nn.Module):
    def __init__(self, stmt_dim: int = 174, flow_dim: int = 23, hidden: int = 256, flow_hidden: int = 128,
                 heads: int = 4, use_dataflow: bool = True, draft_prior: bool = False):
        super().__init__()
        self.use_dataflow = use_dataflow
        self.draft_prior = draft_prior
        self.statement = mlp([stmt_dim, hidden, hidden])
        head_in = hidden
        if use_dataflow:
            self.flow = mlp([flow_dim, 64, flow_hidden])
            self.flow_attn = TokenAttention(flow_hidden, heads)
            head_in += flow_hidden
        if draft_prior:
            head_in += 1
            self.prior = DraftPrior()
        self.head = RankHead(head_in, hidden)

    def forward(self, b: Batch, correction_scale: float = 1.0) -> torch.Tensor:
        x = segment_sum(self.statement(b.statements), b.segment, b.size)
        if self.use_dataflow:
            pad = (b.dataflow == 0).all(dim=-1)
            x = torch.cat([x, self.flow_attn(self.flow(b.dataflow), pad)], dim=-1)
        if self.draft_prior:
            d = b.draft_score
            return self.prior(self.head(torch.cat([x, d.unsqueeze(-1)], dim=-1)), d, correction_scale)
        return self.head(x)

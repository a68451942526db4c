"""Model names as the CLI and checkpoints spell them."""

from __future__ import annotations

from torch import nn

from .draft import DraftModel
from .pacm import PaCM
from .tlp import TLPModel

# name -> (class, fixed keyword arguments)
NEURAL_MODELS: dict[str, tuple[type, dict]] = {
    "pacm": (PaCM, {}),
    "mlp": (PaCM, {"use_dataflow": False}),  # TenSet-MLP: PaCM's statement branch alone
    "draft": (DraftModel, {}),
    "tlp": (TLPModel, {}),
}
MODEL_NAMES = tuple(NEURAL_MODELS) + ("gbdt",)


def build_model(name: str, **kwargs) -> nn.Module:
    try:
        cls, fixed = NEURAL_MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(NEURAL_MODELS)}") from None
    return cls(**{**kwargs, **fixed})

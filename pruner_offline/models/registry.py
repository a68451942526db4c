"""The models by the names the CLI and model files spell, each with what it is and can do, so that
the rest of the tree asks the registry instead of testing names."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Optional

from torch import nn

from .draft import DraftModel
from .pacm import PaCM
from .tlp import TLPModel


@dataclass(frozen=True)
class ModelSpec:
    name: str
    network: Optional[type]  # the torch module; None for a model that is not a neural network
    fixed: dict = field(default_factory=dict)  # keyword arguments this name fixes
    reads: tuple[str, ...] = ()  # feature groups whose widths it is built with: stmt, flow, symbol, step
    draft_prior: bool = False  # may add the analytic draft score to its output (models/pacm.py)
    scaled_correction: bool = False  # its learned correction is scored at the recipe's correction_scale
    recipes: tuple[str, ...] = ("pretrain.yaml",)  # training/ recipes, layered in order
    scores_in_tune: bool = False  # a model file of it can score every candidate: tune --cost-model NAME

    @property
    def reads_steps(self) -> bool:
        # the step vectors are most of a store's bytes and only TLP reads them
        return "step" in self.reads


MODELS: dict[str, ModelSpec] = {s.name: s for s in (
    ModelSpec("pacm", PaCM, reads=("stmt", "flow"), draft_prior=True, scaled_correction=True),
    # TenSet-MLP: PaCM's statement branch alone
    ModelSpec("mlp", PaCM, {"use_dataflow": False}, reads=("stmt",), scores_in_tune=True),
    ModelSpec("draft", DraftModel, reads=("symbol",), draft_prior=True, recipes=("pretrain.yaml", "draft.yaml")),
    ModelSpec("tlp", TLPModel, reads=("step",)),
    ModelSpec("gbdt", None, scores_in_tune=True),  # scikit-learn trees on pooled statements (models/gbdt.py)
)}
MODEL_NAMES = tuple(MODELS)
HIDDEN_WIDTHS = ("hidden", "flow_hidden")  # the networks' keyword arguments that ``width`` scales
NEURAL_MODEL_NAMES = tuple(n for n, s in MODELS.items() if s.network is not None)


def model_spec(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}") from None


def build_model(name: str, dims: Optional[dict[str, int]] = None, draft_prior: bool = False,
                width: float = 1.0) -> nn.Module:
    """The network of model ``name``, given the width of every feature group (``dims``; None: the
    network's own defaults), its hidden layers ``width`` times as wide as the network's defaults."""
    spec = model_spec(name)
    if spec.network is None:
        raise ValueError(f"{name} is not a neural model; choose from {', '.join(NEURAL_MODEL_NAMES)}")
    kwargs = {f"{group}_dim": dims[group] for group in spec.reads} if dims else {}
    if spec.draft_prior:
        kwargs["draft_prior"] = draft_prior
    if width != 1.0:
        params = inspect.signature(spec.network).parameters
        # attention heads must divide a width: keep widths multiples of 8
        kwargs.update({k: max(8, 8 * round(params[k].default * width / 8)) for k in HIDDEN_WIDTHS if k in params})
    return spec.network(**kwargs, **spec.fixed)

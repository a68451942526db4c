"""Whole networks to tune from torch: a few built-in ones written with torch.nn, or a user's saved
torch.export program, imported with TVM's Relax torch frontend.

The built-in input shapes are small on purpose: a 2-core CPU tunes every kernel of a ResNet-18 at
64x64 pixels in minutes, where 224x224 would take hours for the same trial budget. Weights are
random (seeded): tuning depends on shapes, not on trained values.
"""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from pathlib import Path
from typing import Callable

import torch
from torch import nn
from tvm.relax.frontend.torch import from_exported_program

from ...errors import BadInput, why_not_loaded
from .network import Network


class MLP(nn.Module):
    """A three-layer perceptron on flattened 28x28 images."""

    def __init__(self, sizes: tuple[int, ...] = (784, 256, 128, 10)):
        super().__init__()
        layers: list[nn.Module] = []
        for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
            layers += [nn.Linear(n_in, n_out)] + ([nn.ReLU()] if i < len(sizes) - 2 else [])
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
                         if stride != 1 or c_in != c_out else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet18(nn.Module):
    """He et al.'s ResNet-18 (ImageNet stem, four stages of two basic blocks)."""

    def __init__(self, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, c_in = [], 64
        for c_out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(c_in, c_out, stride), BasicBlock(c_out, c_out, 1)]
            c_in = c_out
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.blocks(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class BertLayer(nn.Module):
    """One BERT-base encoder layer: 12-head self-attention and the 3072-wide GELU feed-forward, post-LN."""

    def __init__(self, hidden: int = 768, heads: int = 12, ffn: int = 3072):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, ffn)
        self.down = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        q, k, v = (t.reshape(batch, seq, self.heads, hidden // self.heads).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        scores = torch.softmax(q @ k.transpose(-1, -2) * (hidden // self.heads) ** -0.5, dim=-1)
        attended = (scores @ v).transpose(1, 2).reshape(batch, seq, hidden)
        x = self.ln1(x + self.out(attended))
        return self.ln2(x + self.down(nn.functional.gelu(self.up(x))))


# name -> (module, its input shape)
NETWORKS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "mlp": (MLP, (16, 784)),
    "resnet18": (ResNet18, (1, 3, 64, 64)),
    "bert-layer": (BertLayer, (1, 32, 768)),  # sequence length 32
}


def named_network(name: str, seed: int = 0) -> torch.export.ExportedProgram:
    """The built-in network `name`, exported with a seeded random input as its example input."""
    try:
        make, shape = NETWORKS[name]
    except KeyError:
        raise BadInput(f"unknown network {name!r}; built in: {', '.join(NETWORKS)}") from None
    torch.manual_seed(seed)
    model = make().eval()
    with torch.no_grad():
        return torch.export.export(model, (torch.randn(*shape),))


def _pickled_payloads(archive: zipfile.ZipFile, path: Path) -> list[str]:
    """The archive members torch.export.load would unpickle.

    Sample inputs and legacy payloads are ``.pt`` files; weights and constants are raw bytes unless
    their config marks them pickled. Custom and opaque objects are arbitrary pickles: refused.
    """
    names = archive.namelist()
    pickled = [n for n in names if n.endswith(".pt")]
    for name in names:
        folder, _, base = name.rpartition("/")
        if not (base.endswith("_config.json") and folder.endswith(("data/weights", "data/constants"))):
            continue
        try:
            entries = json.loads(archive.read(name))["config"]
        except (ValueError, KeyError, TypeError) as exc:
            raise BadInput(f"{path}: {name}: not a torch.export payload config ({exc})") from None
        for fqn, meta in entries.items():
            member = f"{folder}/{meta.get('path_name', '')}"
            if meta.get("path_name", "").startswith(("custom_obj_", "opaque_obj_")):
                raise BadInput(f"{path}: constant {fqn} is a pickled Python object; only tensors are accepted")
            if meta.get("use_pickle"):
                pickled.append(member)
    return pickled


def load_exported_program(path: str | Path) -> torch.export.ExportedProgram:
    """A program saved with torch.export.save, read without unpickling anything but plain tensors
    (torch.export.load itself unpickles with weights_only=False)."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"{path}: no such file")
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise BadInput(f"{path}: not a torch.export.save archive ({exc})") from None
    with archive:
        if not any(n.rpartition("/")[0].endswith("models") and n.endswith(".json") for n in archive.namelist()):
            raise BadInput(f"{path}: a zip archive, but it holds no exported program (no models/*.json)")
        for member in _pickled_payloads(archive, path):
            try:
                torch.load(io.BytesIO(archive.read(member)), map_location="cpu", weights_only=True)
            except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError) as exc:
                raise BadInput(f"{path}: {member} is not plain tensors; refusing to unpickle it "
                               f"({why_not_loaded(exc)})") from None
    try:
        program = torch.export.load(path)
    except Exception as exc:  # torch raises anything from a malformed archive
        raise BadInput(f"{path}: torch.export.load cannot read it: {type(exc).__name__}: {exc}") from None
    if not isinstance(program, torch.export.ExportedProgram):
        raise BadInput(f"{path}: holds a {type(program).__name__}, not an ExportedProgram")
    return program


def torch_network(program: torch.export.ExportedProgram, name: str) -> Network:
    """The program as a Relax module with its weights bound as constants, checked against torch's eager run."""
    try:
        mod = from_exported_program(program)
    except Exception as exc:  # the frontend raises anything (AssertionError, KeyError) on an op it lacks
        raise BadInput(f"{name}: TVM's Relax frontend cannot import it: {type(exc).__name__}: {exc}") from None

    def reference(inputs):
        with torch.no_grad():
            return program.module()(*(torch.as_tensor(x) for x in inputs))

    saved = None
    if program.example_inputs is not None and not program.example_inputs[1]:  # no keyword inputs
        saved = [torch.as_tensor(a) for a in program.example_inputs[0]]
    return Network(name, mod, reference, saved)

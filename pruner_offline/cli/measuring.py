"""Options and inputs that tune and collect share: the network to take kernels from, how to measure."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import BadInput
from .options import add_options, settings_from


def network_of(args: argparse.Namespace):
    """The whole network --network, --exported-program or --onnx names."""
    if args.onnx:
        from ..tuning.frontends.onnx_model import onnx_network

        return onnx_network(args.onnx, dict(args.input_shape or []))
    from ..tuning.frontends.torch_export import load_exported_program, named_network, torch_network

    program = named_network(args.network) if args.network else load_exported_program(args.exported_program)
    return torch_network(program, args.network or str(args.exported_program))


def measure_settings(args: argparse.Namespace, build_workers: int):
    from ..measure.settings import MeasureSettings, RPCSettings

    if (args.rpc_tracker is None) != (args.rpc_key is None):
        raise BadInput("--rpc-tracker and --rpc-key go together: the tracker's address and the devices' key")
    try:
        rpc = RPCSettings.parse(args.rpc_tracker, args.rpc_key, session_timeout_s=args.run_timeout_s) if args.rpc_tracker else None
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    return settings_from(MeasureSettings, args, build_workers=build_workers, rpc=rpc)


def measure_options(p: argparse.ArgumentParser) -> None:
    from ..measure.settings import MeasureSettings

    add_options(p, MeasureSettings, skip={"build_workers", "rpc"})
    p.add_argument("--rpc-tracker", metavar="HOST:PORT", help="measure on the devices of this TVM RPC tracker "
                   "(python -m tvm.exec.rpc_tracker; pip install 'pruner-offline[rpc]')")
    p.add_argument("--rpc-key", help="with --rpc-tracker: the key the devices' rpc_server registered with")


def network_inputs(what, verb: str) -> None:
    what.add_argument("--network", help=f"a built-in network, every kernel of it {verb}: mlp, resnet18, bert-layer")
    what.add_argument("--exported-program", type=Path, help="a whole network saved with torch.export.save (.pt2), "
                      f"every kernel of it {verb}")
    what.add_argument("--onnx", type=Path, help=f"a whole network in an ONNX file, every kernel of it {verb} "
                      "(pip install 'pruner-offline[onnx]')")


def input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """NAME=1x3x224x224 -> ("NAME", (1, 3, 224, 224))."""
    name, _, dims = text.rpartition("=")
    try:
        shape = tuple(int(d) for d in dims.split("x"))
    except ValueError:
        shape = ()
    if not name or not shape or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=DIMS with positive DIMS joined by x, "
                                         f"e.g. input=1x3x224x224")
    return name, shape


def input_shape_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input-shape", type=input_shape, action="append", metavar="NAME=DIMS",
                   help="with --onnx: a static shape for an input the file leaves dynamic, e.g. input=1x3x224x224 "
                        "(repeat for several inputs)")

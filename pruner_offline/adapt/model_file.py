"""What a model file written by adaptation says of itself, however it was adapted (a replay of
measured records or ``--follow`` on a live run)."""

from __future__ import annotations

from ..devices import DeviceConstants, device_to_json
from .methods import Method


def adapted_meta(source: str, method: Method, target: str, device: DeviceConstants, online_records: int) -> dict:
    """The records it adapted on, the method, how often it retrained and (guarded) which candidate
    predicts, and the device constants its draft score reads."""
    chosen = getattr(method, "chosen", None)
    return {"adapted_from": source, "method": method.name, "online_records": online_records,
            "retrains": method.retrains, **({"predicting": chosen} if chosen else {}),
            "devices": {target: device_to_json(device)}}

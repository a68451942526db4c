"""What to tune: built-in TE workloads and TIR module files (workloads.py), whole networks from
torch.export (torch_export.py) or ONNX (onnx_model.py), and the kernels of a network (network.py)."""

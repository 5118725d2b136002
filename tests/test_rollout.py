"""The rollout engine inside TRL's GRPOTrainer, plus budget and bookkeeping checks on the tiny random model."""
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from search_r1_course.data import load_world  # noqa: E402
from search_r1_course.fast_generate import TransformersGenerator  # noqa: E402
from search_r1_course.policy import load_policy, tiny_random_model  # noqa: E402
from search_r1_course.protocol import TagProtocol  # noqa: E402
from search_r1_course.rollout import (RolloutConfig, RolloutEngine, STATUSES, make_rollout_func,  # noqa: E402
                                      rollout_metrics)
from search_r1_course.search import SearchConfig, make_search_tool  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    return load_policy(tiny_random_model(), dtype="fp32", threads=1)


@pytest.fixture(scope="module")
def tool():
    return make_search_tool(SearchConfig(topk=3))


@pytest.fixture(scope="module")
def questions():
    return load_world("test")[:6]


def engine_for(tiny, tool, **cfg):
    model, tok = tiny
    proto = TagProtocol("demo", observation="user_turn", tokenizer=tok)
    return RolloutEngine(TransformersGenerator(model, tok), proto, tool, tok, RolloutConfig(**cfg))


@pytest.mark.parametrize("max_total,per_turn,turns", [(64, 32, 4), (150, 7, 5), (400, 50, 2)])
def test_budgets_hold_for_every_trajectory(tiny, tool, questions, max_total, per_turn, turns):
    eng = engine_for(tiny, tool, max_turns=turns, max_new_tokens_per_turn=per_turn, max_total_tokens=max_total,
                     max_obs_tokens=120, seed=3)
    trajs = eng.run(questions, group_size=2)
    assert len(trajs) == 12
    for t in trajs:
        assert len(t.completion_ids) == len(t.env_mask) == len(t.logprobs) <= max_total
        assert t.turns <= turns and t.status in STATUSES
        for ids, sampled in t.segments():
            assert len(ids) <= (per_turn if sampled else 120)


def test_mixed_budgets_in_one_batch(tiny, tool, questions):
    """Trajectories whose prompts differ in length still stop at their own completion budget."""
    eng = engine_for(tiny, tool, max_turns=4, max_new_tokens_per_turn=40, max_total_tokens=130, seed=0)
    trajs = eng.run(questions)
    assert max(len(t.completion_ids) for t in trajs) <= 130
    assert {t.status for t in trajs} <= {"length", "invalid"}


def test_generator_output_count_is_checked(tiny, tool, questions):
    eng = engine_for(tiny, tool, max_turns=1)

    class Short:
        def generate(self, prompts, params): return []
    eng.generator = Short()
    with pytest.raises(RuntimeError, match="returned 0 outputs for 2 prompts"):
        eng.run(questions[:2])


def test_rollout_func_inside_grpo_trainer(tiny, tool, tmp_path, questions):
    """TRL builds its batch from our output: env_mask becomes the tool mask and inserted tokens leave the loss."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from search_r1_course.reward import outcome_reward

    model, tok = tiny
    eng = engine_for(tiny, tool, max_turns=2, max_new_tokens_per_turn=12, max_total_tokens=160, seed=0)
    rows = [{"prompt": q.question, "golden_answers": q.golden_answers} for q in questions[:2]]
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=160, bf16=False, report_to="none", use_cpu=True,
                      logging_steps=1, save_strategy="no")  # GRPOConfig's default gradient checkpointing stays on
    trainer = GRPOTrainer(model=model, reward_funcs=outcome_reward, args=args, train_dataset=Dataset.from_list(rows),
                          processing_class=tok, rollout_func=make_rollout_func(eng))
    inputs = [r for r in rows for _ in range(2)]  # what TRL's RepeatSampler hands over
    trainer.model.train()
    batch = trainer._generate_and_score_completions(inputs)
    trajs = trainer.rollout_func.last_trajectories
    assert len(trajs) == 4 and trainer.model.training  # back in training mode afterwards
    assert eng.generator.model is trainer.model
    for i, t in enumerate(trajs):
        n = len(t.completion_ids)
        assert batch["completion_ids"][i, :n].tolist() == t.completion_ids
        assert batch["tool_mask"][i, :n].tolist() == t.env_mask
        assert batch["completion_mask"][i, :n].sum().item() == n
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.training_step in a real run
    loss = trainer.compute_loss(trainer.model, batch)
    assert torch.isfinite(loss)
    loss.backward()
    logged = trainer._metrics["train"]
    assert "rollout/turns" in logged and "search/calls" in logged and "tokens/env_fraction" in logged


def test_metrics_on_a_real_run(tiny, tool, questions):
    eng = engine_for(tiny, tool, max_turns=2, max_new_tokens_per_turn=10, max_total_tokens=200)
    trajs = eng.run(questions[:3], group_size=2)
    m = rollout_metrics(trajs, rewards=[1, 0, 0, 0, 1, 1], group_size=2, tool=tool)
    assert m["rollout/degenerate_group_rate"] == pytest.approx(2 / 3)
    assert m["rollout/turns"] == pytest.approx(sum(t.turns for t in trajs) / 6)
    assert 0 < m["tokens/env_fraction"] < 1
    assert sum(m[f"rollout/{s}_rate"] for s in STATUSES) == pytest.approx(1.0)


class SameQueryTwice:
    """Searches the same query on its first two turns, then answers."""
    def __init__(self, tokenizer, prompt_passages: int):
        self.tokenizer, self.prompt_passages = tokenizer, prompt_passages

    def generate(self, prompts, params):
        from search_r1_course.generate import GenerationOutput
        out = []
        for p in prompts:
            seen = self.tokenizer.decode(p).count("<information>") - self.prompt_passages
            turn = "<search> Skaenryth River source </search>" if seen < 2 else "<answer> x </answer>"
            ids = self.tokenizer.encode(turn, add_special_tokens=False)
            out.append(GenerationOutput(token_ids=ids, logprobs=[-1.0] * len(ids), finish_reason="stop", text=turn))
        return out


@pytest.mark.parametrize("fresh", [False, True])
def test_fresh_results_show_the_next_passage_when_a_query_repeats(tiny, fresh):
    _, tok = tiny
    proto = TagProtocol("demo", observation="user_turn", tokenizer=tok)
    shown_in_prompt = tok.decode(proto.prompt_ids(tok, "?")).count("<information>")
    tool = make_search_tool(SearchConfig(topk=1))
    eng = RolloutEngine(SameQueryTwice(tok, shown_in_prompt), proto, tool, tok,
                        RolloutConfig(max_turns=3, max_obs_tokens=80, fresh_results=fresh))
    (t,) = eng.run(["Where does the Skaenryth River have its source?"])
    assert t.searches == 2 and t.queries[0] == t.queries[1] and t.status == "answered"
    if fresh:
        assert len(t.shown) == 2 and t.shown[0] != t.shown[1]
        assert t.observations[0] != t.observations[1]
    else:
        assert t.shown == [] and t.observations[0] == t.observations[1]

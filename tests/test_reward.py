"Properties of the answer metrics and the reward (beyond the notebook's examples)."
from hypothesis import given, settings, strategies as st

from search_r1_course.protocol import Answer, Search, TagProtocol, format_action
from search_r1_course.reward import (RewardConfig, compute_reward, exact_match, extract_answer, f1_score,
                                     normalize_answer, substring_match)

texts = st.text(max_size=40)


@settings(max_examples=1000, deadline=None)
@given(texts, st.lists(texts, min_size=1, max_size=4))
def test_metric_relations(pred, golds):
    em, f1, sub = exact_match(pred, golds), f1_score(pred, golds), substring_match(pred, golds)
    assert 0.0 <= f1 <= 1.0 and em in (0.0, 1.0) and sub in (0.0, 1.0)
    if em: assert f1 == 1.0 and sub == 1.0


@settings(max_examples=500, deadline=None)
@given(texts)
def test_normalisation_is_idempotent(s):
    assert normalize_answer(normalize_answer(s)) == normalize_answer(s)


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_characters="<>", blacklist_categories=("Cs",))).filter(lambda s: normalize_answer(s)))
def test_rollout_shaped_episode_is_graded(answer):
    "A completion built with the protocol (search, spliced results, answer) is graded on its answer only."
    p = TagProtocol("search_r1")
    completion = format_action(Search("q")) + p.observation_text(f"Doc 1(Title: T) {answer}") + format_action(Answer(answer.strip()))
    assert extract_answer(completion) == answer.strip()
    r = compute_reward(completion, [answer], RewardConfig(format_tiers=True, no_search_penalty=0.5))
    assert (r.reward, r.correct, r.searched) == (1.0, True, True)

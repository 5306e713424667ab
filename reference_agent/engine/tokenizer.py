"""The one tokenizer of the simulated engine: reversible regex pieces, about 4 characters each.

A token is one of: an optional single whitespace character followed by up to four word
characters (``" sche"``, ``"dule"``), a run of whitespace, or one punctuation character.
Joining the pieces gives back the text exactly, so the server can stream a text one token
at a time and every count (usage, metrics, spans, KV-cache blocks) comes from the same pieces.
English prose comes out near 4 characters per token, close to real BPE tokenizers.

Chat prompts are rendered with a ChatML-like template (``render_prompt``) so that a
conversation that grows by appending messages keeps its earlier tokens as a prefix, which is
what makes prefix caching pay off for agents.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

TOKEN_RE = re.compile(r"\s?\w{1,4}|\s+|[^\w\s]")
"""Token pieces; every character of a text belongs to exactly one piece."""


def tokenize(text: str) -> list[str]:
    """Split ``text`` into token pieces whose concatenation is ``text``."""
    return TOKEN_RE.findall(text)


def count_tokens(text: str) -> int:
    """Number of tokens in ``text``."""
    return len(tokenize(text))


def _message_text(message: Mapping[str, Any]) -> str:
    """Flatten one chat message (string or content-part list, plus tool calls) to text."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    text = "" if content is None else str(content)
    for call in message.get("tool_calls") or ():
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        text += f"\n<tool_call>{json.dumps(function, sort_keys=True)}</tool_call>"
    return text


def render_prompt(messages: Sequence[Mapping[str, Any]], tools: Iterable[Any] = ()) -> str:
    """Render a chat request as the prompt text the simulated model "reads".

    Tools come first (inside the system header) so they are part of the shared prefix.
    """
    tool_list = list(tools)
    header = ""
    if tool_list:
        header = "<|im_start|>system\n# Tools\n" + json.dumps(tool_list, sort_keys=True) + "<|im_end|>\n"
    body = "".join(
        f"<|im_start|>{message.get('role', 'user')}\n{_message_text(message)}<|im_end|>\n" for message in messages
    )
    return header + body + "<|im_start|>assistant\n"

"""The OpenAI request and response shapes the live engine speaks (chat completions and completions, streamed or
not), checked where they enter: a bad field gets a 400 whose message names it."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jevserve.protocol import strict_json
from jevserve.protocol.chat import CHAT_ROLES, CONTENT_OPTIONAL_ROLES, stream_requested


class RequestError(ValueError):
    """A request the engine cannot take; `status` is the HTTP status, the message names the field at fault."""

    def __init__(self, message: str, *, status: int = 400, param: str | None = None,
                 error_type: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.param, self.error_type = status, param, error_type

    def body(self) -> dict[str, Any]:
        """The error in OpenAI's shape."""
        return {"error": {"message": str(self), "type": self.error_type, "param": self.param, "code": self.status}}


@dataclass(frozen=True, slots=True)
class Completion:
    """What a chat or completions body asks for."""

    chat: bool  # /v1/chat/completions (else /v1/completions)
    texts: tuple[str, ...]  # every message's text (chat) or the prompt (completions), counted as the prompt
    prompt_text: str  # the text whose recorded ShareGPT reply length applies: the last user message, or the prompt
    num_prompt_token_ids: int | None  # a completions prompt given as token ids: its length
    max_tokens: int | None
    stream: bool
    include_usage: bool
    priority: int
    stop: tuple[str, ...] = ()  # stop strings: the reply ends at the first, which is left out of its text
    include_stop_str: bool = False  # vLLM's `include_stop_str_in_output`: the stop string is kept
    echo: str = ""  # a completions prompt sent back before the reply (`echo: true`)
    prompt_param: str = "messages"  # the field holding the prompt, named by errors about its length
    min_tokens: int = 0  # vLLM's: the reply runs at least this long, and no stop string ends it before
    ignore_eos: bool = False  # vLLM's: the reply runs to max_tokens (or the context's room), never ending itself
    continuous_usage: bool = False  # `stream_options.continuous_usage_stats` with usage: usage in every chunk


# the content parts a text model's chat template reads, and the field each keeps its text in (vLLM's parser takes
# these; an image or audio part needs a multimodal model)
TEXT_PARTS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal"}


def _text_of(content: Any, param: str, role: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: this engine's model reads text only, as a text model's server does
        texts = []
        for j, part in enumerate(content):
            where = f"{param}[{j}]"
            if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
                raise RequestError(f"{where} must be a content part, an object with a string type", param=where)
            field = TEXT_PARTS.get(part["type"])
            if field is None:
                raise RequestError(f"{where}: a {part['type']!r} part; this engine serves a text model, which reads "
                                   f"only {', '.join(TEXT_PARTS)} parts", param=where)
            if not isinstance(part.get(field), str):
                raise RequestError(f"{where}: a {part['type']} part needs a string {field}", param=where)
            texts.append(part[field])
        return "".join(texts)
    if content is None and role in CONTENT_OPTIONAL_ROLES:
        return ""
    if content is None:
        raise RequestError(f"{param} is missing; a {role} message needs a string or a list of text parts",
                           param=param)
    raise RequestError(f"{param} must be a string or a list of content parts", param=param)


def count_said(n: int) -> str:
    """An integer as an error says it: in full, unless past any real count (a JSON 1e308 is an integer of 309
    digits once taken as one), then in scientific notation."""
    return f"{n:,}" if abs(n) < 10**15 else f"{float(n):.3g}"


def _int_field(body: Mapping[str, Any], name: str, *, minimum: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    # a float with nothing after the point (3.0) is taken as vLLM takes it (pydantic's lax int); 3.5 is not
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        expected = f"an integer >= {minimum}" if minimum is not None else "an integer"
        raise RequestError(f"{name}={json.dumps(body.get(name))}; expected {expected}", param=name)
    return value


def _number_field(body: Mapping[str, Any], name: str, low: float, high: float, *, low_open: bool = False) -> None:
    value = body.get(name)
    if value is None:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value <= high and (
        value > low if low_open else value >= low)
    if not ok:
        if high == float("inf"):
            bound = f"> {low:g}" if low_open else f">= {low:g}"
        else:
            bound = f"in ({low:g}, {high:g}]" if low_open else f"in [{low:g}, {high:g}]"
        raise RequestError(f"{name}={value!r}; expected a number {bound}", param=name)


def _stop_strings(body: Mapping[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise RequestError(f"stop={stop!r}; expected a string or a list of strings", param="stop")
    if "" in stop:  # vLLM: "stop cannot contain an empty string"
        raise RequestError("stop cannot contain an empty string", param="stop")
    return tuple(stop)


# vLLM's guided-decoding fields (older names and the current one): output this engine cannot constrain
GUIDED_FIELDS = ("guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs")


def _refuse_unsupported(body: Mapping[str, Any]) -> None:
    """What a model would answer and a simulated engine cannot: a 400 saying so, never a silent `null`. Chat's
    `logprobs` is a switch (false asks for nothing); completions' is a count, and 0 asks for the sampled token's."""
    logprobs = body.get("logprobs")
    wants_logprobs = logprobs is not None and logprobs is not False  # `is`: completions' 0 asks (0 == False)
    asks = {
        "logprobs": wants_logprobs,
        "top_logprobs": body.get("top_logprobs") is not None and wants_logprobs,  # chat reads it with logprobs only
        "prompt_logprobs": body.get("prompt_logprobs") is not None,
    }
    asked = [name for name, wanted in asks.items() if wanted]
    if asked:
        raise RequestError(f"{asked[0]}: this engine is simulated and samples no tokens from a model, so it has no "
                           "log probabilities to return; leave the field out", param=asked[0])
    # a reply shaped by a format or a tool it cannot write: filler text under a 200 would read as the model's
    # answer (an outside tester's json_object got "[jevserve engine: ", tool_choice "required" no call)
    response_format = body.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, Mapping) else None
    if response_format is not None and kind != "text":
        said = f"type {json.dumps(kind)}" if kind is not None else f"{json.dumps(response_format)[:60]} (no type)"
        raise RequestError(f"response_format {said}: this engine writes filler text, not structured output; leave "
                           "response_format out (or give type text)", param="response_format")
    for name in GUIDED_FIELDS:
        if body.get(name) is not None:
            raise RequestError(f"{name}: this engine writes filler text and cannot follow a guide; leave it out",
                               param=name)
    tool_choice = body.get("tool_choice")
    if tool_choice is not None and tool_choice not in ("auto", "none"):
        raise RequestError(f"tool_choice {json.dumps(tool_choice)}: this engine writes no tool calls, so it cannot "
                           "force one; give tool_choice auto or none, or leave it out", param="tool_choice")


def parse_body(raw: bytes) -> Any:
    """The JSON of a request body; raises RequestError (400) for anything a tokenizer or a reply could not carry."""
    try:
        body = strict_json.loads(raw)
    except strict_json.TooDeep:  # nested past what the parser can follow
        raise RequestError("the request body nests arrays or objects too deep") from None
    except ValueError as exc:  # not JSON, not UTF-8, NaN or Infinity, or a number past what Python converts
        if (compressed := strict_json.compression_of(raw)) is not None:
            raise RequestError(f"the request body is {compressed}-compressed, which this engine does not read (nor "
                               "does vLLM): send it uncompressed (no Content-Encoding)") from None
        raise RequestError(f"the request body is not valid JSON: {exc}") from None
    if b"\\ud" in raw.lower():  # an escaped UTF-16 half: valid JSON, but no tokenizer can encode it
        try:
            json.dumps(body, ensure_ascii=False).encode()
        except UnicodeEncodeError as exc:
            raise RequestError(f"the request body holds a lone UTF-16 surrogate ({exc.object[exc.start]!r}); "
                               "send valid Unicode") from None
    return body


def parse_completion(body: Any, *, chat: bool, model_name: str) -> Completion:
    """Check a request body and say what it asks for."""
    if not isinstance(body, Mapping):
        raise RequestError("the request body must be a JSON object")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError(f"model={model!r}; expected the model's name, a string", param="model")
    if model is not None and model != model_name:
        raise RequestError(f"the model `{model}` does not exist; this engine serves `{model_name}`",
                           status=404, param="model", error_type="NotFoundError")
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError("messages must be a non-empty list of {role, content} objects", param="messages")
        texts = []
        for index, message in enumerate(messages):
            if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
                raise RequestError(f"messages[{index}] must be an object with a string role", param="messages")
            if message["role"] not in CHAT_ROLES:
                raise RequestError(f"messages[{index}].role={message['role']!r}; expected one of "
                                   f"{', '.join(CHAT_ROLES)}", param=f"messages[{index}].role")
            texts.append(_text_of(message.get("content"), f"messages[{index}].content", message["role"]))
        users = [t for m, t in zip(messages, texts, strict=True) if m.get("role") == "user"]
        prompt_text, token_ids, echo = (users[-1] if users else texts[-1]), None, ""
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
            prompt = prompt[0]  # a batch of one prompt (`["text"]`, `[[1, 2]]`); `[5]` is one token id
        if isinstance(prompt, str):
            texts, prompt_text, token_ids = [prompt], prompt, None
        elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0
                                                         for t in prompt):
            texts, prompt_text, token_ids = [], "", len(prompt)
        else:
            raise RequestError("prompt must be a string, a list of one string, or a list of token ids (integers "
                               ">= 0)", param="prompt")
        if not prompt:  # vLLM: "The decoder prompt cannot be empty"
            raise RequestError("prompt is empty; send at least one token", param="prompt")
        echo = ""
        if body.get("suffix") is not None:  # vLLM's completions server: "suffix is not currently supported"
            raise RequestError("suffix is not supported (nor by vLLM's completions server); leave it out",
                               param="suffix")
        if body.get("echo") not in (None, False):
            if body.get("echo") is not True:
                raise RequestError(f"echo={body.get('echo')!r}; expected true or false", param="echo")
            if token_ids is not None:
                raise RequestError("echo: a prompt of token ids cannot be sent back as text by this engine (it "
                                   "has no detokenizer for them); send the prompt as a string", param="echo")
            echo = prompt_text
    _refuse_unsupported(body)
    _number_field(body, "temperature", 0.0, float("inf"))  # vLLM's bound (OpenAI's stops at 2)
    _number_field(body, "top_p", 0.0, 1.0, low_open=True)
    for penalty in ("presence_penalty", "frequency_penalty"):  # OpenAI's and vLLM's bounds
        _number_field(body, penalty, -2.0, 2.0)
    # vLLM's own sampling fields, bounded as its SamplingParams bounds them
    _number_field(body, "repetition_penalty", 0.0, float("inf"), low_open=True)
    _number_field(body, "min_p", 0.0, 1.0)
    top_k = _int_field(body, "top_k")
    if top_k is not None and top_k < 1 and top_k not in (0, -1):  # 0 and -1 turn it off
        raise RequestError(f"top_k={count_said(top_k)}; expected -1 or 0 (off) or an integer >= 1", param="top_k")
    stop = _stop_strings(body)
    include_stop = body.get("include_stop_str_in_output", False)
    if not isinstance(include_stop, bool):
        raise RequestError(f"include_stop_str_in_output={include_stop!r}; expected true or false",
                           param="include_stop_str_in_output")
    if (_int_field(body, "n", minimum=1) or 1) != 1:
        raise RequestError("n must be 1: the engine returns one choice per request", param="n")
    if (_int_field(body, "best_of", minimum=1) or 1) != 1:  # vLLM's V1 engine refuses it too (chat takes it as well)
        raise RequestError("best_of must be 1: the engine samples one sequence per request", param="best_of")
    max_tokens = _int_field(body, "max_completion_tokens", minimum=1) if chat else None
    if max_tokens is None:
        max_tokens = _int_field(body, "max_tokens", minimum=1)
    try:
        stream = stream_requested(body)
    except ValueError as exc:
        raise RequestError(str(exc), param="stream") from None
    options = body.get("stream_options") or {}
    if not isinstance(options, Mapping):
        raise RequestError("stream_options must be an object", param="stream_options")
    for flag in ("include_usage", "continuous_usage_stats"):
        if options.get(flag) is not None and not isinstance(options[flag], bool):
            raise RequestError(f"stream_options.{flag}={json.dumps(options[flag])}; expected true or false",
                               param=f"stream_options.{flag}")
    include_usage = options.get("include_usage")
    # vLLM: usage in every chunk, when usage is asked for at all
    continuous_usage = bool(include_usage) and bool(options.get("continuous_usage_stats"))
    seed = _int_field(body, "seed")  # sampling here ignores it, but vLLM refuses one that is no 64-bit integer
    if seed is not None and not -(2**63) <= seed < 2**63:
        raise RequestError(f"seed={count_said(seed)}; expected a 64-bit integer", param="seed")
    tools = body.get("tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, Mapping) for t in tools)):
        raise RequestError("tools must be an array of tool objects", param="tools")
    if body.get("stream_options") is not None and not stream:  # vLLM's and OpenAI's rule
        raise RequestError("stream_options can only be set when stream is true", param="stream_options")
    min_tokens = _int_field(body, "min_tokens", minimum=0) or 0
    if max_tokens is not None and min_tokens > max_tokens:
        raise RequestError(f"min_tokens={min_tokens} is over max_tokens={max_tokens}", param="min_tokens")
    ignore_eos = body.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise RequestError(f"ignore_eos={ignore_eos!r}; expected true or false", param="ignore_eos")
    priority = _int_field(body, "priority") or 0
    return Completion(chat, tuple(texts), prompt_text, token_ids, max_tokens, stream,
                      bool(include_usage), priority, stop, include_stop, echo,
                      "messages" if chat else "prompt", min_tokens, ignore_eos, continuous_usage)


class ResponseWriter:
    """The OpenAI response objects of one request: the full response, or the chunks of a stream."""

    def __init__(self, completion: Completion, model_name: str) -> None:
        self.completion, self.model = completion, model_name
        self.id = ("chatcmpl-" if completion.chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self._template: list[str] | None = None

    def _object(self, chunk: bool) -> str:
        if self.completion.chat:
            return "chat.completion.chunk" if chunk else "chat.completion"
        return "text_completion"

    def _choice(self, text: str, finish_reason: str | None, *, chunk: bool, first: bool = False) -> dict[str, Any]:
        if not self.completion.chat:
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        if chunk:
            delta = {"role": "assistant", "content": text} if first else {"content": text}
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                "finish_reason": finish_reason}

    @staticmethod
    def usage(num_prompt_tokens: int, num_completion_tokens: int) -> dict[str, int]:
        """The `usage` object."""
        return {"prompt_tokens": num_prompt_tokens, "completion_tokens": num_completion_tokens,
                "total_tokens": num_prompt_tokens + num_completion_tokens}

    def response(self, text: str, finish_reason: str, usage: dict[str, int]) -> dict[str, Any]:
        """The whole response of a request that did not ask to stream."""
        return {"id": self.id, "object": self._object(False), "created": self.created, "model": self.model,
                "choices": [self._choice(text, finish_reason, chunk=False)], "usage": usage}

    def text_chunk_sse(self, text: str) -> str:
        """A server-sent event carrying one content chunk: `chunk(text)` as `data: ...`, built from a template
        made once per request, since a stream sends hundreds of them."""
        template = self._template
        if template is None:
            marker = "\u0000TEXT\u0000"
            template = self._template = ("data: " + json.dumps(self.chunk(marker), separators=(",", ":")) +
                                         "\n\n").split(json.dumps(marker))
        return template[0] + json.dumps(text) + template[1]

    def chunk(self, text: str, finish_reason: str | None = None, *, first: bool = False,
              usage: dict[str, int] | None = None) -> dict[str, Any]:
        """One chunk of a stream; `usage` so far where the request asked for continuous usage stats."""
        body = {"id": self.id, "object": self._object(True), "created": self.created, "model": self.model,
                "choices": [self._choice(text, finish_reason, chunk=True, first=first)]}
        if self.completion.include_usage:
            body["usage"] = usage if self.completion.continuous_usage else None
        return body

    def usage_chunk(self, usage: dict[str, int]) -> dict[str, Any]:
        """The last chunk of a stream that asked for usage: no choices, the usage."""
        return {"id": self.id, "object": self._object(True), "created": self.created, "model": self.model,
                "choices": [], "usage": usage}

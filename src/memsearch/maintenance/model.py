"""The model step: the host's own CLI (``native``), or an API model (OpenAI, Anthropic, Gemini)
in a loop that answers its lookups until it replies in text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from memsearch.errors import MaintenanceError
from memsearch.maintenance.commands import (
    TOOL_DESCRIPTION,
    TOOL_PARAMETERS,
    MemoryScope,
    command_of,
    run_memory_command,
)
from memsearch.maintenance.common import (
    MAX_PROMPT_CHARS,
    MAX_TOOL_CALLS,
    MODEL_TIMEOUT,
    NATIVE_MODELS,
    NATIVE_PROMPT_CHARS,
    TOOL_NAME,
)

if TYPE_CHECKING:
    from memsearch.agent.hooks.base import HookContext
    from memsearch.config import PluginMaintenanceTaskConfig, PluginMemoryToSkillConfig
    from memsearch.llm import LLMSettings

    TaskSettings = PluginMaintenanceTaskConfig | PluginMemoryToSkillConfig
    from memsearch.maintenance.tasks import TaskRun


# --- asking the model -------------------------------------------------------------------------

#: Put before a prompt sent to a host CLI: that agent may otherwise chat around the JSON.
HOST_PREAMBLE = "Reply with the JSON object only: no tools, no questions, no text around it.\n\n"


def ask_model(run: TaskRun, prompt_for: Callable[[bool, int], str]) -> str:
    """The model's raw answer for ``run``: from its API provider (OpenAI, Anthropic or Gemini, each
    with the lookup tool) or, for ``native``, from the host's own CLI (no key needed, no lookups).
    ``prompt_for(tools, limit)`` builds the prompt for whether lookups are offered, within ``limit``."""
    provider = (run.settings.provider or "").strip()
    if provider in ("", "native"):
        summarizer = run.ctx.platform.native_summarizer
        if summarizer is None:
            raise MaintenanceError(
                f"{run.ctx.platform.agent_name} has no CLI memsearch can ask.",
                hint=f"Set plugins.{run.ctx.platform.name}.{run.task.name}.provider to an "
                "[llm.providers.<name>] entry.",
            )
        from memsearch.agent.hooks.summarize import collecting_reasons

        with collecting_reasons() as reasons:  # into the error: a run by hand has no hook log
            text = summarizer(
                _with_model(run.ctx, run.settings.model or NATIVE_MODELS.get(run.ctx.platform.name, "")),
                HOST_PREAMBLE + prompt_for(False, NATIVE_PROMPT_CHARS),
            )
        if text is None:
            why = "; ".join(reasons) or "no reason given"
            raise MaintenanceError(
                f"The {run.ctx.platform.agent_name} CLI gave no usable answer ({why}).",
                hint=f"Make that CLI work in a terminal, or set plugins.{run.ctx.platform.name}."
                f"{run.task.name}.provider to an [llm.providers.<name>] entry; the task is retried on a "
                "later run.",
            )
        return text
    from memsearch.llm import LLMSettings, backend_type

    settings = LLMSettings.named(run.ctx.config, provider)
    if run.settings.model:
        settings = replace(settings, model=run.settings.model)
    kind = backend_type(settings.provider)
    scope = MemoryScope.of(run.ctx, run.input_dir)
    if kind == "openai":
        return _ask_openai(settings, prompt_for(True, MAX_PROMPT_CHARS), scope)
    if kind == "anthropic":
        return _ask_anthropic(settings, prompt_for(True, MAX_PROMPT_CHARS), scope)
    return _ask_gemini(settings, prompt_for(True, MAX_PROMPT_CHARS), scope)


def _with_model(ctx: HookContext, model: str) -> HookContext:
    """``ctx`` with the task's model where the host summariser reads its model (the summarize
    setting), so ``<task>.model`` also picks the host CLI's model."""
    if not model:
        return ctx
    import copy
    import dataclasses

    cfg = copy.deepcopy(ctx.config)
    cfg.plugins.platform(ctx.platform.name).summarize.model = model
    return dataclasses.replace(ctx, _config=cfg)


def _ask_openai(settings: LLMSettings, prompt: str, scope: MemoryScope) -> str:
    """Chat completions with the lookup tool: answer tool calls until the model replies in text."""
    import openai
    from openai.types.chat import ChatCompletionMessageFunctionToolCall

    from memsearch.http import CONNECT_TIMEOUT, PLACEHOLDER_KEY, sdk_errors
    from memsearch.llm import prepare

    _, call = prepare(
        prompt, settings.provider, settings.model, settings.base_url, settings.api_key, MODEL_TIMEOUT
    )
    client = openai.OpenAI(
        api_key=call.api_key or PLACEHOLDER_KEY,
        base_url=call.base_url,
        max_retries=1,
        timeout=openai.Timeout(call.timeout, connect=CONNECT_TIMEOUT),
    )
    url = f"{call.base_url}/chat/completions"
    tools: list[Any] = [
        {
            "type": "function",
            "function": {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "parameters": TOOL_PARAMETERS},
        }
    ]
    messages: list[Any] = [{"role": "user", "content": prompt}]
    try:
        for _ in range(MAX_TOOL_CALLS + 2):
            choice: Literal["auto", "none"] = "auto" if scope.calls_left > 0 else "none"
            with sdk_errors(call.errors, url, call.timeout):
                response = client.chat.completions.create(
                    model=call.model, messages=messages, tools=tools, tool_choice=choice
                )
            if isinstance(response, (str, bytes)) or not getattr(response, "choices", None):
                raise call.errors.bad_response(url, "no choices in the answer")
            message = response.choices[0].message
            calls = [
                c for c in (message.tool_calls or []) if isinstance(c, ChatCompletionMessageFunctionToolCall)
            ]
            if not calls:
                return message.content or ""
            messages.append(
                {
                    "role": "assistant",
                    "content": message.content,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.function.name, "arguments": c.function.arguments},
                        }
                        for c in calls
                    ],
                }
            )
            for c in calls:
                output = run_memory_command(command_of(c.function.arguments), scope)
                messages.append({"role": "tool", "tool_call_id": c.id, "content": output})
    finally:
        client.close()
    raise MaintenanceError("The model kept asking for lookups and never answered.")


def _ask_anthropic(settings: LLMSettings, prompt: str, scope: MemoryScope) -> str:
    """The Messages API with the lookup tool, as one JSON POST per round (no SDK)."""
    from memsearch.http import JsonClient
    from memsearch.llm import ANTHROPIC_MAX_TOKENS, ANTHROPIC_VERSION, prepare, versioned

    _, call = prepare(
        prompt, settings.provider, settings.model, settings.base_url, settings.api_key, MODEL_TIMEOUT
    )
    url = f"{versioned(call.base_url, 'v1')}/messages"
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if call.api_key:
        headers["x-api-key"] = call.api_key
    tool = {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "input_schema": TOOL_PARAMETERS}
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    with JsonClient() as client:  # one connection for every round of the conversation
        for _ in range(MAX_TOOL_CALLS + 2):
            body: dict[str, Any] = {
                "model": call.model,
                "max_tokens": ANTHROPIC_MAX_TOKENS,
                "messages": messages,
                "tools": [tool],
                "tool_choice": {"type": "auto" if scope.calls_left > 0 else "none"},
            }
            payload = client.post_json(url, body, headers=headers, errors=call.errors, timeout=call.timeout)
            blocks = payload.get("content") if isinstance(payload, dict) else None
            if not isinstance(blocks, list):
                raise call.errors.bad_response(url, "no 'content' list in the answer")
            blocks = [b for b in blocks if isinstance(b, dict)]
            uses = [b for b in blocks if b.get("type") == "tool_use"]
            if not uses:
                return "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
            messages.append({"role": "assistant", "content": blocks})
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": str(b.get("id", "")),
                            "content": run_memory_command(command_of(b.get("input")), scope),
                        }
                        for b in uses
                    ],
                }
            )
    raise MaintenanceError("The model kept asking for lookups and never answered.")


def _ask_gemini(settings: LLMSettings, prompt: str, scope: MemoryScope) -> str:
    """``generateContent`` with the lookup tool as a function declaration, one JSON POST per round.
    The model's turns are sent back as it gave them (thought signatures included)."""
    from memsearch.http import JsonClient
    from memsearch.llm import prepare, versioned

    _, call = prepare(
        prompt, settings.provider, settings.model, settings.base_url, settings.api_key, MODEL_TIMEOUT
    )
    url = f"{versioned(call.base_url, 'v1beta')}/models/{call.model.removeprefix('models/')}:generateContent"
    headers = {"x-goog-api-key": call.api_key} if call.api_key else {}
    declaration = {
        "name": TOOL_NAME,
        "description": TOOL_DESCRIPTION,
        "parameters": {
            "type": "OBJECT",
            "properties": {"command": {"type": "STRING", "description": "The memsearch command line."}},
            "required": ["command"],
        },
    }
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": prompt}]}]
    with JsonClient() as client:  # one connection for every round of the conversation
        for _ in range(MAX_TOOL_CALLS + 2):
            body = {
                "contents": contents,
                "tools": [{"functionDeclarations": [declaration]}],
                "toolConfig": {"functionCallingConfig": {"mode": "AUTO" if scope.calls_left > 0 else "NONE"}},
            }
            payload = client.post_json(url, body, headers=headers, errors=call.errors, timeout=call.timeout)
            candidates = payload.get("candidates") if isinstance(payload, dict) else None
            content = candidates[0].get("content") if isinstance(candidates, list) and candidates else None
            if not isinstance(content, dict):
                raise call.errors.bad_response(url, "no candidate content in the answer")
            parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
            uses = [p["functionCall"] for p in parts if isinstance(p.get("functionCall"), dict)]
            if not uses:
                return "".join(str(p.get("text", "")) for p in parts if not p.get("thought"))
            contents.append({"role": "model", "parts": parts})
            contents.append(
                {
                    "role": "user",
                    "parts": [
                        {
                            "functionResponse": {
                                "name": str(use.get("name", TOOL_NAME)),
                                "response": {
                                    "output": run_memory_command(command_of(use.get("args")), scope)
                                },
                            }
                        }
                        for use in uses
                    ],
                }
            )
    raise MaintenanceError("The model kept asking for lookups and never answered.")

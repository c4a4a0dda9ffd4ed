"""LLM backends (memsearch.llm) and packaged prompts (memsearch.prompts), over real local HTTP.

The OpenAI backend is driven through the real ``openai`` SDK, Anthropic and Gemini through the real
stdlib client, all against tests/fake_llm_server.py on 127.0.0.1. No key or internet is needed.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fake_llm_server import FakeLLMServer, fake_llm
from memsearch.config import LLM_DEFAULT_MODELS, resolve_config
from memsearch.errors import ConfigEnvVarError, ConfigKeyError, ConfigValueError
from memsearch.llm import (
    LLMAPIError,
    LLMSettings,
    MissingLLMKeyError,
    UnknownLLMProviderError,
    backend_type,
    complete,
    summarize_text,
)
from memsearch.prompts import load_prompt, prompt_names

__all__ = ["fake_llm"]  # the fixture, used by name


def _dead_url() -> str:
    """A 127.0.0.1 URL on which nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# --- openai (the real SDK) -------------------------------------------------------------------


async def test_openai_request_shape_and_answer(fake_llm: FakeLLMServer) -> None:
    fake_llm.reply("the answer")
    text = await complete("hello {there}", base_url=f"{fake_llm.url}/v1", api_key="sk-test")
    assert text == "the answer"
    (req,) = fake_llm.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    assert req.body["model"] == LLM_DEFAULT_MODELS["openai"] == "gpt-5-mini"
    assert req.body["messages"] == [{"role": "user", "content": "hello {there}"}]
    assert "temperature" not in req.body  # reasoning models refuse any non-default value


async def test_openai_compatible_alias_env_refs_and_env_base_url(
    fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_LLM_KEY", "from-env")
    monkeypatch.setenv("MY_LLM_URL", f"{fake_llm.url}/v1/")
    text = await summarize_text(
        "p",
        llm_provider="openai-compatible",
        model="local-model",
        base_url="env:MY_LLM_URL",
        api_key="env:MY_LLM_KEY",
    )
    assert text == fake_llm.default_reply
    assert fake_llm.requests[-1].headers["authorization"] == "Bearer from-env"
    assert fake_llm.requests[-1].body["model"] == "local-model"

    # OPENAI_BASE_URL and OPENAI_API_KEY are honoured when nothing is given explicitly.
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake_llm.url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert await complete("q") == fake_llm.default_reply
    assert fake_llm.requests[-1].headers["authorization"] == "Bearer sk-env"


async def test_openai_custom_endpoint_needs_no_key(fake_llm: FakeLLMServer) -> None:
    assert await complete("q", base_url=f"{fake_llm.url}/v1") == fake_llm.default_reply
    assert fake_llm.requests[0].headers["authorization"] == "Bearer memsearch-no-key"


async def test_missing_key_at_vendor_endpoint_fails_before_any_request() -> None:
    with pytest.raises(MissingLLMKeyError) as info:
        await complete("q", provider="openai")
    assert info.value.one_line().startswith(
        "No API key for the OpenAI LLM provider. Hint: Set OPENAI_API_KEY"
    )
    with pytest.raises(MissingLLMKeyError, match="Anthropic") as info:
        await complete("q", provider="anthropic")
    assert "ANTHROPIC_API_KEY" in info.value.hint
    with pytest.raises(MissingLLMKeyError, match="Gemini") as info:
        await complete("q", provider="gemini")
    assert "GOOGLE_API_KEY" in info.value.hint


async def test_unset_env_reference_is_a_config_error() -> None:
    with pytest.raises(ConfigEnvVarError, match="NOT_SET_ANYWHERE"):
        await complete("q", api_key="env:NOT_SET_ANYWHERE")


async def test_openai_empty_answer_is_empty_text(fake_llm: FakeLLMServer) -> None:
    fake_llm.reply("")
    assert await complete("q", base_url=f"{fake_llm.url}/v1") == ""


async def test_openai_rejected_key(fake_llm: FakeLLMServer) -> None:
    fake_llm.fail(401, '{"error": {"message": "Incorrect API key provided"}}')
    with pytest.raises(LLMAPIError) as info:
        await complete("q", base_url=f"{fake_llm.url}/v1", api_key="bad")
    assert info.value.message == "The OpenAI-compatible API rejected the API key (HTTP 401)."
    assert "OPENAI_API_KEY" in info.value.hint


async def test_openai_server_error_is_retried_once_then_reported(fake_llm: FakeLLMServer) -> None:
    fake_llm.fail(500, '{"error": {"message": "boom"}}')
    with pytest.raises(LLMAPIError, match=r"returned HTTP 500: .*boom"):
        await complete("q", base_url=f"{fake_llm.url}/v1", api_key="k")
    assert len(fake_llm.requests) == 2


async def test_openai_transient_error_then_success(fake_llm: FakeLLMServer) -> None:
    fake_llm.fail(503, times=1)
    assert await complete("q", base_url=f"{fake_llm.url}/v1", api_key="k") == fake_llm.default_reply


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_unreachable_endpoint_fails_fast_with_one_error(provider: str) -> None:
    url = _dead_url()
    start = time.monotonic()
    with pytest.raises(LLMAPIError) as info:
        await complete("q", provider=provider, base_url=url, api_key="k")
    assert time.monotonic() - start < 5
    assert info.value.message.startswith("Could not connect to the ")
    assert "connection refused" in info.value.message and url in info.value.message


# --- anthropic and gemini (stdlib HTTP) ------------------------------------------------------


async def test_anthropic_request_shape_and_answer(
    fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-env")
    fake_llm.reply("claude says")
    assert await complete("p", provider="anthropic", base_url=fake_llm.url) == "claude says"
    (req,) = fake_llm.requests
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == "ak-env"
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert req.body == {
        "model": "claude-sonnet-4-6",
        "max_tokens": 8192,
        "messages": [{"role": "user", "content": "p"}],
    }


async def test_anthropic_base_url_with_version_and_explicit_key(fake_llm: FakeLLMServer) -> None:
    await complete("p", provider="anthropic", base_url=f"{fake_llm.url}/v1", api_key="explicit", model="m")
    assert fake_llm.requests[0].path == "/v1/messages"
    assert fake_llm.requests[0].headers["x-api-key"] == "explicit"
    assert fake_llm.requests[0].body["model"] == "m"


async def test_anthropic_skips_thinking_blocks_and_joins_text(fake_llm: FakeLLMServer) -> None:
    fake_llm.anthropic_content = [
        {"type": "thinking", "thinking": "hmm", "signature": "x"},
        {"type": "redacted_thinking", "data": "..."},
        {"type": "text", "text": "- one\n"},
        {"type": "text", "text": "- two"},
    ]
    assert await complete("p", provider="anthropic", base_url=fake_llm.url) == "- one\n- two"


async def test_anthropic_without_text_block_is_a_clear_error(fake_llm: FakeLLMServer) -> None:
    fake_llm.anthropic_content = [{"type": "thinking", "thinking": "only thoughts", "signature": "x"}]
    with pytest.raises(LLMAPIError) as info:
        await complete("p", provider="anthropic", base_url=fake_llm.url)
    assert info.value.message == (
        "The Anthropic response contained no text block (blocks: thinking; stop_reason: end_turn)."
    )


async def test_gemini_request_shape_and_answer(
    fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "g-env")
    fake_llm.gemini_answer = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"text": "thinking...", "thought": True}, {"text": "- a"}, {"text": "\n- b"}],
                }
            }
        ]
    }
    assert await complete("p", provider="gemini", base_url=fake_llm.url) == "- a\n- b"
    (req,) = fake_llm.requests
    assert req.path == "/v1beta/models/gemini-3-flash-preview:generateContent"
    assert req.headers["x-goog-api-key"] == "g-env"
    assert "key=" not in req.path  # the key never travels in the URL
    assert req.body == {"contents": [{"role": "user", "parts": [{"text": "p"}]}]}


async def test_gemini_versioned_base_url_and_blocked_prompt(fake_llm: FakeLLMServer) -> None:
    fake_llm.gemini_answer = {"promptFeedback": {"blockReason": "SAFETY"}}
    with pytest.raises(LLMAPIError, match=r"Gemini refused the prompt \(blockReason: SAFETY\)"):
        await complete(
            "p", provider="gemini", base_url=f"{fake_llm.url}/v1beta", model="models/g-x", api_key="k"
        )
    assert fake_llm.requests[0].path == "/v1beta/models/g-x:generateContent"
    fake_llm.gemini_answer = {"candidates": []}
    assert await complete("p", provider="gemini", base_url=fake_llm.url, api_key="k") == ""


@pytest.mark.parametrize(("provider", "label"), [("anthropic", "Anthropic"), ("gemini", "Gemini")])
async def test_rest_backends_map_http_errors(fake_llm: FakeLLMServer, provider: str, label: str) -> None:
    fake_llm.fail(401)
    with pytest.raises(LLMAPIError) as info:
        await complete("p", provider=provider, base_url=fake_llm.url, api_key="k")
    assert info.value.message == f"The {label} API rejected the API key (HTTP 401)."
    fake_llm.fail(404, '{"error": "model not found"}')
    with pytest.raises(LLMAPIError, match=r"returned HTTP 404: .*model not found") as info:
        await complete("p", provider=provider, base_url=fake_llm.url, api_key="k")
    assert "model name" in info.value.hint


async def test_unknown_provider_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownLLMProviderError) as info:
        await complete("p", provider="cohere")
    assert info.value.message == (
        "Unknown LLM provider type 'cohere'. Available: openai, openai-compatible, anthropic, gemini"
    )
    assert isinstance(info.value, ValueError)  # what the original raised
    assert backend_type("OpenAI-Compatible") == "openai"


# --- settings from the config ----------------------------------------------------------------


def _write_global(text: str) -> None:
    path = Path.home() / ".memsearch" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_compact_settings_flags_beat_files_and_compact_section_is_a_fallback() -> None:
    _write_global(
        '[llm]\nprovider = "anthropic"\nbase_url = "http://file"\n'
        '[compact]\nllm_provider = "gemini"\nllm_model = "old-model"\napi_key = "old-key"\n'
    )
    cfg = resolve_config()
    assert LLMSettings.for_compact(cfg) == LLMSettings("anthropic", "old-model", "http://file", "old-key")
    flags = {"llm": {"provider": "openai", "model": "m", "base_url": "http://flag", "api_key": "k"}}
    assert LLMSettings.for_compact(resolve_config(flags)) == LLMSettings("openai", "m", "http://flag", "k")
    # An empty [llm] value falls back to the deprecated [compact] key.
    assert LLMSettings.for_compact(resolve_config({"llm": {"provider": ""}})).provider == "gemini"


def test_compact_settings_from_a_named_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_KEY", "secret")
    _write_global(
        '[llm]\nprovider = "local"\nmodel = "override"\n'
        '[llm.providers.local]\ntype = "openai-compatible"\nmodel = "qwen"\n'
        'base_url = "http://127.0.0.1:1/v1"\napi_key = "env:LOCAL_KEY"\n'
    )
    assert LLMSettings.for_compact(resolve_config()) == LLMSettings(
        "openai-compatible", "override", "http://127.0.0.1:1/v1", "secret"
    )


def test_named_provider_unknown_lists_configured() -> None:
    _write_global('[llm.providers.fast]\ntype = "openai"\n')
    with pytest.raises(UnknownLLMProviderError) as info:
        LLMSettings.named(resolve_config(), "slow")
    assert info.value.one_line() == (
        "Unknown LLM provider 'slow'. Configure [llm.providers.slow]. Hint: Add [llm.providers.slow] with "
        "type, model, base_url and api_key to ~/.memsearch/config.toml (configured providers: fast)."
    )
    assert LLMSettings.named(resolve_config(), "fast") == LLMSettings("openai")


# --- prompts ---------------------------------------------------------------------------------


def test_builtin_prompts_are_packaged_once() -> None:
    assert prompt_names() == ["compact", "memory_to_skill", "project_review", "summarize", "user_profile"]
    compact = load_prompt("compact")
    assert compact.count("{chunks}") == 1
    summarize = load_prompt("summarize", agent_name="Codex")
    assert "{{AGENT_NAME}}" not in summarize and "between User and Codex" in summarize
    assert "{{AGENT_NAME}}" in load_prompt("summarize")  # left as written without a name


def test_prompt_override_file_and_errors(tmp_path: Path) -> None:
    custom = tmp_path / "mine.txt"
    custom.write_text("Notes for {{AGENT_NAME}} and {{AGENT_NAME}}.", encoding="utf-8")
    assert (
        load_prompt("summarize", agent_name="OpenCode", override_path=custom)
        == "Notes for OpenCode and OpenCode."
    )
    with pytest.raises(ConfigValueError, match=r"Prompt file not found: .*missing\.txt") as info:
        load_prompt("summarize", override_path=tmp_path / "missing.txt")
    assert "prompts.summarize" in info.value.hint
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok \xff\xfe")
    with pytest.raises(ConfigValueError, match=r"not valid UTF-8 \(byte 3\)"):
        load_prompt("compact", override_path=bad)
    with pytest.raises(ConfigKeyError) as info:
        load_prompt("nope")
    assert info.value.one_line() == (
        "Unknown prompt: nope. Hint: Built-in prompts: compact, memory_to_skill, project_review, summarize, "
        "user_profile"
    )


def test_llm_modules_import_no_sdk() -> None:
    code = (
        "import sys, memsearch.llm, memsearch.compact, memsearch.prompts, memsearch.cli.compact_cmd\n"
        "print(sorted(m for m in ('openai', 'pymilvus', 'onnxruntime', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

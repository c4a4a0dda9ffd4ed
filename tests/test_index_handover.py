"""A direct index (``MEMSEARCH_NO_SERVICE=1``) whose store a ``memsearch serve`` takes while it
embeds: real processes, a fake embedding API on 127.0.0.1 that holds the index's texts until the
service holds the store (``memsearch.service.owner.perform``, ``Operation.hands_over``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from cli_process import memsearch
from fake_servers import FakeEmbeddingServer, fake_api  # noqa: F401  (fixture)
from memsearch.service.client import ServiceClient
from memsearch.service.paths import service_paths

NOTES = {
    f"birds-{n}.md": f"# Birds {n}\n\n## Heron {n}\n\nThe heron number {n} nests by the weir.\n\n"
    f"## Kingfisher {n}\n\nA kingfisher number {n} fishes the mill race.\n"
    for n in range(4)
}


def test_a_direct_index_hands_its_run_to_a_service_that_took_the_store(
    tmp_path: Path,
    isolated_env: Path,
    fake_api: FakeEmbeddingServer,  # noqa: F811
) -> None:
    """Before: the index embedded everything, then waited for the store ``serve`` had opened
    meanwhile and failed with 0 chunks stored. Now the service stores the run from the embedding
    cache (no text is embedded twice) and the index reports it."""
    uri = str(tmp_path / "handover.db")
    config = Path(os.environ["HOME"]) / ".memsearch" / "config.toml"
    config.write_text(
        f'[embedding]\nprovider = "openai"\nmodel = "m"\nbase_url = "{fake_api.url}/v1"\n'
        f'[milvus]\nuri = "{uri}"\nlock_timeout = 1\n',
        encoding="utf-8",
    )
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    release = fake_api.hold("heron")  # the index's texts wait; the service's warm-up does not

    env = {**os.environ, "MEMSEARCH_NO_SERVICE": "1"}
    index = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "index", str(notes)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    serve = None
    try:
        deadline = time.monotonic() + 60
        while fake_api.held == 0:  # the index is embedding ahead, the store not yet opened
            assert index.poll() is None and time.monotonic() < deadline, index.communicate()
            time.sleep(0.05)
        serve = subprocess.Popen(
            [sys.executable, "-m", "memsearch", "serve"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        client = ServiceClient(service_paths(uri))
        while True:  # the service holds the store (its warm-up opened it)
            assert serve.poll() is None and time.monotonic() < deadline, serve.communicate()
            try:
                if client.ping().get("ready"):
                    break
            except Exception:
                pass
            time.sleep(0.1)
        embedded = sum(1 for r in fake_api.requests if "heron" in str(r.body))
        release.set()
        out, err = index.communicate(timeout=120)
        assert index.returncode == 0, err
        assert out == "Indexed 8 chunks.\n", (out, err)
        assert "took the store while this run worked; the run is handed to it" in err
        assert "Traceback" not in err
        # every text was embedded once, ahead: the service took them from the cache
        assert sum(1 for r in fake_api.requests if "heron" in str(r.body)) == embedded
        stats = memsearch("stats")  # through the service
        assert stats.returncode == 0 and "Total indexed chunks: 8" in stats.stdout, (
            stats.stdout + stats.stderr
        )
    finally:
        release.set()
        if index.poll() is None:
            index.kill()
            index.communicate()
        if serve is not None:
            serve.terminate()
            serve.communicate(timeout=60)

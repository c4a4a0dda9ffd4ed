#!/usr/bin/env bash
# Install memsearch's Codex hooks and skills. Idempotent: run it again after updating memsearch.
# Install memsearch first, from its checkout (uv tool install /path/to/memsearch; PyPI's memsearch
# is another package); to pin the interpreter it lives in, set MEMSEARCH_PYTHON=/path/to/python.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ -n "${MEMSEARCH_PYTHON:-}" ]; then
  exec "$MEMSEARCH_PYTHON" -m memsearch hook codex install --plugin-dir "$here"
fi
export PATH="$PATH:$HOME/.local/bin:$HOME/.cargo/bin:$HOME/bin:/usr/local/bin"
exec memsearch hook codex install --plugin-dir "$here"

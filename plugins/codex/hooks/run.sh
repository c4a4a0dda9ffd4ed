#!/usr/bin/env bash
# Codex hook shim: `bash run.sh <event> [python]`. All logic lives in the memsearch package.
# install.sh passes the interpreter memsearch is installed in; without it, memsearch on PATH is used.
if [ -n "${2:-}" ] && [ -x "$2" ]; then
  exec "$2" -m memsearch hook codex "$1"
fi
export PATH="$PATH:$HOME/.local/bin:$HOME/.cargo/bin:$HOME/bin:/usr/local/bin"
if command -v memsearch >/dev/null 2>&1; then
  exec memsearch hook codex "$1"
fi
echo '{}'  # memsearch was uninstalled: stay out of Codex's way

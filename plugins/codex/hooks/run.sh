#!/usr/bin/env bash
# Codex hook shim: `bash run.sh <event> [python]`. All logic lives in the memsearch package.
# install.sh passes the interpreter memsearch is installed in; without it, memsearch on PATH is used.
if [ -n "${2:-}" ] && [ -x "$2" ]; then
  exec "$2" -m memsearch hook codex "$1"
fi
export PATH="$PATH:$HOME/.local/bin:$HOME/.cargo/bin:$HOME/bin:/usr/local/bin"
command -v memsearch >/dev/null 2>&1 || { echo '{}'; exit 0; }  # uninstalled: stay out of Codex's way
memsearch hook codex "$1"
status=$?
# 2 is a usage error: this memsearch has no `memsearch hook` (PyPI's memsearch is another package).
# Codex hears of it once, at session start; every other event stays silent.
[ "$status" -eq 2 ] || exit "$status"
[ "$1" != session-start ] && echo '{}' && exit 0
printf '{"systemMessage": "[memsearch] %s is not this plugin'\''s memsearch (no `memsearch hook`): run `uv tool install --force <your memsearch checkout>`, then plugins/codex/install.sh"}\n' "$(command -v memsearch | tr -d '"\\')"

#!/usr/bin/env bash
# Codex hook shim: `bash run.sh <event> [python]`. All logic lives in the memsearch package.
# install.sh passes the interpreter memsearch is installed in; without it, memsearch on PATH is used.
if [ -n "${2:-}" ] && [ -x "$2" ]; then
  exec "$2" -m memsearch hook codex "$1"
fi
export PATH="$PATH:$HOME/.local/bin:$HOME/.cargo/bin:$HOME/bin:/usr/local/bin"
if ! command -v memsearch >/dev/null 2>&1; then
  echo '{}'  # memsearch was uninstalled: stay out of Codex's way
  exit 0
fi
memsearch hook codex "$1"
status=$?
# 2 is a usage error: this memsearch has no `memsearch hook` (PyPI's memsearch is another package).
# Codex hears of it once, at session start, and every other event stays silent.
if [ "$status" -eq 2 ]; then
  if [ "$1" = session-start ]; then
    where="$(command -v memsearch | tr -d '"\\')"
    fix='uv tool install --force <your memsearch checkout>'
    printf '{"systemMessage": "[memsearch] %s is not this plugin'\''s memsearch (no `memsearch hook`): run `%s`, then plugins/codex/install.sh"}\n' "$where" "$fix"
  else
    echo '{}'
  fi
  exit 0
fi
exit "$status"

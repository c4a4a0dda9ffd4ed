#!/usr/bin/env bash
# Claude Code hook shim: `bash run.sh <event>`. All logic lives in the memsearch package.
# Claude Code may start without the user's shell profile: look in the usual user bin folders too.
export PATH="$PATH:$HOME/.local/bin:$HOME/.cargo/bin:$HOME/bin:/usr/local/bin"
INSTALL='uv tool install --force <your memsearch checkout>'
say() {  # one line for the user at session start; other events stay silent
  if [ "$1" = session-start ]; then printf '{"systemMessage": "[memsearch] %s"}\n' "$2"; else echo '{}'; fi
}
if ! command -v memsearch >/dev/null 2>&1; then
  say "$1" "not installed: run \`$INSTALL\` (PyPI's memsearch is another package), then restart Claude Code"
  exit 0
fi
memsearch hook claude-code "$1"
status=$?
# 2 is a usage error: this memsearch has no `memsearch hook` (PyPI's memsearch is another package).
# Claude Code would read 2 as "block" (a Stop that never ends), so the shim answers instead.
if [ "$status" -eq 2 ]; then
  where="$(command -v memsearch | tr -d '"\\')"
  say "$1" "$where is not this plugin's memsearch (no \`memsearch hook\`): run \`$INSTALL\`, then restart Claude Code"
  exit 0
fi
exit "$status"

#!/usr/bin/env bash
# Claude Code hook shim: `bash run.sh <event>`. All logic lives in the memsearch package.
# Claude Code may start without the user's shell profile: look in the usual user bin folders too.
export PATH="$PATH:$HOME/.local/bin:$HOME/.cargo/bin:$HOME/bin:/usr/local/bin"
fix='uv tool install --force <your memsearch checkout>'
say() {  # one line for the user at session start; every other event stays silent
  if [ "$1" = session-start ]; then printf '{"systemMessage": "[memsearch] %s"}\n' "$2"; else echo '{}'; fi
}
missing="not installed: run \`$fix\` (PyPI's memsearch is another package), then restart Claude Code"
command -v memsearch >/dev/null 2>&1 || { say "$1" "$missing"; exit 0; }
memsearch hook claude-code "$1"
status=$?
# 2 is a usage error: this memsearch has no `memsearch hook` (PyPI's memsearch is another package).
# Claude Code would read 2 as "block" (a Stop that never ends), so the shim answers instead.
[ "$status" -eq 2 ] || exit "$status"
say "$1" "$(command -v memsearch | tr -d '"\\') is not this plugin's memsearch (no \`memsearch hook\`): run \`$fix\`, then restart Claude Code"

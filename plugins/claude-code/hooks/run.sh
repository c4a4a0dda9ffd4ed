#!/usr/bin/env bash
# Claude Code hook shim: `bash run.sh <event>`. All logic lives in the memsearch package.
# Claude Code may start without the user's shell profile: look in the usual user bin folders too.
export PATH="$PATH:$HOME/.local/bin:$HOME/.cargo/bin:$HOME/bin:/usr/local/bin"
if command -v memsearch >/dev/null 2>&1; then
  exec memsearch hook claude-code "$1"
fi
if [ "$1" = session-start ]; then  # say once why memory is off; stay silent on other events
  echo '{"systemMessage": "[memsearch] not installed: run `uv tool install memsearch` (or `pip install memsearch`), then restart Claude Code"}'
else
  echo '{}'
fi

"""``memsearch ui``: the memory console, a local web app to see, search, review and prune memory.

It is one more way in, like the CLI and the MCP server: every store operation goes through the
store's owner (``memsearch.engine.memory.open_memory``), every write is the CLI's own operation
(``forget``, ``skills install``/``reject``, ``maintenance keep``/``revert``, ``scan --redact``),
and the timeline is read from the markdown (``memsearch.agent.timeline``). Its modules:

- ``projects``: which memories it shows (this project, ``--project DIR``, or every memory folder
  memsearch wrote on this machine) and each one's memory, opened once;
- ``guard``: who may ask (127.0.0.1 only, the token, Host and Origin, the CSRF token);
- ``exits``: the one function every memory text passes through on its way out (redaction);
- ``html``: escaping by construction, the page frame;
- ``timeline_view``, ``memory_view`` (search, expand, transcript), ``inbox_view``,
  ``activity_view`` (what memory did), ``actions`` (every write, a table): the pages;
- ``server``: the standard library's threading HTTP server, the routes, the static files
  (``static/``: CSS, the script that draws the charts and adds keys and live updates; no build
  step, no CDN).

docs/ui.md says why each choice was made.
"""

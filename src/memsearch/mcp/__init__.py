"""``memsearch mcp``: the memory as an MCP server over stdio, for any agent host that speaks MCP.

The server is one more caller of ``MemSearch``: every operation goes through the store's owner
(``memsearch.service.owner``), so the server never holds the CLI, the hooks or a program out of
the store. Modules: ``scope`` (which project, memory folder, collection and store), ``budget``
(input limits and the size of what a result may return), ``tools`` (the five tools and their
descriptions), ``resources`` (journals, PROJECT.md, USER.md) and ``server`` (wiring to the SDK and
the stdio run). Importing this package imports nothing heavy; the SDK is imported by ``server``.
"""

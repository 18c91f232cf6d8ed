"""MCP both ways, on the client side (where the user's tools are).

- :mod:`.sources`: MCP servers configured in gemini-cli's ``mcpServers`` as
  tool sources whose tools join the local registry.
- :mod:`.serve`: gemini-split's own tool registry served over MCP
  (``gemini-split mcp serve``), for gemini-cli, Claude Code or any MCP host.

Both need the ``mcp`` SDK, which is imported only when they are used.
"""

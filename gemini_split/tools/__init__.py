"""The tool runtime: what runs a model's tool call where the user's files are.

A client runs it for its own session; a server runs the same code for a
``--tools server`` session through its tool host (:mod:`.tool_host`, handed
to the server by the composition root: the server never imports this
package). :mod:`.executor` runs one call (validate, approve —
:mod:`.approval` —, run, report), confined to the :mod:`.workspace`, with
:mod:`.checkpoints` and the :mod:`.edit_journal` beside it; the tools are
:mod:`.base`'s ``Tool`` subclasses in a :mod:`.registry`: the built-in ones
(:mod:`.builtin`), an MCP server's (:mod:`.mcp`), a sub-agent's own MCP
servers' (:mod:`.agent_mcp`) and remote Agent2Agent agents (:mod:`.a2a`).

Kept light: importing a module of it loads only that module's imports
(``approval_mode`` is on the command line's parser path).
"""

"""The Agent Client Protocol face (issue 17): editors drive gemini-split.

- :mod:`.jsonrpc` — JSON-RPC 2.0 messages, sans-IO (error codes -32700…).
- :mod:`.peer` — one JSON-RPC peer over any transport's ``MessageStream``.
- :mod:`.agent` — ACP methods ↔ native sessions (``open_client``).
- :mod:`.updates` — native events and history as ``session/update``.
- :mod:`.tools` — file and shell tools through the editor.
- :mod:`.ring` — the last messages of a session, for late joiners.
- :mod:`.bridge` — ``serve --acp-ws``: ACP over WebSocket, shared sessions.
"""

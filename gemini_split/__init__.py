"""gemini-split: a Gemini coding agent split across machines.

The terminal UI and the local tools (client side) and the agent loop that
talks to Gemini (server side) speak one protocol over pluggable transports:
in-process loopback, WebSocket, or stdio.
"""

__version__ = "0.1.0"

"""The session core: one conversation, its events to every view, its
requests, the agent loop and the tools the server runs."""

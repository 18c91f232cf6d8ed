"""What plugs into a request: sub-agents, compression, rewind, skills, the
user's tool hooks, approvals, the tools a server runs, the system prompt —
each a step around a tool call, an observer of the chain, or a request's
body, put together for each request by :mod:`.assembly`. Nothing below
(``chain/``, ``request/``) imports a feature."""

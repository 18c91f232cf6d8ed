"""A request as an object: its lifecycle (:mod:`.run`), the questions it
asks clients and waits for (:mod:`.asks`, :mod:`.tool_calls`), and what
it writes to the store (:mod:`.saving`). It knows no feature and no
agent chain."""

"""The cyclic garbage collector, paused while start-up's modules load.

A module's functions, classes and constants are made to be kept, yet their
allocations set off a collection every few hundred: ~25 while trio,
msgspec, the protocol and the client load (~7 ms of a one-shot call's CPU),
~200 more, one of them full, while google-genai loads for embedded mode
(~50 ms), and they find almost nothing to free. :class:`paused_collection`
turns the collector off for such a block and, at its end, freezes what
exists (``gc.freeze``: never scanned again, so the first collection after
it does not walk everything the imports made at once), then turns it back
on. The price: the few thousand objects the imports left as cyclic garbage
are frozen too and never freed (a few hundred KB).

That is a decision for the process's owner only: the console script
(``cli.main`` without an ``env``, which sets
:attr:`Environment.owns_process <gemini_split.environment.Environment>`), not
``main`` inside another program or a test, whose objects must stay
collectable. A leaf module: ``cli`` and ``app`` both use it.
"""

from __future__ import annotations


class paused_collection:
    """``with paused_collection(owns_process): import …`` — see the module
    doc; nothing changes when ``owns_process`` is false."""

    def __init__(self, owns_process: bool):
        self._active = owns_process
        self._was_enabled = False

    def __enter__(self) -> None:
        if self._active:
            import gc

            self._was_enabled = gc.isenabled()
            gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        if self._active:
            import gc

            gc.freeze()
            if self._was_enabled:
                gc.enable()

"""gemini-split: a Gemini coding agent split across machines.

The terminal UI and the local tools (client side) and the agent loop that
talks to Gemini (server side) speak one protocol over pluggable transports:
in-process loopback, WebSocket, or stdio.

The Python SDK (:mod:`gemini_split.sdk`, docs/sdk.md) is reachable from
here — ``from gemini_split import Client`` — but loaded on first use only:
``import gemini_split`` stays as cheap as ``gemini-split --version`` and the
thin ``-p`` path need it to be.
"""

__version__ = "0.1.0"

#: The SDK's names this package lends, each loaded on first use.
_SDK_NAMES = ("Client", "SyncClient", "tool")

TYPE_CHECKING = False  # typing is not imported on `gemini-split --version`'s path
if TYPE_CHECKING:
    from gemini_split.sdk import Client, SyncClient, tool  # noqa: F401


def __getattr__(name: str):  # noqa: ANN202 (no typing import here)
    if name in _SDK_NAMES:
        import gemini_split.sdk as sdk  # lazy_imports.EDGES

        return getattr(sdk, name)
    raise AttributeError(f"module 'gemini_split' has no attribute {name!r}")


def __dir__() -> list:
    return sorted([*globals(), *_SDK_NAMES])

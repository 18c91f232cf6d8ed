"""The root of every exception gemini-split raises on purpose.

Each subclass means one thing. Layers translate foreign exceptions into these
at their boundary (``raise TransportError(...) from exc``), so a caller never
has to know which library sits underneath. Which exit status an error ends
the program with is decided in one place:
:func:`gemini_split.exit_status.exit_status_for`.

Names: an exception says what failed (``ConnectFailed``, ``ToolFailed``) or
ends in ``Error``; a protocol message is named after its wire ``type``
(``ToolError`` is the ``tool_error`` event, never raised); a payload a
message carries is a noun (``ToolFailure``: the code, message and hint of a
failed tool call, which ``ToolFailed.to_failure()`` builds).
"""

from __future__ import annotations

#: typing.TYPE_CHECKING without importing typing: this module is on the
#: shell's path (--version, Tab completion), where typing costs ~3 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from gemini_split.protocol import ToolFailure


class GeminiSplitError(Exception):
    """Base class of all gemini-split errors."""


class ConfigurationError(GeminiSplitError):
    """The user's configuration (flags, environment, files) cannot work.

    The message says what is wrong and how to fix it; it is shown as is.
    """


class ProfileError(ConfigurationError):
    """A server profile file or entry is unusable."""


class SettingsError(ConfigurationError):
    """A settings.json file is unusable (not JSON, not an object, or a known
    key of the wrong type); the message names the file and the key."""


class BadInput(ConfigurationError):
    """What the user gave us to work on is unusable: an empty prompt,
    standard input that is not text, a workspace that is not a directory."""


class MissingApiKey(ConfigurationError):
    """A Gemini model was asked for and there is no API key."""


class BadCredentials(MissingApiKey):
    """A Google Cloud credentials file is missing, unreadable or malformed;
    the message names the file and what is wrong (exit status 41, as a
    missing key)."""


class WorktreeFailed(GeminiSplitError):
    """The git worktree ``-w/--worktree`` asked for could not be made; the
    text says why in git's words (exit status 1, as gemini-cli's)."""


class ToolFailed(GeminiSplitError):
    """A tool could not do what was asked; the model is told why.

    ``code`` is short and stable (``not_found``, ``outside_workspace``,
    ``invalid_arguments``, ``refused``, ``timeout``…); ``hint`` says what the
    model could do instead.
    """

    def __init__(self, code: str, message: str, hint: str | None = None):
        super().__init__(message)
        self.code = code
        self.hint = hint

    def to_failure(self) -> ToolFailure:
        from gemini_split.protocol import ToolFailure  # lazy_imports.EDGES

        return ToolFailure(code=self.code, message=str(self), hint=self.hint)

"""gemini-cli's ``GEMINI_SYSTEM_MD`` and ``GEMINI_WRITE_SYSTEM_MD``: the
user's own system prompt, and the built-in one written to a file.

Both variables take gemini-cli's values (``resolvePathFromEnv`` in 0.61):
``true``/``1`` mean the project's ``.gemini/system.md`` (under the working
directory); ``false``/``0``, empty or unset mean off; anything else is a
path (``~`` expanded, relative to the working directory).

``GEMINI_SYSTEM_MD``'s file is the client's: read here, where the user is,
and sent in the session context (``SessionContext.system_prompt``, 1.4) to
wherever the agent loop runs, which uses it in place of the built-in system
prompt (``server/session/features/prompts.custom_instruction``). A missing file is
gemini-cli's error, ``missing system prompt file '<path>'``; a file over
:data:`~gemini_split.protocol.SYSTEM_PROMPT_LIMIT` characters is refused
(not cut: a prompt missing its end would lose rules silently).

``GEMINI_WRITE_SYSTEM_MD`` asks the server for the system instruction it
would send (``get_system_prompt``, 1.4) and writes it to the file, as
gemini-cli writes its own each time it builds it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from gemini_split.errors import ConfigurationError
from gemini_split.files import read_bounded, replace_atomically

#: The variables, as gemini-cli names them.
SYSTEM_MD = "GEMINI_SYSTEM_MD"
WRITE_SYSTEM_MD = "GEMINI_WRITE_SYSTEM_MD"
#: The project default (``.gemini/system.md``), relative to the working directory.
DEFAULT_FILE = Path(".gemini") / "system.md"
#: The longest file read, in bytes (the protocol's limit is in characters:
#: an over-long file is refused either way).
MAX_BYTES = 256 * 1024
#: What the REPL shows while a custom system prompt is in use (gemini-cli's).
INDICATOR = "|⌐■_■|"


def resolve_path(value: str | None, cwd: Path, home: str | None) -> Path | None:
    """The file a variable names, as gemini-cli's ``resolvePathFromEnv``
    reads it; None when it is off."""
    text = (value or "").strip()
    if not text or text.lower() in ("0", "false"):
        return None
    if text.lower() in ("1", "true"):
        return cwd / DEFAULT_FILE
    if text == "~" or text.startswith("~/"):
        text = str(Path(home or Path.home()) / text[2:]) if text != "~" else str(home or Path.home())
    path = Path(text)
    return Path(os.path.normpath(path if path.is_absolute() else cwd / path))


def custom_prompt_file(environ: Mapping[str, str], cwd: Path) -> Path | None:
    """Where ``GEMINI_SYSTEM_MD`` points (None: the built-in prompt)."""
    return resolve_path(environ.get(SYSTEM_MD), cwd, environ.get("HOME"))


def write_prompt_file(environ: Mapping[str, str], cwd: Path) -> Path | None:
    """Where ``GEMINI_WRITE_SYSTEM_MD`` asks the system prompt to be written (None: nowhere)."""
    return resolve_path(environ.get(WRITE_SYSTEM_MD), cwd, environ.get("HOME"))


def read_custom_prompt(path: Path) -> str:
    """The text of the user's system prompt file. Raises
    :class:`ConfigurationError`: gemini-cli's ``missing system prompt file
    '<path>'`` when it does not exist, else what is wrong with it."""
    from gemini_split.protocol import SYSTEM_PROMPT_LIMIT

    try:
        data = read_bounded(path, MAX_BYTES)
    except FileNotFoundError:
        raise ConfigurationError(f"missing system prompt file '{path}' ({SYSTEM_MD}); create it, or set "
                                 f"{SYSTEM_MD}=0 for the built-in system prompt") from None
    except OSError as exc:
        raise ConfigurationError(f"cannot read the system prompt file '{path}' ({SYSTEM_MD}): "
                                 f"{exc.strerror or exc}") from None
    text = data[:MAX_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_BYTES or len(text) > SYSTEM_PROMPT_LIMIT:
        raise ConfigurationError(f"the system prompt file '{path}' ({SYSTEM_MD}) is over {MAX_BYTES // 1024} KiB: "
                                 "shorten it (gemini-cli's own system prompt is about 25 KiB)")
    return text


def write_prompt(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (its directory created), replaced whole.
    Raises :class:`OSError`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, text.encode("utf-8"))

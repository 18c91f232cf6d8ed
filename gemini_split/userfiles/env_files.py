"""``.env`` files, found and applied as gemini-cli does (issue 31 item 8).

The first of these, walking from the working directory up to ``/``:
``DIR/.gemini/.env`` then ``DIR/.env`` in each directory; then
``~/.gemini/.env`` and ``~/.env``. Only in a trusted folder (see
:func:`gemini_split.userfiles.settings.is_folder_trusted`): an untrusted project's
``.env`` could otherwise set the key a run uses. ``advanced.ignoreLocalEnv``
skips plain ``.env`` files other than the home directory's.

A variable already in the environment is never replaced; a project ``.env``
(one not under a ``.gemini`` directory) does not set ``DEBUG`` or
``DEBUG_MODE`` (gemini-cli's ``advanced.excludedEnvVars`` default).

Hostile input: the file is read with :func:`gemini_split.files.read_bounded`
(a FIFO or device is refused, not waited on; more than :data:`MAX_ENV_BYTES`
is refused), parsed by python-dotenv without interpolation; lines it cannot
parse are named in one warning and skipped. A file that cannot be used sets
nothing and says why on stderr; the run goes on, as gemini-cli's does.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from gemini_split.environment import Environment
from gemini_split.errors import SettingsError
from gemini_split.files import read_bounded

#: A ``.env`` over this size is refused (it holds a handful of variables).
MAX_ENV_BYTES = 256 * 1024
#: Never set from a project's ``.env`` (gemini-cli's default exclusion).
EXCLUDED_FROM_PROJECT = ("DEBUG", "DEBUG_MODE")


def find_env_file(start: Path, home: Path, *, ignore_local: bool = False) -> Path | None:
    """The ``.env`` gemini-cli would load for a run in ``start`` (in a
    trusted folder), or None."""
    directory = Path(os.path.abspath(start))
    while True:
        for candidate in (directory / ".gemini" / ".env", directory / ".env"):
            if candidate.name == ".env" and candidate.parent == directory and ignore_local and directory != home:
                continue
            if os.path.lexists(candidate):
                return candidate
        if directory.parent == directory:
            break
        directory = directory.parent
    for candidate in (home / ".gemini" / ".env", home / ".env"):
        if os.path.lexists(candidate):
            return candidate
    return None


def read_env_file(path: Path) -> tuple[dict[str, str], list[str]]:
    """The variables ``path`` sets, and warnings for what in it was not
    used. Raises ``OSError`` or ``ValueError`` (size, encoding) when the file
    cannot be used at all; python-dotenv is imported only once the file
    has been read (an extension without a ``.env`` is read on every run)."""
    data = read_bounded(path, MAX_ENV_BYTES)
    if len(data) > MAX_ENV_BYTES:
        raise ValueError(f"larger than {MAX_ENV_BYTES // 1024} KiB")
    text = data.decode("utf-8")  # UnicodeDecodeError is a ValueError

    import logging  # lazy_imports.EDGES: not on Tab completion's path

    from dotenv import dotenv_values

    bad: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            # "python-dotenv could not parse statement starting at line N"
            bad.append(str(record.args[0]) if record.args else "?")

    dotenv_log = logging.getLogger("dotenv.main")
    handler = _Collect(logging.WARNING)
    propagate = dotenv_log.propagate
    dotenv_log.addHandler(handler)
    dotenv_log.propagate = False
    try:
        values = dotenv_values(stream=io.StringIO(text), interpolate=False)
    finally:
        dotenv_log.removeHandler(handler)
        dotenv_log.propagate = propagate
    warnings = [f"{path}: line(s) {', '.join(bad)} are not NAME=value; skipped"] if bad else []
    return {k: v for k, v in values.items() if v is not None and k and "\0" not in k + v}, warnings


def with_env_file(env: Environment, *, trusted: bool, ignore_local: bool = False) -> Environment:
    """``env`` with the variables of its ``.env`` file added (see the
    module's docstring); ``env`` itself when there is none to add. The names
    added are in the result's ``env_file_names`` (a local daemon started by
    this run must not inherit them: they are this project's).

    When ``env`` owns the process, the variables are set in ``os.environ``
    too, so tool processes see them as gemini-cli's do."""
    if not trusted:
        return env
    home = Path(env.environ.get("HOME") or Path.home())
    path = find_env_file(env.cwd, home, ignore_local=ignore_local)
    if path is None:
        return env
    try:
        values, warnings = read_env_file(path)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        env.warn(f"gemini-split: {path}: not loaded ({reason}); no variable was set from it")
        return env
    for line in warnings:
        env.warn(f"gemini-split: {line}")
    project = ".gemini" not in path.parts
    added = {k: v for k, v in values.items()
             if k not in env.environ and not (project and k in EXCLUDED_FROM_PROJECT)}
    if not added:
        return env
    if env.owns_process and env.environ is os.environ:
        os.environ.update(added)
        environ = os.environ
    else:
        environ = {**env.environ, **added}
    result = Environment(env.stdin, env.stdout, env.stderr, environ, env.cwd, owns_process=env.owns_process)
    result.env_file_names = frozenset(added)
    return result


def load_env_file(env: Environment, *, skip_trust: bool = False) -> Environment:
    """:func:`with_env_file` for a run in ``env.cwd``: trusted as the
    settings decide (``--skip-trust`` trusts it), ``advanced.ignoreLocalEnv``
    from them. Settings that cannot be read load no ``.env`` (the run
    reports them when it reads them itself)."""
    home = Path(env.environ.get("HOME") or Path.home())
    if find_env_file(env.cwd, home, ignore_local=False) is None:
        return env  # no .env anywhere: the settings (msgspec) are not read for it (Tab completion's path)
    from gemini_split.userfiles.settings import load_settings

    try:
        loaded = load_settings(env, trust=True if skip_trust else None)
    except SettingsError:
        return env
    return with_env_file(env, trusted=loaded.trusted, ignore_local=loaded.merged.advanced.ignore_local_env)

"""What the REPL says about itself: ``/about``'s facts, ``/bug``'s report
built on them (gemini-cli's), and where ``/docs`` points.

``/bug [TITLE]`` prints the facts a bug report needs (never a secret: the
model's account is described, not its key) and where to report: the URL of
``advanced.bugCommand.urlTemplate`` in settings.json with ``{title}``,
``{info}`` and ``{problem}`` filled in (gemini-cli's setting), else the
issue tracker the installed package names (its ``Project-URL``), else it
says that this build names none. Nothing is opened: the REPL may run over
ssh, where a browser would start on the wrong machine (or in this
terminal). The conversation is not attached; ``/chat share FILE`` writes it.
"""

from __future__ import annotations

import platform
import resource
import sys
from pathlib import Path
from urllib.parse import quote

from rich.text import Text

from gemini_split import __version__
from gemini_split.ui.safe_text import visible
from gemini_split.userfiles.system_prompt import INDICATOR

from ..command_context import CommandContext

#: gemini-cli's documentation: the files and formats gemini-split shares with it.
GEMINI_CLI_DOCS = "https://goo.gle/gemini-cli-docs"


def about_rows(repl: CommandContext) -> list[tuple[str, str]]:
    """``/about``: versions, model, how the model is reached (never a
    secret), the server, the session, the system prompt."""
    client = repl.require_client()
    connected = client.connected
    assert connected is not None
    address = repl.settings.endpoint.server or "embedded (the agent loop runs in this process)"
    return [
        ("version", f"gemini-split {__version__}"),
        ("model", repl.model or connected.model or "unknown"),
        ("auth", connected.model_auth or "not said by the server"),
        ("server", f"{address} · {connected.server or 'unknown'} · protocol {connected.protocol_version}"),
        ("session", connected.session_id),
        ("system prompt", _system_prompt_source(repl)),
    ]


def _system_prompt_source(repl: CommandContext) -> str:
    """Where the system prompt comes from: the built-in one, or the
    user's own file (``GEMINI_SYSTEM_MD``, gemini-cli's ``|⌐■_■|``)."""
    path = repl.settings.context.system_prompt_file
    if path is None:
        return "built-in"
    return f"{INDICATOR} custom, from {visible(str(path), newlines=False)} (GEMINI_SYSTEM_MD)"


def bug_info(repl: CommandContext) -> str:
    """gemini-cli's list of facts for a report, in its Markdown."""
    facts = dict(about_rows(repl))
    sandbox = repl.settings.tools.sandbox
    term = repl.env.environ.get("TERM_PROGRAM") or repl.env.environ.get("TERM") or "Unknown"
    rows = [
        ("CLI Version", facts["version"]),
        ("Session ID", facts["session"]),
        ("Operating System", f"{sys.platform} {platform.release()} (Python {platform.python_version()})"),
        ("Sandbox Environment", sandbox.mode if sandbox is not None and sandbox.mode != "none" else "no sandbox"),
        ("Model Version", facts["model"]),
        ("Auth Type", facts["auth"]),
        ("Server", facts["server"]),
        ("Memory Usage", f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MB (peak)"),
        ("Terminal Name", term),
    ]
    return "\n".join(f"* **{key}:** {visible(value, newlines=False)}" for key, value in rows)


async def bug_command(repl: CommandContext, args: list[str]) -> None:
    """``/bug [TITLE]``: the facts, and where to report them."""
    title = " ".join(args)
    info = bug_info(repl)
    repl.console.print(Text("Bug report" + (f": {visible(title, newlines=False)}" if title else ""), style="bold"))
    repl.console.print(Text(info), soft_wrap=True)
    template = _url_template(repl)
    if template:
        url = (template.replace("{title}", quote(title, safe="")).replace("{info}", quote("\n" + info + "\n", safe=""))
               .replace("{problem}", quote(title, safe="")))
        repl.console.print(Text(f"To submit your bug report, please open the following URL in your browser:\n{url}"),
                           soft_wrap=True)
    elif (tracker := _tracker()) is not None:
        repl.console.print(Text(f"To submit your bug report, open {tracker} and include the facts above."),
                           soft_wrap=True)
    else:
        repl.console.print(Text(
            "This build of gemini-split names no issue tracker: give the facts above to whoever provides it to "
            "you, or set advanced.bugCommand.urlTemplate in settings.json ({title}, {info} and {problem} are "
            "filled in) to have /bug make the link.", style="yellow"), soft_wrap=True)
    repl.console.print(Text("The conversation is not included: /chat share FILE.md writes it to a file you may "
                            "attach (read it for secrets first).", style="dim"), soft_wrap=True)


def docs_lines() -> list[str]:
    """``/docs``: where gemini-split's documentation is, and gemini-cli's."""
    lines = []
    source = Path(__file__).resolve().parents[4]
    if (source / "docs").is_dir() and (source / "README.md").is_file():
        lines.append(f"gemini-split's documentation: {source / 'README.md'} and {source / 'docs'}/")
    elif (home := _project_url("documentation", "homepage")) is not None:
        lines.append(f"gemini-split's documentation: {home}")
    else:
        lines.append("gemini-split's documentation: README.md and docs/ in its source distribution "
                     "('pip download --no-deps --no-binary :all: gemini-split' fetches it)")
    lines.append(f"gemini-cli's documentation (the settings, files and formats gemini-split shares): {GEMINI_CLI_DOCS}")
    lines.append("/help lists the commands; gemini-split --help and gemini-split COMMAND --help the rest.")
    return lines


def _url_template(repl: CommandContext) -> str | None:
    loaded = repl.settings.loaded_settings
    bug = loaded.merged.advanced.bug_command if loaded is not None else None
    return bug.url_template if bug is not None and bug.url_template else None


def _tracker() -> str | None:
    return _project_url("issue", "bug", "tracker")


def _project_url(*labels: str) -> str | None:
    """The installed package's ``Project-URL`` whose label holds one of ``labels``."""
    from importlib.metadata import PackageNotFoundError, metadata  # lazy_imports.EDGES

    try:
        entries = metadata("gemini-split").get_all("Project-URL") or []
    except PackageNotFoundError:
        return None
    for entry in entries:
        label, _, url = entry.partition(",")
        if any(word in label.lower() for word in labels) and url.strip():
            return url.strip()
    return None

"""The interactive REPL and its slash commands.

``loop.py`` holds :class:`~gemini_split.ui.repl.loop.Repl` (the connection,
the read–answer loop, the toolbar, Ctrl-C); it is the top of ``ui/`` and
nothing in ``ui/`` imports it. The commands (``slash_commands.py``: the
table, dispatch and Tab completion, with the short commands; ``commands/``:
one module per larger command) see the REPL only as a
:class:`~gemini_split.ui.repl.command_context.CommandContext`. Beside them: the
line editor and menus (``prompt_input.py``), approval and ``ask_user``
questions (``approval_prompt.py``, ``questions.py``), ``!command``
(``shell_passthrough.py``), Ctrl+X's editor (``external_editor.py``),
``/stats``' counters (``session_stats.py``) and a history redrawn
(``transcript.py``). What the one-shot and attach paths share (rendering,
output formats, ``@path``, custom commands' expansion) stays in ``ui/``.
"""

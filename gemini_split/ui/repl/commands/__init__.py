"""The REPL's larger slash commands, one module each, and what they share
(``context_reload.py``). Each takes a
:class:`~gemini_split.ui.repl.command_context.CommandContext`; the table that names
them is ``ui/repl/slash_commands.py``."""

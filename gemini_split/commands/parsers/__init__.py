"""The subcommands' parser declarations: argparse only, light enough to
import on the start-up path. Each module's ``add_parser(commands)`` adds one
subcommand's arguments (``gemini_split.cli._Subcommands`` calls it when the
subcommand is on the command line, or when the completions need the whole
command line) and records, as the parsed arguments' ``run``, the
``"module:function"`` that runs it: ``gemini_split.cli`` imports only that
runner, whose module imports what it needs at its head."""

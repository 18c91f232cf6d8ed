"""The names of the one-shot output formats (``--output-format``).

A leaf module, so the command-line parser can offer them without loading the
renderers (and the protocol) in :mod:`gemini_split.ui.oneshot`.
"""

OUTPUT_FORMATS = ("text", "json", "stream-json")

"""The built-in tools: what runs on the user's machine when the model asks.

The tool classes live in their modules (``filesystem``, ``search``,
``shell``, ``web``) and are imported from there;
:func:`gemini_split.tools.registry.default_tools` builds the registry of all
of them without importing their dependencies up front.
"""

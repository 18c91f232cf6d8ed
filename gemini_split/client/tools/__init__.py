"""Local tools: what runs on the user's machine when the model asks.

The tool classes live in their modules (``filesystem``, ``search``,
``shell``, ``web``) and are imported from there; :func:`default_tools`
builds the registry of all of them without importing their dependencies
up front.
"""

from .base import Tool, ToolContext, ToolFailed, ToolKind, validate_arguments
from .registry import ToolRegistry, default_tools

__all__ = ["Tool", "ToolContext", "ToolFailed", "ToolKind", "ToolRegistry", "default_tools", "validate_arguments"]

"""Local tools: what runs on the user's machine when the model asks."""

from .base import Tool, ToolContext, ToolFailed, ToolKind, validate_arguments
from .registry import ToolRegistry, default_tools

__all__ = ["Tool", "ToolContext", "ToolFailed", "ToolKind", "ToolRegistry", "default_tools", "validate_arguments"]

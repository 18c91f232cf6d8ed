"""The approval modes (``--approval-mode``, ``GEMINI_APPROVAL_MODE``).

A leaf module with no imports of its own, so the command-line parser can
offer the modes without loading the tools; the policy that applies them is
:mod:`gemini_split.tools.approval`.
"""

from __future__ import annotations

from enum import Enum


class ApprovalMode(Enum):
    """``--approval-mode``: how much runs without asking."""

    DEFAULT = "default"  # ask before edits, shell and network
    AUTO_EDIT = "auto_edit"  # edits run; shell and network still ask
    YOLO = "yolo"  # nothing asks
    PLAN = "plan"  # read-only tools only; the model is asked for a plan


def parse_approval_mode(text: str) -> ApprovalMode:
    """The mode named by ``--approval-mode`` or ``GEMINI_APPROVAL_MODE``.

    Case and surrounding blanks do not matter, and ``auto-edit`` is accepted
    for ``auto_edit``. Raises :class:`ValueError` naming the valid modes."""
    key = str(text).strip().lower().replace("-", "_")
    for mode in ApprovalMode:
        if mode.value == key:
            return mode
    valid = ", ".join(m.value for m in ApprovalMode)
    raise ValueError(f"unknown approval mode {text!r}: valid modes are {valid}")

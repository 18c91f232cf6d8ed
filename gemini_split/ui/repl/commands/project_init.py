"""``/init``: a GEMINI.md for the project, written by the model, as
gemini-cli's ``/init`` does it.

When the workspace has no ``GEMINI.md``, an empty one is created (so the
model's ``write_file`` fills a file that exists, through the normal
approval) and gemini-cli's analysis prompt is sent; when it has one,
nothing changes and the user is told so — an existing file is never
overwritten by ``/init``.
"""

from __future__ import annotations

import os
from pathlib import Path

EXISTS = "A GEMINI.md file already exists in this directory. No changes were made."
CREATED = "Empty GEMINI.md created. Now analyzing the project to populate it."

PROMPT = """
You are an AI agent that brings the power of Gemini directly into the terminal. Your task is to analyze the \
current directory and generate a comprehensive GEMINI.md file to be used as instructional context for future \
interactions.

**Analysis Process:**

1.  **Initial Exploration:**
    *   Start by listing the files and directories to get a high-level overview of the structure.
    *   Read the README file (e.g., `README.md`, `README.txt`) if it exists. This is often the best place to start.

2.  **Iterative Deep Dive (up to 10 files):**
    *   Based on your initial findings, select a few files that seem most important (e.g., configuration files, \
main source files, documentation).
    *   Read them. As you learn more, refine your understanding and decide which files to read next. You don't \
need to decide all 10 files at once. Let your discoveries guide your exploration.

3.  **Identify Project Type:**
    *   **Code Project:** Look for clues like `package.json`, `requirements.txt`, `pom.xml`, `go.mod`, \
`Cargo.toml`, `build.gradle`, or a `src` directory. If you find them, this is likely a software project.
    *   **Non-Code Project:** If you don't find code-related files, this might be a directory for documentation, \
research papers, notes, or something else.

**GEMINI.md Content Generation:**

**For a Code Project:**

*   **Project Overview:** Write a clear and concise summary of the project's purpose, main technologies, and \
architecture.
*   **Building and Running:** Document the key commands for building, running, and testing the project. Infer \
these from the files you've read (e.g., `scripts` in `package.json`, `Makefile`, etc.). If you can't find \
explicit commands, provide a placeholder with a TODO.
*   **Development Conventions:** Describe any coding styles, testing practices, or contribution guidelines you \
can infer from the codebase.

**For a Non-Code Project:**

*   **Directory Overview:** Describe the purpose and contents of the directory. What is it for? What kind of \
information does it hold?
*   **Key Files:** List the most important files and briefly explain what they contain.
*   **Usage:** Explain how the contents of this directory are intended to be used.

**Final Output:**

Write the complete content to the `GEMINI.md` file. The output must be well-formatted Markdown.
"""


def start(workspace: Path) -> bool:
    """Create an empty ``GEMINI.md`` in ``workspace`` for the model to
    fill; False when one is there already (a symlink or a directory by that
    name included), and nothing is changed. Raises ``OSError``."""
    path = workspace / "GEMINI.md"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    return True

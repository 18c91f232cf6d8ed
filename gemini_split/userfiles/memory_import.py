"""``@path`` imports in context files, as gemini-cli's memory import
processor (``reference/memport.md``) resolves them (issue 31 item 2).

A word ``@./x.md``, ``@../y.md``, ``@sub/z.md`` or ``@/abs/w.md`` (a path
with a file extension) outside code (fenced blocks and inline code spans) is
replaced by the file's text, between gemini-cli's markers::

    <!-- Imported from: ./x.md -->
    …
    <!-- End of import from: ./x.md -->

Imports nest, relative to the importing file, up to :data:`MAX_DEPTH`
levels. A file already imported in this tree (a cycle, or the same file
twice) is not read again; a path outside the allowed directories (the
workspace and the config directory, symlinks resolved) is not read; a file
that cannot be read is not either: each leaves gemini-cli's
``<!-- Import failed: PATH - REASON -->`` (or ``File already processed``)
comment in its place and a warning. The whole expansion of one context file
is bounded by ``max_bytes``.

Given a ``tree`` list, the expansion also records which file imported which
(:class:`ImportNode`, gemini-cli's ``MemoryFile`` import tree): what
``/memory show`` draws.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from gemini_split.files import read_bounded

#: gemini-cli's default maximum import depth.
MAX_DEPTH = 5

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})[^\n]*\n.*?(?:^\1?\2[`~]*[ \t]*$|\Z)", re.M | re.S)
_INLINE = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
_IMPORT = re.compile(r"(?<!\S)@((?:\.{1,2}/|/)?[^\s`<>]+\.[A-Za-z0-9]+)(?=\s|$)")


@dataclass
class ImportNode:
    """One import as written in its file (``written``), the file it named
    (``path``, symlinks resolved), why it was not read (``problem``, empty
    when it was) and its own imports, in the order they were imported."""

    written: str
    path: Path
    problem: str = ""
    imports: list[ImportNode] = field(default_factory=list)


def _code_spans(text: str) -> list[tuple[int, int]]:
    spans = [m.span() for m in _FENCE.finditer(text)]
    for m in _INLINE.finditer(text):
        if not any(a <= m.start() < b for a, b in spans):
            spans.append(m.span())
    return spans


def _inside(path: Path, allowed: tuple[Path, ...]) -> bool:
    return any(path == a or a in path.parents for a in allowed)


def expand_imports(text: str, source: Path, *, allowed: tuple[Path, ...], warnings: list[str],
                   max_bytes: int, tree: list[ImportNode] | None = None, _depth: int = 0,
                   _seen: set[Path] | None = None, _budget: list[int] | None = None) -> str:
    """``text`` (the content of ``source``) with its imports replaced (see
    the module's docstring). Never raises for a bad import: it is a comment
    in the result and a line in ``warnings``. ``tree``, when given, gets
    an :class:`ImportNode` per import of ``text``, in order."""
    seen = _seen if _seen is not None else {Path(os.path.realpath(source))}
    budget = _budget if _budget is not None else [max_bytes - len(text.encode())]
    allowed = tuple(Path(os.path.realpath(a)) for a in allowed) if _depth == 0 else allowed
    code = _code_spans(text)
    out: list[str] = []
    last = 0
    for m in _IMPORT.finditer(text):
        if any(a <= m.start() < b for a, b in code):
            continue
        written = m.group(1)
        out.append(text[last:m.start()])
        last = m.end()
        node = ImportNode(written, Path(os.path.realpath(source.parent / os.path.expanduser(written))))
        if tree is not None:
            tree.append(node)
        out.append(_one_import(node, source, allowed, warnings, max_bytes, _depth, seen, budget))
    out.append(text[last:])
    return "".join(out)


def _one_import(node: ImportNode, source: Path, allowed: tuple[Path, ...], warnings: list[str], max_bytes: int,
                depth: int, seen: set[Path], budget: list[int]) -> str:
    written = node.written

    def failed(reason: str) -> str:
        node.problem = reason
        warnings.append(f"gemini-split: {source}: import {written} not read: {reason}")
        return f"<!-- Import failed: {written} - {reason} -->"

    if depth >= MAX_DEPTH:
        return failed(f"nested more than {MAX_DEPTH} levels deep")
    target = node.path
    if not _inside(target, allowed):
        return failed("outside the workspace")
    if target in seen:
        node.problem = "already imported"
        warnings.append(f"gemini-split: {source}: import {written} skipped: already imported (a cycle?)")
        return f"<!-- File already processed: {written} -->"
    seen.add(target)
    try:
        data = read_bounded(target, max(budget[0], 0))
    except OSError as exc:
        return failed(exc.strerror or str(exc))
    if len(data) > budget[0]:
        return failed(f"the imports of one context file exceed {max_bytes // 1024} KiB")
    budget[0] -= len(data)
    content = expand_imports(data.decode("utf-8", errors="replace"), target, allowed=allowed, warnings=warnings,
                             max_bytes=max_bytes, tree=node.imports, _depth=depth + 1, _seen=seen, _budget=budget)
    return f"<!-- Imported from: {written} -->\n{content}\n<!-- End of import from: {written} -->"

"""A frontmatter of plain ``key: value`` lines, read without PyYAML.

A SKILL.md's frontmatter is nearly always ``name:`` and ``description:``
(sometimes ``license:`` and the like), one plain scalar a line. PyYAML
takes ~18 ms to import; the thin ``-p`` path reads every skill on every
run. :func:`plain_mapping` reads that subset and gives what
``yaml.safe_load`` gives for it, and answers None for anything else (the
caller then asks PyYAML, which also words the errors). A text is in the
subset when every line is blank or ``key: value`` where

* the key is a word (letters, digits, ``_``, ``-``; starting with a letter
  or ``_``) that YAML reads as a string (not ``true``, ``on``, ``null``…);
* the value is one plain scalar that YAML reads as a string: it does not
  start with an indicator, a digit, a sign, a dot or ``~``, ``<``, ``=``;
  it is not a boolean or null word; it holds no ``: `` or `` #`` and does
  not end with ``:``; every character is printable (no tab, no other line
  break than the line's own).

Nested values, lists, quotes, comments, block scalars, continuation lines
and empty values are left to PyYAML. ``tests/test_plain_yaml.py`` compares
this reader with ``yaml.safe_load`` on hand-written and generated texts.
"""

import re

#: PyYAML's implicit resolvers for booleans (YAML 1.1) and null, for plain
#: scalars that start with a letter: these words are not strings.
_NOT_A_STRING = re.compile(r"yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE"
                           r"|on|On|ON|off|Off|OFF|null|Null|NULL")
_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*): +(.*)")
#: A plain scalar's first character when YAML may read it as anything but a
#: string: indicators, and the first characters of numbers, timestamps,
#: ``~`` (null), ``<<`` (merge) and ``=`` (value).
_UNSAFE_START = frozenset("-?:,[]{}#&*!|>'\"%@`+.0123456789~<=")


def plain_mapping(text: str) -> dict[str, str] | None:
    """The mapping ``yaml.safe_load(text)`` returns, when ``text`` is in the
    subset the module's docstring describes; None otherwise (ask PyYAML)."""
    mapping: dict[str, str] = {}
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if not line.strip(" "):
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            return None
        key, value = match.group(1), match.group(2).rstrip(" ")
        if not (_is_plain_string(key) and _is_plain_string(value)):
            return None
        mapping[key] = value  # the last of repeated keys wins, as in PyYAML
    return mapping or None


def _is_plain_string(scalar: str) -> bool:
    return (scalar != "" and scalar[0] not in _UNSAFE_START and scalar.isprintable()
            and ": " not in scalar and " #" not in scalar and not scalar.endswith(":")
            and _NOT_A_STRING.fullmatch(scalar) is None)


__all__ = ["plain_mapping"]

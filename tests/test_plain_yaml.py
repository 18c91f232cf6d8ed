"""gemini_split.plain_yaml reads what PyYAML reads, or declines.

Every text it answers for must give exactly ``yaml.safe_load``'s mapping;
texts outside its subset must be declined (None), so PyYAML reads them."""

from __future__ import annotations

import random

import pytest
import yaml

from gemini_split.plain_yaml import plain_mapping

SKILL = "name: pdf\ndescription: Extract text and tables from PDF files, fill forms.\nlicense: Apache-2.0"


@pytest.mark.parametrize("text", [
    SKILL,
    "name: pdf\r\ndescription: Windows line ends\r\n",
    "\nname:   spaced   \n\n   \ndescription: it's a \"quoted\" word, [not a list] {nor a map}\n",
    "name: a\nname: b\ndescription: the last of repeated keys wins",
    "name: url\ndescription: see https://example.com/a:b?c=d#frag",
    "name: é\ndescription: ünïcödé, 中文, emoji 🙂",
    "name: x\ndescription: a % b @ c & d * e ! f | g > h ' i",
    "name: x\ndescription: ends with a dot.",
    "name: y\ndescription: n",
])
def test_a_plain_frontmatter_is_read_as_pyyaml_reads_it(text):
    assert plain_mapping(text) == yaml.safe_load(text)


@pytest.mark.parametrize("text", [
    "", "\n \n",                                    # nothing: PyYAML says None
    "name: pdf\ndescription: yes",                  # a boolean
    "name: pdf\ndescription: Off",
    "name: null\ndescription: x",                   # null
    "on: x\nname: a\ndescription: b",               # a key that is a boolean
    "name: 1.5\ndescription: x",                    # numbers, timestamps
    "name: 2026-12-02\ndescription: x",
    "name: 1:30\ndescription: x",
    "name: .inf\ndescription: x",
    "name: ~\ndescription: x",
    "name: a\ndescription: '# not a comment'",     # quoted
    'name: a\ndescription: "double"',
    "name: a # a comment\ndescription: x",         # a comment
    "# a comment line\nname: a\ndescription: x",
    "name: a\ndescription: a: b",                   # a mapping inside: an error
    "name: a\ndescription: ends with a colon:",
    "name: a\ndescription:",                        # empty: null
    "name: a\ndescription: >\n  folded",            # block scalars
    "name: a\ndescription: |\n  literal",
    "name: a\ndescription: first\n  continued",     # continuation line
    "name: a\nallowed-tools:\n  - read_file",       # nested list
    "name: a\nmetadata: {a: 1}",                    # flow mapping
    "name: a\ndescription: [x]",                    # flow sequence
    "name: a\ndescription: &anchor x",
    "name: a\ndescription: *alias",
    "name: a\ndescription: !!str x",
    "name: a\ndescription: -dash",
    "name:a\ndescription: no space after the colon",
    "name:\tpdf\ndescription: a tab",
    "name: a\tb\ndescription: a tab inside",
    "name: a\u2028b\ndescription: a line separator",
    "name: a\xa0b\ndescription: a no-break space",
    "name: a\rb\ndescription: a lone carriage return",
    "name: a\n...\ndescription: document end",
    "%YAML 1.1\nname: a",
    "  name: indented\n  description: x",
    "two words: a\ndescription: x",
    "<<: a\ndescription: x",
])
def test_anything_else_is_left_to_pyyaml(text):
    assert plain_mapping(text) is None


#: Pieces that put a generated text near every rule's edge.
PIECES = ["a", "Z", "_", "-", " ", "  ", ":", ": ", "#", " #", "'", '"', "1", "0x", ".", "~", "=", "<<", "yes", "No",
          "null", "on", "true", "é", "\t", "\r", "[", "]", "{", "}", ",", "&", "*", "!", "|", ">", "%", "@", "`", "?",
          "+", "2026-01-01", "\xa0", "\u2028", "\x85", "\\", "/", "é:", "a b"]


def random_text(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(1, 4)):
        key = rng.choice(["name", "description", "license", "on", "x-y", "_k", "a1", "1a", "no"])
        value = rng.choice(["", "w", "W x"]) + "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 4)))
        lines.append(f"{key}:{rng.choice([' ', '  ', ''])}{value}")
    return rng.choice(["\n", "\r\n"]).join(lines)


def test_on_generated_texts_it_agrees_with_pyyaml_whenever_it_answers():
    rng = random.Random(45)
    answered = 0
    for _ in range(20_000):
        text = random_text(rng)
        mine = plain_mapping(text)
        if mine is None:
            continue
        answered += 1
        assert mine == yaml.safe_load(text), repr(text)
    assert answered > 1_000  # the generator reaches the subset, not only its refusals

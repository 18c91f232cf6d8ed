"""The settings editor (gemini_split/userfiles/settings_edit.py): one key set or
removed in a settings.json, the rest of the file — comments, order,
indentation — kept as written; a file the reader refuses is refused and
left as it was."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings as hyp_settings, strategies as st

from gemini_split.errors import SettingsError
from gemini_split.userfiles.settings import parse_json_object
from gemini_split.userfiles.settings_edit import SettingsFile, set_setting, unset_setting

COMMENTED = """\
{
  // Which model, and why: the big one for reviews.
  "model": {"name": "gemini-2.5-pro"}, // see /model
  /* skills the team does not want */
  "skills": {
    "disabled": ["pdf"] // keep this one off
  },
  "mcpServers": {
    "time": {
      "command": "uvx" // the clock
    },
    "git": {"command": "uvx", "args": ["mcp-server-git"]}
  }
}
"""


def test_setting_a_key_changes_its_value_and_nothing_else(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(COMMENTED)
    assert set_setting(path, "model.name", "flash") is True
    assert path.read_text() == COMMENTED.replace('"gemini-2.5-pro"', '"flash"')
    assert set_setting(path, "skills.disabled", ["pdf", "xlsx"]) is True
    assert path.read_text() == COMMENTED.replace('"gemini-2.5-pro"', '"flash"').replace(
        '["pdf"]', '["pdf", "xlsx"]')
    assert set_setting(path, "model.name", "flash") is False  # already so: not written


def test_a_new_key_goes_after_the_last_key_of_its_object_indented_like_its_neighbours(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(COMMENTED)
    settings = SettingsFile.read(path)
    settings.set(("mcpServers", "my.server"), {"url": "https://example.invalid/mcp", "trust": True})
    settings.set("general.defaultApprovalMode", "plan")
    assert settings.save() is True
    assert path.read_text() == COMMENTED.replace(
        '''"args": ["mcp-server-git"]}
  }
}''', '''"args": ["mcp-server-git"]},
    "my.server": {
      "url": "https://example.invalid/mcp",
      "trust": true
    }
  },
  "general": {
    "defaultApprovalMode": "plan"
  }
}''')


def test_a_comment_ending_the_last_keys_line_stays_on_that_line(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text('{\n  "a": 1 // about a\n}\n')
    set_setting(path, "b", 2)
    assert path.read_text() == '{\n  "a": 1, // about a\n  "b": 2\n}\n'


def test_removing_a_key_takes_its_lines_and_a_comment_ending_them(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(COMMENTED)
    assert unset_setting(path, ("mcpServers", "time")) is True
    assert path.read_text() == COMMENTED.replace('''    "time": {
      "command": "uvx" // the clock
    },
''', "")
    assert unset_setting(path, ("mcpServers", "git")) is True
    assert '"mcpServers": {}' in path.read_text()
    assert unset_setting(path, ("mcpServers", "git")) is False
    assert unset_setting(path, "skills") is True
    assert path.read_text() == """\
{
  // Which model, and why: the big one for reviews.
  "model": {"name": "gemini-2.5-pro"}, // see /model
  /* skills the team does not want */
  "mcpServers": {}
}
"""


def test_removing_the_last_key_removes_the_comma_before_it_and_keeps_that_lines_comment(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text('{\n  "a": 1, // about a\n  "b": 2\n}\n')
    unset_setting(path, "b")
    assert path.read_text() == '{\n  "a": 1 // about a\n}\n'


def test_a_one_line_object_stays_on_one_line(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text('{"a": 1, "b": {"c": [1, 2]}}')
    settings = SettingsFile.read(path)
    settings.set("d", {"e": "x"})
    settings.unset("a")
    settings.set("b.c", [3])
    assert settings.text == '{"b": {"c": [3]}, "d": {"e": "x"}}'


def test_tabs_crlf_and_a_byte_order_mark_are_kept(tmp_path):
    path = tmp_path / "settings.json"
    path.write_bytes(b'\xef\xbb\xbf{\r\n\t"ui": {\r\n\t\t"theme": "x"\r\n\t}\r\n}\r\n')
    set_setting(path, "model.name", "pro")
    assert path.read_bytes() == (b'\xef\xbb\xbf{\r\n\t"ui": {\r\n\t\t"theme": "x"\r\n\t},\r\n'
                                 b'\t"model": {\r\n\t\t"name": "pro"\r\n\t}\r\n}\r\n')


@pytest.mark.parametrize("text", ["", "   \n", "// nothing yet\n"])
def test_a_missing_or_blank_file_becomes_an_object_after_what_it_held(tmp_path, text):
    path = tmp_path / "sub" / "settings.json"
    if text:
        path.parent.mkdir()
        path.write_text(text)
    set_setting(path, "model.name", "pro")
    assert parse_json_object(path.read_text(), path) == {"model": {"name": "pro"}}
    assert path.read_text().startswith(text.strip())


@pytest.mark.parametrize("text, message", [
    ('{"model": {"name": "x"},}', r"settings.json:1:25: not valid JSON: .*; left unchanged"),
    ('["a list"]', r"must hold a JSON object, not list; left unchanged"),
    ('{"model": "pro"}', r"'model' is not an object, so 'model.name' cannot be set; left unchanged"),
    ("\udcff", r"not UTF-8 text; left unchanged"),
    ("[" * 100_000 + "]" * 100_000, r"nested too deeply; left unchanged"),
])
def test_a_file_it_cannot_read_as_settings_is_refused_and_left_as_it_was(tmp_path, text, message):
    path = tmp_path / "settings.json"
    data = text.encode("utf-8", "surrogateescape")
    path.write_bytes(data)
    with pytest.raises(SettingsError, match=message):
        set_setting(path, "model.name", "pro")
    assert path.read_bytes() == data


def test_a_value_json_cannot_hold_changes_nothing(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(COMMENTED)
    settings = SettingsFile.read(path)
    with pytest.raises(TypeError):
        settings.set("model.name", object())
    assert settings.changed is False


def test_saving_keeps_the_files_permissions_and_writes_through_a_symbolic_link(tmp_path):
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text('{"a": 1}')
    os.chmod(real, 0o600)
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    set_setting(link, "b", True)
    assert link.is_symlink()
    assert real.read_text() == '{"a": 1, "b": true}'
    assert real.stat().st_mode & 0o777 == 0o600


def test_strings_that_look_like_comments_or_hold_escapes_are_values(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text('{\n  "url": "https://example.invalid/*x*/", // real\n  "q\\"k\\u00e9": "a\\\\"\n}\n')
    settings = SettingsFile.read(path)
    assert settings.get(['q"ké']) == "a\\"
    settings.set(['q"ké'], "é // not a comment")
    settings.set(["new\nline"], "/* also not */")
    assert parse_json_object(settings.text, path) == {
        "url": "https://example.invalid/*x*/", 'q"ké': "é // not a comment", "new\nline": "/* also not */"}
    assert "// real" in settings.text


def test_a_key_written_twice_is_edited_where_the_reader_takes_it_and_removed_everywhere(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text('{\n  "a": 1,\n  "a": 2\n}\n')
    settings = SettingsFile.read(path)
    settings.set("a", 3)
    assert settings.text == '{\n  "a": 1,\n  "a": 3\n}\n'
    assert settings.unset("a") is True
    assert settings.text == "{}\n"


_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=6)
_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | _names
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(_names, inner, max_size=3), max_leaves=8)
_edits = st.lists(st.tuples(st.lists(st.sampled_from(["a", "b", "c.d", "é"]), min_size=1, max_size=3),
                            st.none() | _values), min_size=1, max_size=6)


_ABSENT = object()


def _apply(data: dict, parts: list[str], value: object) -> None:
    for part in parts[:-1]:
        data = data.setdefault(part, {})
    data[parts[-1]] = value


def _drop(data: dict, parts: list[str]) -> None:
    for part in parts[:-1]:
        data = data.get(part)
        if not isinstance(data, dict):
            return
    data.pop(parts[-1], None)


@pytest.mark.timeout(120)  # 150 examples, each writing a file: ~10 s alone, far more on a loaded CI machine
@hyp_settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=_edits, one_line=st.booleans())
def test_any_series_of_edits_reads_back_as_the_same_edits_on_the_data(tmp_path, edits, one_line):
    """Set (value) or unset (None) keys in a commented file: what the
    settings reader then reads is the data with the same edits, and the
    comments are all still there."""
    base = '{"keep": 1} // tail\n' if one_line else '// head\n{\n  "keep": 1, // one\n  /* two */ "x": {}\n}\n'
    settings = SettingsFile(tmp_path / "settings.json", base)
    expected = parse_json_object(base, "base")
    for parts, value in edits:
        if value is None:
            settings.unset(parts)
            _drop(expected, parts)
        elif any(not isinstance(v := settings.get(parts[:i], _ABSENT), dict) and v is not _ABSENT
                 for i in range(1, len(parts))):
            with pytest.raises(SettingsError, match="is not an object"):
                settings.set(parts, value)
        else:
            settings.set(parts, value)
            _apply(expected, parts, value)
        assert parse_json_object(settings.text, "edited") == expected
    for comment in ("// tail",) if one_line else ("// head", "// one", "/* two */"):
        assert comment in settings.text

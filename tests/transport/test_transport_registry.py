"""Transports are found through the entry-point group, as any third-party
plugin would be: a real (temporary) distribution is put on sys.path."""

from __future__ import annotations

import textwrap
import warnings

import pytest

from gemini_split.transport import (
    TransportRegistry,
    UnknownScheme,
    default_registry,
    scheme_of,
)


def _install_fake_distribution(tmp_path, monkeypatch, name: str, entry_points: str, modules: dict[str, str]) -> None:
    dist_info = tmp_path / f"{name}-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    for module, source in modules.items():
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))


DUMMY_TRANSPORT = """
    from gemini_split.transport import Transport

    class CarrierPigeon(Transport):
        name = "pigeon"

        async def open_connection(self, address, options):
            raise NotImplementedError

        async def serve(self, address, handler, options, *, task_status):
            raise NotImplementedError

    transport = CarrierPigeon()
"""


def test_a_third_party_transport_is_found_by_its_scheme(tmp_path, monkeypatch):
    _install_fake_distribution(
        tmp_path, monkeypatch, "gemini-split-pigeon",
        '[gemini_split.transports]\npigeon = pigeon_transport:transport\n',
        {"pigeon_transport": DUMMY_TRANSPORT},
    )
    registry = TransportRegistry()
    assert "pigeon" in registry.schemes()
    transport = registry.get(scheme_of("pigeon://coop/7"))
    assert type(transport).__name__ == "CarrierPigeon"


def test_a_plugin_that_fails_to_import_warns_by_name_and_others_still_load(tmp_path, monkeypatch):
    _install_fake_distribution(
        tmp_path, monkeypatch, "gemini-split-broken",
        '[gemini_split.transports]\nbroken = broken_transport:transport\n',
        {"broken_transport": "raise ImportError('needs libfoo, which is not installed')\n"},
    )
    registry = TransportRegistry()
    with pytest.warns(UserWarning, match=r"transport plugin 'broken'.*broken_transport:transport.*gemini-split-broken.*libfoo"):
        with pytest.raises(UnknownScheme):
            registry.get("broken")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert registry.get("loopback").name == "loopback"


def test_a_plugin_whose_target_is_not_a_transport_is_skipped_with_a_warning(tmp_path, monkeypatch):
    _install_fake_distribution(
        tmp_path, monkeypatch, "gemini-split-wrong",
        '[gemini_split.transports]\nwrong = wrong_transport:transport\n',
        {"wrong_transport": "transport = 42\n"},
    )
    with pytest.warns(UserWarning, match="'wrong'.*not a Transport"):
        with pytest.raises(UnknownScheme):
            TransportRegistry().get("wrong")


def test_unknown_scheme_lists_what_is_installed():
    with pytest.raises(UnknownScheme) as info:
        default_registry().get("gopher")
    assert "no transport for scheme 'gopher'" in str(info.value)
    assert "loopback" in str(info.value)


def test_an_address_without_a_scheme_is_a_clear_error():
    with pytest.raises(UnknownScheme, match="not a server address"):
        scheme_of("just-a-name")


def test_registering_directly_wins_over_entry_points():
    registry = TransportRegistry()
    sentinel = default_registry().get("loopback")
    registry.register("custom", sentinel)
    assert registry.get("CUSTOM") is sentinel


def test_core_package_never_imports_a_transport_plugin_by_name():
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2] / "gemini_split"
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if any(f"import {name}" in path.read_text() or f"from {name}" in path.read_text()
               for name in ("gemini_split_loopback", "gemini_split_websocket", "gemini_split_stdio"))
    ]
    assert offenders == []

"""Server profiles: the servers.json format, safe writes, and how a profile
name given to --server becomes an address, a token and a CA."""

from __future__ import annotations

import json
import stat
from io import StringIO
from pathlib import Path

import pytest

from gemini_split.cli import build_parser, main
from gemini_split.commands.options_from_args import client_options
from gemini_split.options import ClientOptions
from gemini_split.client.profiles import ProfileStore, ServerProfile, profile_store
from gemini_split.app import resolve_client_settings
from gemini_split.environment import Environment
from gemini_split.errors import ConfigurationError, ProfileError


def _env(tmp_path: Path, **environ: str) -> Environment:
    return Environment(stdout=StringIO(), stderr=StringIO(), cwd=tmp_path,
                       environ={"GEMINI_SPLIT_HOME": str(tmp_path / "home"), **environ})


def test_seed_000_format_round_trips(tmp_path):
    seed = {"profiles": [{
        "name": "prod", "host": "gemini.example.com", "port": 8443, "secure": True,
        "authentication": {"method": "token", "token": "s3cret"},
        "tlsConfig": {"rejectUnauthorized": True, "ca": "/etc/ssl/ca.pem"},
    }, {
        "name": "oauth-one", "host": "h", "port": 80, "secure": False,
        "authentication": {"method": "oauth", "oauth": {"clientId": "c", "authUrl": "u"}},
        "comment": "kept",
    }]}
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(seed))
    store = ProfileStore(path)
    prod, other = store.load()
    assert prod.address == "wss://gemini.example.com:8443"
    assert prod.resolve_token({}) == "s3cret"
    assert prod.ca == "/etc/ssl/ca.pem" and prod.reject_unauthorized
    assert other.address == "ws://h:80"
    store.save(store.load())
    rewritten = json.loads(path.read_text())
    assert rewritten["profiles"][0] == seed["profiles"][0]
    # Keys this program does not use survive a rewrite.
    assert rewritten["profiles"][1]["comment"] == "kept"
    assert rewritten["profiles"][1]["authentication"]["oauth"] == {"clientId": "c", "authUrl": "u"}


def test_add_get_remove_and_mode_0600(tmp_path):
    store = profile_store(tmp_path / "config")
    assert store.load() == []
    assert store.add(ServerProfile.from_address("dev", "ws://127.0.0.1:8080")) is False
    assert store.add(ServerProfile.from_address("box", "stdio:ssh box gemini-split serve --stdio")) is False
    assert store.add(ServerProfile.from_address("dev", "ws://127.0.0.1:9090", token="t")) is True
    assert store.names() == ["dev", "box"]
    assert store.get("dev").address == "ws://127.0.0.1:9090"
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    data = json.loads(store.path.read_text())
    assert data["profiles"][0] == {
        "name": "dev", "host": "127.0.0.1", "port": 9090, "secure": False,
        "authentication": {"method": "token", "token": "t"},
    }
    assert data["profiles"][1]["transport"] == "stdio"
    assert data["profiles"][1]["command"] == "ssh box gemini-split serve --stdio"
    assert store.get("box").address == "stdio:ssh box gemini-split serve --stdio"
    assert store.remove("dev") is True
    assert store.remove("dev") is False
    assert store.names() == ["box"]
    assert not list(store.path.parent.glob("*.tmp"))  # no temporary files left


def test_a_group_readable_file_becomes_0600_on_write(tmp_path):
    path = tmp_path / "servers.json"
    path.write_text('{"profiles": []}')
    path.chmod(0o644)
    ProfileStore(path).add(ServerProfile.from_address("a", "ws://h:1"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("content", ['{"profiles": [', "[1, 2]", '{"profiles": [{"host": "x"}]}',
                                     '{"profiles": [{"name": "a", "host": "h", "port": "eighty"}]}'])
def test_a_corrupt_file_is_reported_with_its_path_and_left_untouched(tmp_path, content):
    path = tmp_path / "servers.json"
    path.write_text(content)
    store = ProfileStore(path)
    with pytest.raises(ProfileError) as info:
        store.load()
    assert str(path) in str(info.value)
    assert "left as it is" in str(info.value)
    with pytest.raises(ProfileError):
        store.add(ServerProfile.from_address("a", "ws://h:1"))
    with pytest.raises(ProfileError):
        store.remove("a")
    assert path.read_text() == content


def test_cli_reports_a_corrupt_file_without_a_traceback(tmp_path):
    env = _env(tmp_path)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "servers.json").write_text("{nope")
    assert main(["server", "add", "x", "ws://h:1"], env) == 1
    assert "servers.json is not valid JSON (line 1" in env.stderr.getvalue()
    assert "Traceback" not in env.stderr.getvalue()
    assert (tmp_path / "home" / "servers.json").read_text() == "{nope"


@pytest.mark.parametrize("address, expected", [
    ("ws://localhost:8080", "ws://localhost:8080"),
    ("wss://example.com", "wss://example.com:443"),
    ("ws://[::1]:9000/gemini", "ws://[::1]:9000/gemini"),
    ("stdio:gemini-split serve --stdio", "stdio:gemini-split serve --stdio"),
])
def test_addresses(address, expected):
    assert ServerProfile.from_address("n", address).address == expected


@pytest.mark.parametrize("name, address, words", [
    ("n", "http://h:1", "ws://HOST:PORT"),
    ("n", "ws://h:99999", "port"),
    ("n", "stdio:", "command"),
    ("has:colon", "ws://h:1", "cannot name a profile"),
    ("", "ws://h:1", "cannot name a profile"),
])
def test_bad_profiles_say_what_is_wrong(name, address, words):
    with pytest.raises(ProfileError, match=words):
        ServerProfile.from_address(name, address)


def test_token_env_is_read_when_connecting(tmp_path):
    profile = ServerProfile.from_address("p", "ws://h:1", token_env="PROD_TOKEN")
    assert profile.to_json()["authentication"] == {"method": "token", "tokenEnv": "PROD_TOKEN"}
    assert profile.resolve_token({"PROD_TOKEN": "abc"}) == "abc"
    with pytest.raises(ProfileError, match=r"\$PROD_TOKEN, which is not set"):
        profile.resolve_token({})
    with pytest.raises(ProfileError, match="not both"):
        ServerProfile.from_address("p", "ws://h:1", token="t", token_env="V")


def _args(argv: list[str]) -> ClientOptions:
    return client_options(build_parser().parse_args(argv))


def test_server_profile_name_resolves_to_address_token_and_ca(tmp_path):
    env = _env(tmp_path, PROD_TOKEN="from-env", GEMINI_SERVER_TOKEN="global")
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    store = profile_store(env.config_dir)
    store.add(ServerProfile.from_address("prod", "wss://h:8443", token_env="PROD_TOKEN", ca=str(ca)))
    store.add(ServerProfile.from_address("plain", "ws://h:1"))
    settings = resolve_client_settings(_args(["--server", "prod"]), env)
    assert settings.endpoint.server == "wss://h:8443"
    assert settings.endpoint.connect.token == "from-env"
    assert settings.endpoint.connect.ca_file == str(ca)
    assert not settings.endpoint.connect.insecure
    # A flag beats the profile; the profile beats GEMINI_SERVER_TOKEN.
    settings = resolve_client_settings(_args(["--server", "prod", "--token", "flag"]), env)
    assert settings.endpoint.connect.token == "flag"
    settings = resolve_client_settings(_args(["--server", "plain"]), env)
    assert settings.endpoint.connect.token == "global"


def test_unknown_profile_names_the_file_and_the_known_ones(tmp_path):
    env = _env(tmp_path)
    profile_store(env.config_dir).add(ServerProfile.from_address("dev", "ws://h:1"))
    with pytest.raises(ConfigurationError, match=r"nor a profile in .*servers.json \(profiles: dev\)"):
        resolve_client_settings(_args(["--server", "nope"]), env)


def test_server_subcommands(tmp_path):
    env = _env(tmp_path)
    (tmp_path / "ca.pem").write_text("x")
    assert main(["server", "add", "dev", "ws://127.0.0.1:8080"], env) == 0
    assert main(["server", "add", "prod", "wss://h:8443", "--token-env", "PROD", "--ca", "ca.pem"], env) == 0
    assert "Added profile prod: wss://h:8443" in env.stdout.getvalue()
    data = json.loads((tmp_path / "home" / "servers.json").read_text())
    assert data["profiles"][1]["tlsConfig"] == {"rejectUnauthorized": True, "ca": str(tmp_path / "ca.pem")}
    env.stdout = StringIO()
    assert main(["server", "list", "--names"], env) == 0
    assert env.stdout.getvalue() == "dev\nprod\n"
    env.stdout = StringIO()
    assert main(["server", "list"], env) == 0
    listing = env.stdout.getvalue()
    assert "dev" in listing and "ws://127.0.0.1:8080" in listing and "token from $PROD" in listing
    assert main(["server", "remove", "dev"], env) == 0
    assert main(["server", "remove", "dev"], env) == 1
    assert "no profile named 'dev'" in env.stderr.getvalue()
    assert main(["server", "add", "bad", "http://x"], env) == 1
    assert main(["server", "add", "x", "ws://h:1", "--token", "a", "--token-env", "B"], env) == 2
    assert main(["server"], env) == 2


def test_server_test_reports_a_dead_server(tmp_path):
    env = _env(tmp_path)
    profile_store(env.config_dir).add(ServerProfile.from_address("dead", "ws://127.0.0.1:9"))
    assert main(["server", "test", "dead"], env) == 1
    assert "ws://127.0.0.1:9: cannot connect" in env.stderr.getvalue()

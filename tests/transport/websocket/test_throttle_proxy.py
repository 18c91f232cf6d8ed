"""The failed-token throttle behind a reverse proxy (issue 35 §5).

Before: the throttle refused an address before reading its token, and behind
nginx every client has nginx's address, so 11 wrong tokens from one anonymous
client made alice's correct token get 429 on every try. Now a token is always
checked (a correct one always goes in), and wrong ones count against the
client a *trusted* proxy reports (``serve --trusted-proxy``). Tested through
the real nginx running deploy/nginx.conf; clients come from different
loopback addresses, which nginx appends to ``X-Forwarded-For``."""

from __future__ import annotations

import pytest
import trio

from gemini_split.testing import nginx as ngx
from gemini_split.transport.throttle import client_source, parse_networks

from tests.inprocess import cli
from tests.e2e.test_serve_e2e import API_KEY, _env
from .helpers import Recorder, authenticate, port_of, start
from .rawframes import RawWebSocket

TRUSTED = parse_networks(["127.0.0.1", "10.0.0.0/8"])


def test_the_source_is_the_peer_unless_the_peer_is_a_trusted_proxy():
    # No proxy trusted: headers are the client's own words, ignored.
    assert client_source("127.0.0.1", forwarded_for="198.51.100.7") == "127.0.0.1"
    # An untrusted peer cannot choose its source by writing the header.
    assert client_source("203.0.113.5", forwarded_for="198.51.100.7", trusted=TRUSTED) == "203.0.113.5"
    assert client_source("127.0.0.1", forwarded_for="198.51.100.7", trusted=TRUSTED) == "198.51.100.7"
    assert client_source("127.0.0.1", real_ip="198.51.100.8", trusted=TRUSTED) == "198.51.100.8"
    assert client_source("::ffff:127.0.0.1", forwarded_for="198.51.100.7", trusted=TRUSTED) == "198.51.100.7"


def test_forwarded_for_is_read_from_the_right_past_trusted_hops_only():
    # What a client wrote itself is on the left; what the proxies appended on the right.
    assert client_source("127.0.0.1", forwarded_for="1.2.3.4, 198.51.100.7", trusted=TRUSTED) == "198.51.100.7"
    assert client_source("127.0.0.1", forwarded_for="1.2.3.4, 198.51.100.7, 10.1.1.1",
                         trusted=TRUSTED) == "198.51.100.7"
    # Garbage where the client should be: the last trusted hop counts, never a forged name.
    assert client_source("127.0.0.1", forwarded_for="alice, 10.1.1.1", trusted=TRUSTED) == "10.1.1.1"
    assert client_source("127.0.0.1", forwarded_for="[2001:db8::7]:5000", trusted=TRUSTED) == "2001:db8::7"
    assert client_source("127.0.0.1", forwarded_for="198.51.100.7:5000", trusted=TRUSTED) == "198.51.100.7"
    assert client_source("127.0.0.1", forwarded_for="", trusted=TRUSTED) == "127.0.0.1"


def test_serve_refuses_a_trusted_proxy_that_is_not_an_address(tmp_path):
    with pytest.raises(ValueError, match="--trusted-proxy 'nginx'"):
        parse_networks(["nginx"])
    # Before it serves anything: a typo must not quietly count every client as the proxy.
    result = cli(["serve", "--listen", "127.0.0.1:0", "--trusted-proxy", "nginx"],
                 environ=_env(GEMINI_API_KEY=API_KEY), cwd=tmp_path)
    assert result.returncode == 2
    assert "--trusted-proxy 'nginx': expected an address or CIDR" in result.stderr


async def _try(port: int, token: str, *, source: str, headers: bytes = b"") -> RawWebSocket:
    stream = await trio.open_tcp_stream("127.0.0.1", port, local_address=source)
    raw = RawWebSocket(stream)
    raw.status = await raw.handshake(b"Authorization: Bearer " + token.encode() + b"\r\n" + headers)
    return raw


async def _status(port: int, token: str, *, source: str, headers: bytes = b"") -> int:
    raw = await _try(port, token, source=source, headers=headers)
    await raw.aclose()
    return raw.status


@pytest.mark.skipif(not ngx.available(), reason=ngx.MISSING)
@pytest.mark.parametrize("trusted", [("127.0.0.1",), ()], ids=["trusted-proxy", "untrusted-proxy"])
async def test_behind_nginx_wrong_guesses_never_lock_out_a_correct_token(tmp_path, trusted, caplog):
    recorder = Recorder()
    async with trio.open_nursery() as nursery:
        port = port_of(await start(nursery, recorder, authenticate=authenticate, trusted_proxies=trusted))
        with ngx.Nginx(tmp_path / "nginx", [port]) as proxy:
            guesses = [await _status(proxy.port, f"guess-{i}", source="127.0.0.2") for i in range(12)]
            assert guesses == [401] * 10 + [429] * 2
            # Alice, from her own address and from the guesser's: always in.
            for source in ("127.0.0.3", "127.0.0.2"):
                raw = await _try(proxy.port, "alice-token", source=source)
                assert raw.status == 101, source
                await raw.send_text("whoami")
                assert (await raw.read_message())[1] == b"alice"
                await raw.aclose()
            # The guesser stays throttled.
            assert await _status(proxy.port, "guess-more", source="127.0.0.2") == 429
            # A typo from another client of the same proxy: its own budget when
            # the proxy is trusted; nginx's shared one when it is not.
            typo = await _status(proxy.port, "alice-tokn", source="127.0.0.3")
            assert typo == (401 if trusted else 429)
            if trusted:
                # Writing the header oneself does not move the guesser elsewhere:
                # nginx appends the real address, which is what counts.
                forged = b"X-Forwarded-For: 192.0.2.99\r\n"
                assert await _status(proxy.port, "guess-forged", source="127.0.0.2", headers=forged) == 429
                # The log names the client nginx reported, not only nginx.
                assert "(client 127.0.0.2, as the proxy says)" in caplog.text
        nursery.cancel_scope.cancel()


@pytest.mark.skipif(not ngx.available(), reason=ngx.MISSING)
@pytest.mark.timeout(60)  # a serve process and nginx start; loaded machines are slow
async def test_serve_trusted_proxy_behind_nginx_end_to_end(tmp_path):
    """The flag as an operator gives it: `gemini-split serve --trusted-proxy`
    behind the real nginx, a guesser locked out, another client not."""
    import json

    from gemini_split.testing.fake_gemini import FakeGemini

    from tests.e2e.test_serve_e2e import daemon

    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {"alice-token-0123456789": {"userId": "alice"}}}))
    with FakeGemini(api_key=API_KEY) as fake, daemon(tmp_path, fake, "--auth-config", str(tokens),
                                                      "--trusted-proxy", "127.0.0.1/32") as (_, address):
        port = int(address.rsplit(":", 1)[1])
        with ngx.Nginx(tmp_path / "nginx", [port]) as proxy:
            guesses = [await _status(proxy.port, f"guess-{i}", source="127.0.0.2") for i in range(11)]
            typo = await _status(proxy.port, "alice-tokn", source="127.0.0.3")
            alice = await _status(proxy.port, "alice-token-0123456789", source="127.0.0.2")
    assert guesses == [401] * 10 + [429]
    assert typo == 401  # another client of the same nginx: its own budget
    assert alice == 101

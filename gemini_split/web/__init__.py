"""The browser client of ``serve --web`` (issue 33): the server side
(:mod:`.face`: the page's files, pairing, cookies; :mod:`.pairing`;
:mod:`.notify`) and the page itself (``static/``). docs/web.md states the
contract between them."""

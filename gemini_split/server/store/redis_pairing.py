"""Paired browsers and pairing codes in Redis, shared by every replica.

Keys (``PREFIX`` as for sessions, ``redis.py``):

``PREFIX pair:code:<hash>``     hash: ``user``, ``permissions`` (JSON),
                                ``expires``, ``used``, ``keep``: until when
                                a used or expired code is still recognised
                                as such (the key's TTL too).
``PREFIX pair:codes:<user>``    sorted set: the user's unused code hashes by
                                ``expires`` (the per-user bound).
``PREFIX pair:browser:<id>``    hash: the :class:`BrowserRecord`'s fields;
                                expires with the browser (``PEXPIREAT``).
``PREFIX pair:cookie:<hash>``   string: the browser id the cookie signs in;
                                expires with it.
``PREFIX pair:browsers:<user>`` sorted set: the user's browser ids by
                                ``last_used`` (the bound, the listing).
``PREFIX pair:revoked``         stream: one entry (``b``: the id) per browser
                                revoked or dropped, read by every replica.

Every change is one Lua script, so it is atomic across replicas: redeeming a
code checks and marks it used in one step (two replicas given the same code
at once: one gets ``ok``, the other ``used``), and a revocation deletes the
browser and announces it in the same step.

Revocations reach the other replicas through a Stream, not pub/sub, for the
reason the replicas' followers use Streams (``replicas/replica.py``): a
replica whose connection to Redis drops for a moment reads on from its
cursor afterwards, while a pub/sub message published meanwhile would be
lost — and with it the closing of a revoked browser's open page.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import trio

from . import StoreError
from .pairing import ALL, BrowserRecord, PairingCode, PairingStore

log = logging.getLogger(__name__)

#: Revocations kept in the stream (replicas read them at once; this only
#: bounds it).
REVOKED_LENGTH = 10_000
#: Milliseconds one blocking read of revocations waits before it is issued again.
BLOCK_MS = 1000

_FIELDS = ("id", "user", "cookie_hash", "created", "expires", "last_used", "user_agent", "permissions")

# KEYS: code, user's codes. ARGV: hash, user, permissions, expires, keep ms,
# max per user, now, keep until.
_ADD_CODE = """
redis.call('HSET', KEYS[1], 'user', ARGV[2], 'permissions', ARGV[3], 'expires', ARGV[4], 'used', '0',
           'keep', ARGV[8])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[7])
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[1])
local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[6]) + 1
if excess > 0 then
  for _, old in ipairs(redis.call('ZRANGE', KEYS[2], 0, excess - 1)) do
    redis.call('DEL', prefix .. old)
    redis.call('ZREM', KEYS[2], old)
  end
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return 1
"""

# KEYS: code. ARGV: now, the user codes' key prefix, hash. Returns
# {reason[, user, permissions, expires]}.
_TAKE_CODE = """
local f = redis.call('HMGET', KEYS[1], 'user', 'permissions', 'expires', 'used', 'keep')
if not f[1] or tonumber(f[5]) <= tonumber(ARGV[1]) then return {'unknown'} end
if f[4] == '1' then return {'used'} end
if tonumber(f[3]) <= tonumber(ARGV[1]) then return {'expired'} end
redis.call('HSET', KEYS[1], 'used', '1')
redis.call('ZREM', ARGV[2] .. f[1], ARGV[3])
return {'ok', f[1], f[2], f[3]}
"""

# Forgets browser ``id`` (its hash, its cookie key, its place in the user's
# set) and announces it; a Lua function shared by the scripts below.
# ``P``: the key prefix up to ``pair:``; ``stream``: the revocations.
_FORGET = """
local function forget(P, user, id, stream)
  local cookie = redis.call('HGET', P .. 'browser:' .. id, 'cookie_hash')
  redis.call('DEL', P .. 'browser:' .. id)
  if cookie then redis.call('DEL', P .. 'cookie:' .. cookie) end
  redis.call('ZREM', P .. 'browsers:' .. user, id)
  redis.call('XADD', stream, 'MAXLEN', '~', ARGV[1], '*', 'b', id)
end
"""

# KEYS: browser, cookie, user's browsers, revocations. ARGV: max stream
# length, P, expires (ms), max per user, then the hash's field/value pairs
# (id first, user second). Returns the ids dropped by the bound.
_ADD_BROWSER = _FORGET + """
local P, id, user = ARGV[2], ARGV[6], ARGV[8]
local dropped = {}
local excess = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[4]) + 1
if excess > 0 then
  for _, old in ipairs(redis.call('ZRANGE', KEYS[3], 0, excess - 1)) do
    forget(P, user, old, KEYS[4])
    table.insert(dropped, old)
  end
end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
redis.call('SET', KEYS[2], id, 'PXAT', ARGV[3])
redis.call('ZADD', KEYS[3], redis.call('HGET', KEYS[1], 'last_used'), id)
return dropped
"""

# KEYS: cookie. ARGV: max stream length, P, (unused), revocations, now. Returns
# the browser's hash as a flat list, or {} (none, or expired: forgotten).
_LOOKUP = _FORGET + """
local id = redis.call('GET', KEYS[1])
if not id then return {} end
local fields = redis.call('HGETALL', ARGV[2] .. 'browser:' .. id)
if #fields == 0 then
  redis.call('DEL', KEYS[1])
  return {}
end
local expires = tonumber(redis.call('HGET', ARGV[2] .. 'browser:' .. id, 'expires'))
if expires <= tonumber(ARGV[5]) then
  forget(ARGV[2], redis.call('HGET', ARGV[2] .. 'browser:' .. id, 'user'), id, ARGV[4])
  return {}
end
return fields
"""

# KEYS: user's browsers, revocations. ARGV: max stream length, P, user, id
# or "all". Returns the ids forgotten.
_REVOKE = _FORGET + """
local P, user = ARGV[2], ARGV[3]
local ids
if ARGV[4] == 'all' then
  ids = redis.call('ZRANGE', KEYS[1], 0, -1)
elseif redis.call('ZSCORE', KEYS[1], ARGV[4]) then
  ids = {ARGV[4]}
else
  ids = {}
end
local gone = {}
for _, id in ipairs(ids) do
  local alive = redis.call('EXISTS', P .. 'browser:' .. id) == 1
  forget(P, user, id, KEYS[2])
  if alive then table.insert(gone, id) end
end
return gone
"""

# KEYS: browser. ARGV: last used, id, P.
_TOUCH = """
local user = redis.call('HGET', KEYS[1], 'user')
if not user then return 0 end
redis.call('HSET', KEYS[1], 'last_used', ARGV[1])
redis.call('ZADD', ARGV[3] .. 'browsers:' .. user, 'XX', ARGV[1], ARGV[2])
return 1
"""


def _ms(seconds: float) -> int:
    return max(int(seconds * 1000), 1)


class RedisPairing(PairingStore):
    """The pairing keys of ``store`` (a :class:`~.redis.RedisStore`)."""

    def __init__(self, store: Any):
        self.store = store
        self.p = f"{store.prefix}pair:"
        self.revoked_key = f"{self.p}revoked"
        #: Ids revoked through this process (its own entries in the stream
        #: are skipped: it closed those pages already).
        self._mine: set[str] = set()

    async def _eval(self, what: str, script: str, keys: list[str], args: list[Any]) -> Any:
        async with self.store._command(what):
            return await self.store.client.eval(script, keys, [str(a) for a in args])

    async def _add_code(self, code_hash: str, code: PairingCode, *, keep_until: float, max_per_user: int,
                        now: float) -> None:
        await self._eval("keep a pairing code", _ADD_CODE, [f"{self.p}code:{code_hash}", f"{self.p}codes:{code.user}"],
                         [code_hash, code.user, json.dumps(list(code.permissions)), repr(code.expires),
                          _ms(keep_until - now), max_per_user, repr(now), repr(keep_until)])

    async def take_code(self, code_hash: str, now: float) -> tuple[str, PairingCode | None]:
        reply = await self._eval("redeem a pairing code", _TAKE_CODE, [f"{self.p}code:{code_hash}"],
                                 [repr(now), f"{self.p}codes:", code_hash])
        if reply[0] != "ok":
            return reply[0], None
        _, user, permissions, expires = reply
        return "ok", PairingCode(user=user, expires=float(expires), permissions=tuple(json.loads(permissions)),
                                 used=True)

    async def _add_browser(self, browser: BrowserRecord, *, max_per_user: int) -> list[str]:
        fields: list[Any] = []
        for name in _FIELDS:
            value = getattr(browser, name)
            fields += [name, json.dumps(list(value)) if name == "permissions" else
                       repr(float(value)) if isinstance(value, float) else value]
        dropped = await self._eval(
            "keep a paired browser", _ADD_BROWSER,
            [f"{self.p}browser:{browser.id}", f"{self.p}cookie:{browser.cookie_hash}", f"{self.p}browsers:{browser.user}",
             self.revoked_key],
            [REVOKED_LENGTH, self.p, _ms(browser.expires), max_per_user, *fields])
        self._mine.update(dropped)
        return list(dropped)

    async def browser_by_cookie(self, cookie_hash: str, now: float) -> BrowserRecord | None:
        flat = await self._eval("check a browser's cookie", _LOOKUP, [f"{self.p}cookie:{cookie_hash}"],
                                [REVOKED_LENGTH, self.p, "", self.revoked_key, repr(now)])
        if not flat:
            return None
        return self._record(dict(zip(flat[::2], flat[1::2])))

    def _record(self, f: dict[str, str]) -> BrowserRecord:
        try:
            return BrowserRecord(id=f["id"], user=f["user"], cookie_hash=f["cookie_hash"], created=float(f["created"]),
                                 expires=float(f["expires"]), last_used=float(f.get("last_used", 0)),
                                 user_agent=f.get("user_agent", ""),
                                 permissions=tuple(json.loads(f.get("permissions", "[]"))))
        except (KeyError, ValueError, TypeError) as exc:
            raise StoreError(f"{self.store.name}: paired browser {f.get('id', '?')!r} is not readable "
                             f"({exc!r})") from None

    async def browsers(self, user: str, now: float) -> list[BrowserRecord]:
        async with self.store._command("list paired browsers"):
            ids = await self.store.client.zrange(f"{self.p}browsers:{user}", 0, -1)
            if not ids:
                return []
            async with self.store.client.pipeline(transaction=False) as pipe:
                replies = [pipe.hgetall(f"{self.p}browser:{i}") for i in ids]
            found = [await reply for reply in replies]
            gone = [i for i, f in zip(ids, found, strict=True) if not f]
            if gone:  # expired by their TTL: their place in the set goes too
                await self.store.client.zrem(f"{self.p}browsers:{user}", gone)
        out = [self._record(dict(f)) for f in found if f]
        return sorted((b for b in out if b.expires > now), key=lambda b: (b.created, b.id))

    async def touch(self, browser_id: str, last_used: float) -> None:
        await self._eval("note a browser's use", _TOUCH, [f"{self.p}browser:{browser_id}"],
                         [repr(last_used), browser_id, self.p])

    async def revoke(self, user: str, browser_id: str) -> list[str]:
        gone = await self._eval("revoke a paired browser", _REVOKE, [f"{self.p}browsers:{user}", self.revoked_key],
                                [REVOKED_LENGTH, self.p, user, ALL if browser_id == ALL else browser_id])
        self._mine.update(gone)
        return list(gone)

    async def revocations(self) -> AsyncIterator[list[str]]:
        """Read the revocations stream from now on, forever; while Redis is
        away, try again every half second from the same cursor (nothing
        revoked meanwhile is missed)."""
        cursor = None
        while cursor is None:
            try:
                async with self.store._command("read revocations"):
                    last = await self.store.client.xrevrange(self.revoked_key, "+", "-", count=1)
                cursor = last[0].identifier if last else "0-0"
            except StoreError as exc:
                log.warning("%s; revocations by other replicas are read once it is back", exc)
                await trio.sleep(0.5)
        while True:
            try:
                async with self.store._command("read revocations", blocking=BLOCK_MS / 1000):
                    reply = await self.store.blocking_client.xread({self.revoked_key: cursor}, count=500,
                                                                   block=BLOCK_MS)
            except StoreError as exc:
                log.warning("%s; revocations by other replicas are read once it is back", exc)
                await trio.sleep(0.5)
                continue
            ids = []
            for row in (reply or {}).get(self.revoked_key, ()):
                cursor = row.identifier
                browser_id = row.field_values.get("b", "")
                if browser_id in self._mine:
                    self._mine.discard(browser_id)
                elif browser_id:
                    ids.append(browser_id)
            if ids:
                yield ids

"""Who may open the cockpit: Telegram's signed launch data, short sessions, CSRF tokens and
the console's one-time links. Pure: no web framework here, every clock injected.

Telegram's Mini App launch data (``initData``) is verified exactly as its documentation
says: ``secret_key = HMAC_SHA256(key="WebAppData", msg=bot_token)``, then the hex
``HMAC_SHA256(secret_key, data_check_string)`` must equal its ``hash`` (compared in
constant time), where ``data_check_string`` is every other ``key=value`` pair, sorted by
key, joined by newlines. It must be no older than an hour and name a user in
``caesar_ids``. A key given twice, a missing or malformed field, a date from the future:
refused. Then a session: a random id in an HttpOnly cookie, kept on the server with its
CSRF token, ended after ``SESSION_IDLE_S`` unused or ``SESSION_MAX_S`` in all.

``legio cockpit`` (no Telegram needed) asks the daemon, over its 0600 status socket, for
a one-time link: a random token that works once, within ``LINK_TTL_S``. Only its SHA-256
is kept, and the link carries it in the URL's fragment, which no browser sends to a
server or a proxy's log.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl

MAX_AGE_S = 3600  # launch data older than this is refused
FUTURE_SLACK_S = 60  # a phone's clock a little ahead is fine; a date far ahead is not
SESSION_IDLE_S = 3600
SESSION_MAX_S = 12 * 3600
SESSIONS_KEPT = 32  # the oldest session ends when a 33rd begins
LINK_TTL_S = 300
LINKS_KEPT = 16
INIT_DATA_MAX = 8192

Clock = Callable[[], float]


class Refused(Exception):
    """Launch data, a link or a session that opens nothing; the message says why (logs
    only: the page shows nothing of it)."""


def secret_key(bot_token: str) -> bytes:
    """Telegram's ``secret_key``: HMAC-SHA256 of the bot token keyed by ``WebAppData``."""
    return hmac.new(b"WebAppData", bot_token.encode(), hashlib.sha256).digest()


def data_check_string(fields: dict[str, str]) -> str:
    """Every field but ``hash``, ``key=value``, sorted by key, one per line."""
    return "\n".join(f"{k}={fields[k]}" for k in sorted(fields) if k != "hash")


def verify_init_data(
    init_data: str,
    bot_token: str,
    caesar_ids: frozenset[int] | set[int],
    *,
    now: float | None = None,
    max_age_s: float = MAX_AGE_S,
) -> int:
    """Caesar's user id if ``init_data`` is Telegram's, fresh and his; ``Refused`` else."""
    if not bot_token:
        raise Refused("no bot token: Telegram's launch data cannot be checked")
    if not init_data or len(init_data) > INIT_DATA_MAX:
        raise Refused("no launch data, or too long")
    try:
        pairs = parse_qsl(init_data, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise Refused("launch data that is not a query string") from None
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise Refused("a field given twice")
    given = fields.get("hash", "")
    expected = hmac.new(
        secret_key(bot_token), data_check_string(fields).encode(), hashlib.sha256
    ).hexdigest()
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise Refused("the hash does not match: not signed with this bot's token")
    moment = time.time() if now is None else now
    try:
        auth_date = int(fields["auth_date"])
    except (KeyError, ValueError):
        raise Refused("no auth_date") from None
    if moment - auth_date > max_age_s:
        raise Refused(f"launch data from {moment - auth_date:.0f} s ago: too old")
    if auth_date - moment > FUTURE_SLACK_S:
        raise Refused("launch data dated in the future")
    try:
        user = json.loads(fields["user"])
        user_id = user["id"]
    except (KeyError, ValueError, TypeError):
        raise Refused("no user in the launch data") from None
    if not isinstance(user_id, int) or isinstance(user_id, bool) or user_id not in caesar_ids:
        raise Refused(f"user {user_id!r} is not Caesar")
    return user_id


def sign_init_data(fields: dict[str, str], bot_token: str) -> str:
    """``fields`` signed as Telegram signs launch data, URL-encoded (tests, benchmarks)."""
    from urllib.parse import urlencode

    digest = hmac.new(
        secret_key(bot_token), data_check_string(fields).encode(), hashlib.sha256
    ).hexdigest()
    return urlencode({**fields, "hash": digest})


@dataclass
class Session:
    """One signed-in browser: who, its CSRF token, since when, last used."""

    user: int
    csrf: str
    started: float
    used: float


class Sessions:
    """The cockpit's sessions, in memory (a restart signs everyone out)."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def start(self, user: int) -> tuple[str, Session]:
        """A new session for ``user``: its id (the cookie) and the session."""
        now = self.clock()
        session_id = secrets.token_urlsafe(32)
        session = Session(user, secrets.token_urlsafe(32), now, now)
        self._sessions[session_id] = session
        while len(self._sessions) > SESSIONS_KEPT:
            self._sessions.popitem(last=False)
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of this cookie, or None (unknown, idle too long, too old)."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = self.clock()
        if now - session.used > SESSION_IDLE_S or now - session.started > SESSION_MAX_S:
            del self._sessions[session_id]
            return None
        session.used = now
        return session

    def end(self, session_id: str | None) -> None:
        if session_id:
            self._sessions.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._sessions)


def csrf_ok(session: Session, given: str | None) -> bool:
    """Whether ``given`` is this session's CSRF token (constant time)."""
    return bool(given) and hmac.compare_digest(session.csrf.encode(), (given or "").encode())


class Links:
    """One-time links for ``legio cockpit``: each works once, within ``LINK_TTL_S``."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._links: OrderedDict[str, float] = OrderedDict()  # SHA-256 of a token: expiry

    @staticmethod
    def _digest(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def mint(self) -> str:
        token = secrets.token_urlsafe(32)
        self._links[self._digest(token)] = self.clock() + LINK_TTL_S
        while len(self._links) > LINKS_KEPT:
            self._links.popitem(last=False)
        return token

    def take(self, token: str) -> None:
        """Use ``token`` up; ``Refused`` if it is unknown, used or expired."""
        expiry = self._links.pop(self._digest(token), None) if token else None
        if expiry is None:
            raise Refused("an unknown or used link")
        if self.clock() > expiry:
            raise Refused("a link older than 5 minutes")

"""The cockpit's sign-in, as Telegram documents it: launch data verified with a vector
computed apart (openssl, and hmac step by step here), and every way it must refuse."""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlencode

import pytest

from legio.frontends.web.auth import (
    LINK_TTL_S,
    SESSION_IDLE_S,
    Links,
    Refused,
    Sessions,
    csrf_ok,
    sign_init_data,
    verify_init_data,
)

TOKEN = "5768337691:AAH5YkoiEuPk8-FZa32hStHTqXiLPtAEhx8"
FIELDS = {
    "query_id": "AAGcqlFKAAAAAJyqUUp6-Y62",
    "user": '{"id":42,"first_name":"Gaius","username":"caesar"}',
    "auth_date": "1733584787",
}
# computed with openssl, apart from this code:
#   SK=$(printf %s "$TOKEN" | openssl dgst -sha256 -mac HMAC -macopt key:WebAppData -binary)
#   printf 'auth_date=…\nquery_id=…\nuser=…' | openssl dgst -sha256 -mac HMAC -macopt hexkey:SK
KNOWN_HASH = "a2deb0df8281afa55fbf5630f92d13c4c691e1bd509d5c6b908b84094cb4da42"
WHEN = 1733584787 + 10
CAESAR = frozenset({42})
OTHER_USER = {**FIELDS, "user": FIELDS["user"].replace("42", "43")}
NO_USER = {k: v for k, v in FIELDS.items() if k != "user"}


def independent_hash(fields: dict[str, str], token: str) -> str:
    """Telegram's documented steps, written out here without the module's helpers."""
    key = hmac.new(b"WebAppData", token.encode(), hashlib.sha256).digest()
    check = "\n".join(f"{k}={v}" for k, v in sorted(fields.items()))
    return hmac.new(key, check.encode(), hashlib.sha256).hexdigest()


def launch(fields: dict[str, str], digest: str) -> str:
    return urlencode({**fields, "hash": digest})


def test_the_documented_algorithm_gives_the_known_vector() -> None:
    assert independent_hash(FIELDS, TOKEN) == KNOWN_HASH
    assert sign_init_data(FIELDS, TOKEN) == launch(FIELDS, KNOWN_HASH)


def test_caesars_launch_data_opens() -> None:
    assert verify_init_data(launch(FIELDS, KNOWN_HASH), TOKEN, CAESAR, now=WHEN) == 42


def test_the_field_order_of_the_query_does_not_matter() -> None:
    shuffled = urlencode({"hash": KNOWN_HASH, **dict(reversed(list(FIELDS.items())))})
    assert verify_init_data(shuffled, TOKEN, CAESAR, now=WHEN) == 42


@pytest.mark.parametrize(
    ("data", "ids", "now", "why"),
    [
        (launch(FIELDS, KNOWN_HASH), frozenset({7}), WHEN, "not Caesar"),
        (launch(FIELDS, "0" * 64), CAESAR, WHEN, "hash"),
        (launch(FIELDS, KNOWN_HASH[:-1] + "3"), CAESAR, WHEN, "hash"),
        (
            launch({**FIELDS, "user": FIELDS["user"].replace("42", "43")}, KNOWN_HASH),
            CAESAR,
            WHEN,
            "hash",
        ),
        (launch(FIELDS, KNOWN_HASH), CAESAR, 1733584787 + 3601, "too old"),
        (launch(FIELDS, KNOWN_HASH), CAESAR, 1733584787 - 3600, "future"),
        (launch(FIELDS, KNOWN_HASH) + "&user=x", CAESAR, WHEN, "twice"),
        ("", CAESAR, WHEN, "no launch data"),
        (
            launch({k: v for k, v in FIELDS.items() if k != "user"}, KNOWN_HASH),
            CAESAR,
            WHEN,
            "hash",
        ),
    ],
    ids=[
        "stranger",
        "zero-hash",
        "one-digit",
        "user-changed",
        "expired",
        "future",
        "twice",
        "empty",
        "no-user",
    ],
)
def test_refused(data: str, ids: frozenset[int], now: float, why: str) -> None:
    with pytest.raises(Refused, match=why):
        verify_init_data(data, TOKEN, ids, now=now)


def test_another_bots_token_does_not_verify() -> None:
    with pytest.raises(Refused, match="hash"):
        verify_init_data(launch(FIELDS, KNOWN_HASH), TOKEN + "x", CAESAR, now=WHEN)
    with pytest.raises(Refused, match="no bot token"):
        verify_init_data(launch(FIELDS, KNOWN_HASH), "", CAESAR, now=WHEN)


def test_a_signed_stranger_without_a_user_id_is_refused() -> None:
    fields = {**FIELDS, "user": '{"first_name":"x"}'}
    with pytest.raises(Refused, match="no user"):
        verify_init_data(sign_init_data(fields, TOKEN), TOKEN, CAESAR, now=WHEN)


def test_sessions_end_when_idle_and_carry_their_csrf_token() -> None:
    clock = [1000.0]
    sessions = Sessions(lambda: clock[0])
    sid, session = sessions.start(42)
    assert sessions.get(sid) is session
    assert csrf_ok(session, session.csrf)
    assert not csrf_ok(session, "")
    assert not csrf_ok(session, session.csrf[:-1] + "x")
    assert sessions.get("made-up") is None
    clock[0] += SESSION_IDLE_S + 1
    assert sessions.get(sid) is None


def test_a_one_time_link_works_once_and_only_for_five_minutes() -> None:
    clock = [0.0]
    links = Links(lambda: clock[0])
    token = links.mint()
    links.take(token)
    with pytest.raises(Refused, match="used"):
        links.take(token)
    late = links.mint()
    clock[0] += LINK_TTL_S + 1
    with pytest.raises(Refused, match="5 minutes"):
        links.take(late)
    with pytest.raises(Refused):
        links.take("")

"""A fake Telegram Bot API server (aiohttp, 127.0.0.1) for a real python-telegram-bot.

Point ``ApplicationBuilder().base_url(server.base_url)`` at it. It keeps a queue of
updates served by ``getUpdates`` with Telegram's offset semantics (an ``offset``
confirms every update below it; long polls wait up to ``timeout`` seconds), logs
every call with its parameters (``wait_for_call`` awaits one), stores the messages
the bot sends so that edits and deletes fail as Telegram's do, and injects faults
(``fail``: an error status with ``retry_after``; ``outage``: a method failing for a
while). ``sendMessageDraft`` checks what Telegram checks (a private chat, a non-zero
``draft_id``, at most 4096 UTF-16 units); ``fail("sendMessageDraft", 400, ...)`` makes
it refuse like an old server or a group would. Errors are answered with the HTTP
status equal to ``error_code``, as Telegram does and as python-telegram-bot expects.

Files: ``add_file`` registers content under a file id (``add_photo``/``add_document``
queue a message carrying it); ``getFile`` and the download path
``/file/bot<token>/<file_path>`` serve it (``hold_downloads`` stalls a download
half-way until released); ``sendPhoto``/``sendDocument`` multipart uploads are read
with aiohttp's multipart reader and kept in ``uploads``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, web

BOT_USER = {"id": 7000001, "is_bot": True, "first_name": "Legio", "username": "legio_test_bot"}
MAX_TEXT = 4096
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply "
    "markup are exactly the same as a current content and reply markup of the message"
)


@dataclass
class Call:
    """One request the bot made."""

    method: str
    params: dict[str, Any]
    at: float = field(default_factory=time.monotonic)
    status: int | None = None  # None while the request is being answered
    result: Any = None


@dataclass
class FakeFile:
    file_id: str
    file_unique_id: str
    content: bytes
    file_size: int  # what Telegram says (may differ from the content, to fake big files)
    file_path: str


@dataclass
class Upload:
    """A file the bot sent (sendPhoto / sendDocument)."""

    method: str
    chat_id: int
    filename: str
    content: bytes
    caption: str


@dataclass
class Fault:
    status: int
    description: str
    retry_after: int | None = None


# the emoji Telegram lets a bot react with (ReactionTypeEmoji); ✅ is not one
_REACTION_LIST = (
    "👍 👎 ❤ 🔥 🥰 👏 😁 🤔 🤯 😱 🤬 😢 🎉 🤩 🤮 💩 🙏 👌 🕊 🤡 🥱 🥴 😍 🐳 ❤‍🔥 🌚 🌭 💯 🤣 ⚡ 🍌 "
    "🏆 💔 🤨 😐 🍓 🍾 💋 🖕 😈 😴 😭 🤓 👻 👨‍💻 👀 🎃 🙈 😇 😨 🤝 ✍ 🤗 🫡 🎅 🎄 ☃ 💅 🤪 🗿 🆒 "
    "💘 🙉 🦄 😘 💊 🙊 😎 👾 🤷‍♂ 🤷 🤷‍♀ 😡"
)
REACTION_EMOJI = frozenset(_REACTION_LIST.split())


def _decode(value: str) -> Any:
    """Form fields carry nested values as JSON; plain strings stay strings."""
    if value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _thread(params: dict[str, Any]) -> int | None:
    """The topic a call was sent to (form fields are strings)."""
    value = params.get("message_thread_id")
    return None if value in (None, "") else int(value)


def utf16_len(text: str) -> int:
    """Length as Telegram counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


class FakeBotApi:
    """The server; use ``async with FakeBotApi() as api`` or ``start``/``stop``."""

    def __init__(self, token: str = "123456:TEST-TOKEN") -> None:
        self.token = token
        self.calls: list[Call] = []
        self.updates: list[dict[str, Any]] = []
        self.messages: dict[tuple[int, int], dict[str, Any]] = {}
        self.commands: list[dict[str, Any]] = []
        self.menu_buttons: dict[int, Any] = {}  # setChatMenuButton, by chat
        self._faults: dict[str, list[Fault]] = {}
        self._outages: dict[str, tuple[float, Fault]] = {}
        self._next_update_id = 1
        self._next_message_id = 1
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._closing = False
        self.port = 0
        self.files: dict[str, FakeFile] = {}
        self.downloads: list[str] = []  # file paths requested
        self.uploads: list[Upload] = []
        self.download_gate: asyncio.Event | None = None
        self.received: dict[tuple[int, int], dict[str, Any]] = {}  # the users' messages
        self.has_topics_enabled = False  # threaded mode (getMe), set by a test
        self.topics: dict[int, dict[int, str]] = {}  # chat -> thread id -> name
        self.reactions: dict[tuple[int, int], list[str]] = {}  # the bot's, per message
        self.allowed_updates: list[str] | None = None  # as the last getUpdates asked

    # ------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    async def start(self) -> FakeBotApi:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._closing = False
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        self._closing = True
        await self._notify()  # release long polls still waiting (e.g. a killed client's)
        if self.download_gate is not None:
            self.download_gate.set()  # and downloads held half-way
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeBotApi:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------ test controls

    def add_update(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue a raw update (its ``update_id`` is assigned here)."""
        update = {"update_id": self._next_update_id, **update}
        self._next_update_id += 1
        self.updates.append(update)
        asyncio.get_running_loop().create_task(self._notify())
        return update

    def new_message_id(self) -> int:
        """A message id no other message of this server has (for hand-made updates)."""
        return self._new_message_id()

    def add_message(
        self,
        text: str,
        *,
        user_id: int = 1001,
        chat_id: int | None = None,
        chat_type: str = "private",
        first_name: str = "Caesar",
        reply_to: int | dict[str, Any] | None = None,
        quote: str | None = None,
        thread_id: int | None = None,
    ) -> dict[str, Any]:
        """Queue a text message from a user; a leading ``/command`` gets its entity.

        ``reply_to``: a message id (the stored message, the bot's or a user's, is embedded
        as ``reply_to_message``, as Telegram does) or a message dict used as it is;
        ``quote``: the part of it the user selected; ``thread_id``: the topic it is in
        (threaded mode: a message in a topic that replies to nothing is a "reply" to the
        topic's first message, as Telegram sends it)."""
        chat = {"id": chat_id if chat_id is not None else user_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = first_name
        else:
            chat["title"] = "A group"
        message: dict[str, Any] = {
            "message_id": self._new_message_id(),
            "date": int(time.time()),
            "chat": chat,
            "from": {"id": user_id, "is_bot": False, "first_name": first_name},
            "text": text,
        }
        if text.startswith("/"):
            command = text.split()[0]
            message["entities"] = [
                {"type": "bot_command", "offset": 0, "length": utf16_len(command)}
            ]
        self._point(message, reply_to, quote, thread_id)
        self.received[(chat["id"], message["message_id"])] = message
        return self.add_update({"message": message})

    def _point(
        self,
        message: dict[str, Any],
        reply_to: int | dict[str, Any] | None,
        quote: str | None,
        thread_id: int | None,
    ) -> None:
        chat_id = message["chat"]["id"]
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
            if reply_to is None:  # Telegram's topic start: a service message
                reply_to = {
                    "message_id": thread_id,
                    "date": int(time.time()),
                    "chat": message["chat"],
                    "forum_topic_created": {
                        "name": self.topics.get(chat_id, {}).get(thread_id, "topic"),
                        "icon_color": 7322096,
                    },
                }
        if isinstance(reply_to, int):
            found = self.messages.get((chat_id, reply_to)) or self.received.get((chat_id, reply_to))
            reply_to = dict(found) if found else {
                "message_id": reply_to, "date": 0, "chat": message["chat"]
            }  # fmt: skip
        if reply_to is not None:
            message["reply_to_message"] = {
                k: v for k, v in reply_to.items() if k != "reply_to_message"
            }
        if quote is not None:
            message["quote"] = {"text": quote, "position": 0, "is_manual": True}

    def edit_message(
        self, chat_id: int, message_id: int, text: str | None = None, caption: str | None = None
    ) -> dict[str, Any]:
        """Queue an ``edited_message`` update: the user changed the text or the caption of
        message ``message_id`` (it keeps its id; ``edit_date`` is set)."""
        original = self.received[(chat_id, message_id)]
        edited = {**original, "edit_date": int(time.time())}
        if text is not None:
            edited["text"] = text
        if caption is not None:
            edited["caption"] = caption
        self.received[(chat_id, message_id)] = edited
        return self.add_update({"edited_message": edited})

    def delete_topic(self, chat_id: int, thread_id: int) -> None:
        """The user deleted a topic: sends to it now fail ("message thread not found")."""
        self.topics.get(chat_id, {}).pop(thread_id, None)

    def sent_in(self, chat_id: int, thread_id: int | None) -> list[str]:
        """Texts the bot sent to ``chat_id`` in topic ``thread_id`` (None: outside topics)."""
        return [
            str(c.params.get("text", ""))
            for c in self.calls_of("sendMessage")
            if c.status == 200
            and int(c.params["chat_id"]) == chat_id
            and _thread(c.params) == thread_id
        ]

    def add_file(self, content: bytes, *, file_size: int | None = None) -> FakeFile:
        """Register a file Telegram holds for the bot (``file_size`` may pretend more)."""
        number = len(self.files) + 1
        file = FakeFile(
            file_id=f"file-{number}",
            file_unique_id=f"uniq{number}",
            content=content,
            file_size=len(content) if file_size is None else file_size,
            file_path=f"documents/file_{number}",
        )
        self.files[file.file_id] = file
        return file

    def add_media(
        self,
        field: str,
        payload: Any,
        *,
        caption: str | None = None,
        user_id: int = 1001,
        media_group_id: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Queue a message from ``user_id`` carrying ``payload`` under ``field`` (photo,
        document, sticker, location…); ``media_group_id`` makes it part of an album;
        ``extra``: more fields of the message (``forward_origin``…)."""
        message: dict[str, Any] = {
            "message_id": self._new_message_id(),
            "date": int(time.time()),
            "chat": {"id": user_id, "type": "private", "first_name": "Caesar"},
            "from": {"id": user_id, "is_bot": False, "first_name": "Caesar"},
            field: payload,
        }
        if caption is not None:
            message["caption"] = caption
        if media_group_id is not None:
            message["media_group_id"] = media_group_id
        message.update(extra or {})
        self.received[(user_id, message["message_id"])] = message
        return self.add_update({"message": message})

    def add_photo(
        self,
        content: bytes,
        *,
        caption: str | None = None,
        user_id: int = 1001,
        media_group_id: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A photo as Telegram sends it: several sizes (the last one the largest)."""
        small = self.add_file(content[:100])
        large = self.add_file(content)
        sizes = [
            {"file_id": f.file_id, "file_unique_id": f.file_unique_id, "width": w, "height": h}
            | {"file_size": f.file_size}
            for f, w, h in ((small, 90, 60), (large, 1280, 853))
        ]
        return self.add_media(
            "photo",
            sizes,
            caption=caption,
            user_id=user_id,
            media_group_id=media_group_id,
            extra=extra,
        )

    def add_document(
        self,
        content: bytes,
        file_name: str,
        mime_type: str,
        *,
        caption: str | None = None,
        file_size: int | None = None,
        user_id: int = 1001,
        media_group_id: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        file = self.add_file(content, file_size=file_size)
        document = {
            "file_id": file.file_id,
            "file_unique_id": file.file_unique_id,
            "file_name": file_name,
            "mime_type": mime_type,
            "file_size": file.file_size,
        }
        return self.add_media(
            "document",
            document,
            caption=caption,
            user_id=user_id,
            media_group_id=media_group_id,
            extra=extra,
        )

    def hold_downloads(self) -> asyncio.Event:
        """Stall every download after half its bytes until the returned event is set."""
        self.download_gate = asyncio.Event()
        return self.download_gate

    def add_callback(
        self, data: str, message_id: int, *, user_id: int = 1001, chat_id: int | None = None
    ) -> dict[str, Any]:
        """Queue a tap on an inline button of a message the bot sent."""
        chat = chat_id if chat_id is not None else user_id
        message = self.messages.get((chat, message_id)) or {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": {"id": chat, "type": "private"},
            "text": "?",
        }
        query = {
            "id": f"cq{self._next_update_id}",
            "from": {"id": user_id, "is_bot": False, "first_name": "Someone"},
            "chat_instance": str(chat),
            "message": message,
            "data": data,
        }
        return self.add_update({"callback_query": query})

    def buttons(self, chat_id: int, message_id: int) -> list[tuple[str, str]]:
        """(text, callback data) of a message's inline keyboard as it is now."""
        markup = self.messages.get((chat_id, message_id), {}).get("reply_markup") or {}
        return [
            (b["text"], b.get("callback_data", ""))
            for row in markup.get("inline_keyboard", [])
            for b in row
        ]

    def fail(
        self,
        method: str,
        status: int,
        description: str = "",
        *,
        retry_after: int | None = None,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail with ``status``."""
        text = description or {429: "Too Many Requests: retry after"}.get(status, f"Error {status}")
        if status == 429 and retry_after is not None and not description:
            text = f"Too Many Requests: retry after {retry_after}"
        self._faults.setdefault(method, []).extend(
            Fault(status, text, retry_after) for _ in range(times)
        )

    def outage(self, method: str, seconds: float, status: int = 502) -> None:
        """Make every call of ``method`` fail with ``status`` for ``seconds``."""
        self._outages[method] = (
            time.monotonic() + seconds,
            Fault(status, "Bad Gateway" if status == 502 else "Error"),
        )

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method and c.status == 200]

    def sent_texts(self, chat_id: int | None = None) -> list[str]:
        """Texts of the messages the bot sent successfully (in order)."""
        return [
            str(c.params.get("text", ""))
            for c in self.calls_of("sendMessage")
            if chat_id is None or int(c.params["chat_id"]) == chat_id
        ]

    async def wait_for_call(
        self,
        method: str,
        predicate: Callable[[Call], bool] | None = None,
        *,
        timeout: float = 10.0,
        start: int = 0,
        completed: bool = True,
    ) -> Call:
        """The first successful call of ``method`` (from index ``start``) matching ``predicate``;
        with ``completed=False``, the first to arrive, answered or not."""

        def find() -> Call | None:
            for call in self.calls[start:]:
                if (
                    call.method == method
                    and (call.status == 200 or not completed)
                    and (predicate is None or predicate(call))
                ):
                    return call
            return None

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(find), timeout)
        found = find()
        assert found is not None
        return found

    # ------------------------------------------------------------ serving

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _new_message_id(self) -> int:
        self._next_message_id += 1
        return self._next_message_id

    async def _download(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        self.downloads.append(path)
        await self._notify()
        found = next((f for f in self.files.values() if f.file_path == path), None)
        if request.match_info["token"] != self.token or found is None:
            return web.Response(status=404, text="Not Found")
        response = web.StreamResponse(headers={"Content-Length": str(len(found.content))})
        await response.prepare(request)
        half = len(found.content) // 2
        await response.write(found.content[:half])
        if self.download_gate is not None:
            await self.download_gate.wait()
        try:
            await response.write(found.content[half:])
            await response.write_eof()
        except ConnectionResetError:  # the bot gave the download up (it was stopped)
            pass
        return response

    async def _multipart(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = {}
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            assert isinstance(part, BodyPartReader)
            if part.filename is not None:
                params[str(part.name)] = {"filename": part.filename, "content": await part.read()}
            else:
                params[str(part.name)] = _decode(await part.text())
        return params

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        if request.content_type == "application/json":
            params = await request.json()
        elif request.content_type == "multipart/form-data":
            params = await self._multipart(request)
        else:
            form = await request.post()
            params = {k: _decode(str(v)) for k, v in form.items()}
        call = Call(method, params)
        self.calls.append(call)
        await self._notify()
        try:
            if request.match_info["token"] != self.token:
                return self._error(call, 401, "Unauthorized")
            fault = self._take_fault(method)
            if fault is not None:
                return self._error(call, fault.status, fault.description, fault.retry_after)
            handler = getattr(self, f"_m_{method}", None)
            if handler is None:
                return self._error(call, 404, "Not Found: method not found")
            thread = params.get("message_thread_id")
            known = self.topics.get(int(params.get("chat_id") or 0), {})
            if thread is not None and method.startswith("send") and int(thread) not in known:
                return self._error(call, 400, "Bad Request: message thread not found")
            result = await handler(params)
            if isinstance(result, dict) and "message_id" in result and thread is not None:
                result["message_thread_id"] = int(thread)
                result["is_topic_message"] = True
            if isinstance(result, Fault):
                return self._error(call, result.status, result.description)
            call.result = result
            call.status = 200
            return web.json_response({"ok": True, "result": result})
        finally:
            await self._notify()

    def _take_fault(self, method: str) -> Fault | None:
        outage = self._outages.get(method)
        if outage is not None:
            until, fault = outage
            if time.monotonic() < until:
                return fault
            del self._outages[method]
        queue = self._faults.get(method)
        return queue.pop(0) if queue else None

    @staticmethod
    def _error(
        call: Call, status: int, description: str, retry_after: int | None = None
    ) -> web.Response:
        call.status = status
        body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
        if retry_after is not None:
            body["parameters"] = {"retry_after": retry_after}
        return web.json_response(body, status=status)

    # ------------------------------------------------------------ methods

    async def _m_getMe(self, params: dict[str, Any]) -> Any:
        return {
            **BOT_USER,
            "has_topics_enabled": self.has_topics_enabled,
            "allows_users_to_create_topics": self.has_topics_enabled,
        }

    async def _m_createForumTopic(self, params: dict[str, Any]) -> Any:
        """A topic in a private chat (threaded mode) or a forum group."""
        chat_id = int(params["chat_id"])
        if chat_id > 0 and not self.has_topics_enabled:
            return Fault(400, "Bad Request: the chat is not a forum")
        thread = self._new_message_id()  # a topic's id is its first (service) message's
        self.topics.setdefault(chat_id, {})[thread] = str(params["name"])
        return {"message_thread_id": thread, "name": str(params["name"]), "icon_color": 7322096}

    async def _m_deleteWebhook(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_getUpdates(self, params: dict[str, Any]) -> Any:
        if params.get("allowed_updates") is not None:  # kept until asked otherwise
            self.allowed_updates = list(params["allowed_updates"])
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        timeout = float(params.get("timeout") or 0)
        if offset:
            self.updates = [u for u in self.updates if u["update_id"] >= offset]

        def allowed(update: dict[str, Any]) -> bool:
            """Telegram's rule: without allowed_updates, every kind but these three."""
            kind = next(k for k in update if k != "update_id")
            if not self.allowed_updates:
                return kind not in ("chat_member", "message_reaction", "message_reaction_count")
            return kind in self.allowed_updates

        def ready() -> list[dict[str, Any]]:
            fresh = [u for u in self.updates if u["update_id"] >= offset]
            return [u for u in fresh if allowed(u)][:limit]

        if not ready() and timeout > 0:
            async with self._changed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self._changed.wait_for(lambda: bool(ready()) or self._closing), timeout
                    )
        return ready()

    async def _m_setMessageReaction(self, params: dict[str, Any]) -> Any:
        """The bot's reaction on a message: only Telegram's reaction emoji, one at most."""
        reaction = params.get("reaction") or []
        emoji = [str(r.get("emoji")) for r in reaction if r.get("type") == "emoji"]
        if any(e not in REACTION_EMOJI for e in emoji):
            return Fault(400, "Bad Request: REACTION_INVALID")
        if len(emoji) > 1:
            return Fault(400, "Bad Request: REACTIONS_TOO_MANY")
        self.reactions[(int(params["chat_id"]), int(params["message_id"]))] = emoji
        return True

    def add_reaction(
        self,
        message_id: int,
        emoji: str,
        *,
        old: str | None = None,
        user_id: int = 1001,
        chat_id: int | None = None,
    ) -> dict[str, Any]:
        """Queue a ``message_reaction`` update: the user reacted ``emoji`` to a message."""
        chat = chat_id if chat_id is not None else user_id
        reaction = {
            "chat": {"id": chat, "type": "private" if chat > 0 else "supergroup"},
            "message_id": message_id,
            "user": {"id": user_id, "is_bot": False, "first_name": "Caesar"},
            "date": int(time.time()),
            "old_reaction": [{"type": "emoji", "emoji": old}] if old else [],
            "new_reaction": [{"type": "emoji", "emoji": emoji}],
        }
        return self.add_update({"message_reaction": reaction})

    async def _m_sendMessage(self, params: dict[str, Any]) -> Any:
        text = str(params.get("text", ""))
        if not text.strip():
            return Fault(400, "Bad Request: message text is empty")
        if utf16_len(text) > MAX_TEXT:
            return Fault(400, "Bad Request: message is too long")
        entities = params.get("entities") or []
        if len(entities) > 100:
            return Fault(400, "Bad Request: too many message entities")
        size = utf16_len(text)
        for entity in entities:
            offset, length = int(entity.get("offset", -1)), int(entity.get("length", 0))
            if offset < 0 or length <= 0 or offset + length > size:
                return Fault(400, "Bad Request: can't parse entities: entity out of range")
        chat_id = int(params["chat_id"])
        message = {
            "message_id": self._new_message_id(),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "group"},
            "from": BOT_USER,
            "text": text,
        }
        if entities:
            message["entities"] = entities
        if params.get("reply_markup"):
            message["reply_markup"] = params["reply_markup"]
        self.messages[(chat_id, message["message_id"])] = message
        return message

    async def _m_sendMessageDraft(self, params: dict[str, Any]) -> Any:
        """A draft (Bot API 9.3+): private chats only, a non-zero id, at most 4096 units;
        an empty text is allowed (a "Thinking..." placeholder, Bot API 10.0)."""
        chat_id = int(params["chat_id"])
        if chat_id <= 0:
            return Fault(400, "Bad Request: drafts can be sent only to private chats")
        if int(params.get("draft_id") or 0) == 0:
            return Fault(400, "Bad Request: draft_id must be non-zero")
        text = str(params.get("text", ""))
        if utf16_len(text) > MAX_TEXT:
            return Fault(400, "Bad Request: message is too long")
        entities = params.get("entities") or []
        size = utf16_len(text)
        for entity in entities:
            offset, length = int(entity.get("offset", -1)), int(entity.get("length", 0))
            if offset < 0 or length <= 0 or offset + length > size:
                return Fault(400, "Bad Request: can't parse entities: entity out of range")
        return True

    def drafts(self, chat_id: int | None = None) -> list[tuple[int, str]]:
        """(draft_id, text) of the drafts the bot sent successfully (in order)."""
        return [
            (int(c.params["draft_id"]), str(c.params.get("text", "")))
            for c in self.calls_of("sendMessageDraft")
            if chat_id is None or int(c.params["chat_id"]) == chat_id
        ]

    async def _m_getFile(self, params: dict[str, Any]) -> Any:
        file = self.files.get(str(params.get("file_id")))
        if file is None:
            return Fault(400, "Bad Request: invalid file_id")
        if file.file_size > 20 * 1024 * 1024:
            return Fault(400, "Bad Request: file is too big")
        return {
            "file_id": file.file_id,
            "file_unique_id": file.file_unique_id,
            "file_size": file.file_size,
            "file_path": file.file_path,
        }

    def _upload(self, method: str, field: str, params: dict[str, Any]) -> Any:
        sent = params.get(field)
        if not isinstance(sent, dict):
            return Fault(400, f"Bad Request: there is no {field} in the request")
        chat_id = int(params["chat_id"])
        caption = str(params.get("caption") or "")
        self.uploads.append(Upload(method, chat_id, sent["filename"], sent["content"], caption))
        file = self.add_file(sent["content"])
        message: dict[str, Any] = {
            "message_id": self._new_message_id(),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "group"},
            "from": BOT_USER,
        }
        ids = {"file_id": file.file_id, "file_unique_id": file.file_unique_id}
        if field == "photo":
            message["photo"] = [{**ids, "width": 100, "height": 100}]
        else:
            message["document"] = {**ids, "file_name": sent["filename"]}
        if caption:
            message["caption"] = caption
        return message

    async def _m_sendPhoto(self, params: dict[str, Any]) -> Any:
        return self._upload("sendPhoto", "photo", params)

    async def _m_sendMediaGroup(self, params: dict[str, Any]) -> Any:
        """An album: 2 to 10 photos (or documents), each ``attach://<field>`` to an uploaded
        part; one message per item, as Telegram sends them."""
        media = params.get("media")
        items = json.loads(media) if isinstance(media, str) else media
        if not isinstance(items, list) or not 2 <= len(items) <= 10:
            return Fault(400, "Bad Request: wrong number of media in the album")
        sent = []
        for item in items:
            ref = str(item.get("media", ""))
            field = ref.removeprefix("attach://")
            if not ref.startswith("attach://") or not isinstance(params.get(field), dict):
                return Fault(400, "Bad Request: media not found")
            kind = "photo" if item.get("type") == "photo" else "document"
            one = {"chat_id": params["chat_id"], kind: params[field]}
            if item.get("caption"):
                one["caption"] = item["caption"]
            sent.append(self._upload("sendMediaGroup", kind, one))
        return sent

    async def _m_sendDocument(self, params: dict[str, Any]) -> Any:
        return self._upload("sendDocument", "document", params)

    async def _m_editMessageText(self, params: dict[str, Any]) -> Any:
        key = (int(params["chat_id"]), int(params["message_id"]))
        message = self.messages.get(key)
        if message is None:
            return Fault(400, "Bad Request: message to edit not found")
        text = str(params.get("text", ""))
        if not text.strip():
            return Fault(400, "Bad Request: message text is empty")
        if utf16_len(text) > MAX_TEXT:
            return Fault(400, "Bad Request: message is too long")
        markup = params.get("reply_markup") or None
        if (
            text == message["text"]
            and (params.get("entities") or []) == message.get("entities", [])
            and markup == message.get("reply_markup")
        ):
            return Fault(400, NOT_MODIFIED)
        message["text"] = text
        self._set_markup(message, markup)
        return message

    @staticmethod
    def _set_markup(message: dict[str, Any], markup: Any) -> None:
        if markup and markup.get("inline_keyboard"):
            message["reply_markup"] = markup
        else:
            message.pop("reply_markup", None)

    async def _m_editMessageReplyMarkup(self, params: dict[str, Any]) -> Any:
        key = (int(params["chat_id"]), int(params["message_id"]))
        message = self.messages.get(key)
        if message is None:
            return Fault(400, "Bad Request: message to edit not found")
        markup = params.get("reply_markup") or None
        if markup == message.get("reply_markup"):
            return Fault(400, NOT_MODIFIED)
        self._set_markup(message, markup)
        return message

    async def _m_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_deleteMessage(self, params: dict[str, Any]) -> Any:
        key = (int(params["chat_id"]), int(params["message_id"]))
        if self.messages.pop(key, None) is None:
            return Fault(400, "Bad Request: message to delete not found")
        return True

    async def _m_sendChatAction(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_setMyCommands(self, params: dict[str, Any]) -> Any:
        self.commands = list(params.get("commands") or [])
        return True

    async def _m_setChatMenuButton(self, params: dict[str, Any]) -> Any:
        button = params.get("menu_button")
        self.menu_buttons[int(params.get("chat_id") or 0)] = (
            json.loads(button) if isinstance(button, str) else button
        )
        return True

    async def _m_getMyCommands(self, params: dict[str, Any]) -> Any:
        return self.commands

    async def _m_close(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_logOut(self, params: dict[str, Any]) -> Any:
        return True

"""The ``legio`` command: ``init``, ``check``, ``run``, ``console``, ``status`` (and the
operations' ``backup``, ``restore``, ``export``, from ``legio.operations.commands``).

Every command prints what a person needs (what was created, what is wrong and how
to fix it) and returns an exit code; a ``LegioError`` is printed as its message,
never as a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources, util
from pathlib import Path

from legio import __version__
from legio.castra import PROMPT_FILE, Castra
from legio.config import (
    DEFAULT_CONFIG_NAME,
    Config,
    default_config_path,
    load_config,
)
from legio.errors import LegioError
from legio.fence import handoff
from legio.fence.folders import policy_problems
from legio.fence.guard import PathGuard
from legio.fence.launch import restart_argv, start_again, take_token
from legio.fence.policy import denied_env_names
from legio.fence.sandbox import announce_sandbox, keys_report, policy_report
from legio.forge.checkup import check_forge
from legio.jobs.schedule import local_zone_name
from legio.limits.plan import login_state
from legio.media.listening import voice_line
from legio.operations.backup import folder_verdict
from legio.operations.commands import add_commands
from legio.operations.control import ask_daemon, health_problem
from legio.operations.logfile import file_handler, log_path, tail
from legio.operations.private import PRIVATE_UMASK, privacy_report, start_daemon_process
from legio.operations.report import render
from legio.projects.overview import check_projects

OK, BAD, WARN = "✓", "✗", "!"


def default_castra_source() -> Path:
    """The default castra shipped with the package (its prompt files)."""
    return Path(str(resources.files("legio") / "default_castra"))


def bundled_cli_path() -> Path:
    """Where claude-agent-sdk keeps the Claude CLI it bundles (found without importing it)."""
    spec = util.find_spec("claude_agent_sdk")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0] if locations else ".") / "_bundled" / "claude"


def find_claude_cli(config: Config) -> tuple[Path | None, str]:
    """The Claude CLI agents will run, and a description of where it came from."""
    if config.claude.cli_path:
        configured = Path(config.claude.cli_path)
        found = shutil.which(str(configured))
        if found:
            return Path(found), f"claude.cli_path ({found})"
        return None, f"claude.cli_path = {config.claude.cli_path!r} is not an executable file"
    bundled = bundled_cli_path()
    if bundled.is_file() and os.access(bundled, os.X_OK):
        return bundled, f"bundled with claude-agent-sdk ({bundled})"
    on_path = shutil.which("claude")
    if on_path:
        return Path(on_path), f"found on PATH ({on_path})"
    return None, "no Claude CLI: reinstall claude-agent-sdk, or set claude.cli_path"


# ---------------------------------------------------------------- init


def cmd_init(args: argparse.Namespace) -> int:
    """Write ``legio.toml`` and a default castra into a folder, never overwriting."""
    target = Path(args.dir)
    target.mkdir(parents=True, exist_ok=True)
    created: list[Path] = []
    kept: list[Path] = []

    def place(path: Path, content: bytes) -> None:
        if path.exists():
            kept.append(path)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        created.append(path)

    source = default_castra_source()
    for prompt in sorted(source.rglob(PROMPT_FILE)):
        place(target / "castra" / prompt.relative_to(source), prompt.read_bytes())
    annotated = Path(str(resources.files("legio") / "default_legio.toml"))  # the repo's own
    place(target / DEFAULT_CONFIG_NAME, annotated.read_bytes())

    for path in created:
        print(f"created  {path}")
    for path in kept:
        print(f"kept     {path} (already there, not overwritten)")
    config_file = target / DEFAULT_CONFIG_NAME
    print(
        f"\nNext, to try it without Telegram: `cd {target} && legio console`.\n"
        f"For Telegram: put your user id in caesar_ids in {config_file}, export "
        f"TELEGRAM_BOT_TOKEN, run `legio check -c {config_file}`, then `legio run`."
    )
    return 0


# ---------------------------------------------------------------- check


@dataclass
class Report:
    """Lines of a ``legio check`` report; any failure makes the exit code 1."""

    lines: list[str] = field(default_factory=list)
    failed: bool = False

    def ok(self, text: str) -> None:
        self.lines.append(f"{OK} {text}")

    def bad(self, text: str) -> None:
        self.lines.append(f"{BAD} {text}")
        self.failed = True

    def warn(self, text: str) -> None:
        self.lines.append(f"{WARN} {text}")


def running_as_root() -> bool:
    """Whether this process runs as root (the Claude CLI treats that specially)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def root_refusal(config: Config, is_root: bool) -> str | None:
    """Why the Claude CLI would refuse to run every agent, or None."""
    if (
        config.claude.permission_mode == "bypassPermissions"
        and is_root
        and os.environ.get("IS_SANDBOX") != "1"
    ):
        return (
            "running as root with bypassPermissions: the Claude CLI refuses this. Run Legio "
            "as an ordinary user, or set IS_SANDBOX=1 if this machine is a sandbox you do "
            "not mind agents changing"
        )
    return None


CLI_AUTOCOMPACT_TOKENS = 167_000  # CLI 2.1.330's autoCompactThreshold for a 200k window


def check_config(config: Config, *, is_root: bool | None = None, console: bool = False) -> Report:
    """Everything ``legio check`` verifies about a loaded config; with ``console``, for
    ``legio console``: the Telegram token and Caesar's id are needed by ``legio run`` only,
    so their absence is noted, not a failure."""
    report = Report()
    telegram_bad = report.warn if console else report.bad
    if is_root is None:
        is_root = running_as_root()
    report.ok(f"config {config.path}")
    castra = Castra(config.castra)
    try:
        castra.read_legatus()
        report.ok(f"castra {castra.root}: Legatus prompt {castra.legatus_prompt_path}")
    except LegioError as e:
        report.bad(f"Legatus: {e}")
    roster = castra.roster()
    if roster.centuriones:
        names = ", ".join(
            f"{n} ({p.description})" if p.description else n for n, p in roster.centuriones.items()
        )
        report.ok(f"centuriones: {names}")
    else:
        report.warn("no centuriones: add a folder with a prompt.md under castra/centuriones/")
    for problem in roster.problems:
        report.bad(problem)

    token_env = config.telegram.token_env
    if config.telegram_token():
        report.ok(f"Telegram token: ${token_env} is set")
    else:
        telegram_bad(
            f"Telegram token: ${token_env} is not set; create a bot with @BotFather and "
            f"`export {token_env}=<token>` (needed by `legio run` only, not by `legio console`)"
        )
    if config.telegram.caesar_ids:
        ids = ", ".join(str(i) for i in config.telegram.caesar_ids)
        report.ok(f"Caesar: Telegram user id(s) {ids}")
    else:
        telegram_bad(
            "Caesar: telegram.caesar_ids is empty; put your Telegram user id there "
            "(the bot serves nobody else; needed by `legio run` only)"
        )
    if config.telegram.base_url:
        report.ok(f"Telegram Bot API server: {config.telegram.base_url}")
    zone = config.timezone or f"{local_zone_name()} (the machine's; set `timezone` to choose)"
    report.ok(f"time zone of scheduled jobs: {zone}")

    if config.max_input_tokens >= CLI_AUTOCOMPACT_TOKENS:
        report.warn(
            f"max_input_tokens is {config.max_input_tokens:,}: the Claude CLI compacts a "
            f"session itself at about {CLI_AUTOCOMPACT_TOKENS:,} tokens (of 200,000), before "
            "Legio would ask the agent for its summary; 150000 (the default) leaves room"
        )
    cli, where = find_claude_cli(config)
    if cli is None:
        report.bad(f"Claude CLI: {where}")
    else:
        report.ok(f"Claude CLI: {where}")
    refusal = root_refusal(config, is_root)
    if refusal:
        report.bad(refusal)
    for problem in policy_problems(config, castra):
        report.bad(problem)
    health = health_problem(config)
    if health:
        report.bad(health)
    elif config.health.allow_remote:
        report.warn(
            f"health endpoint: http://{config.health.listen}/health answers other machines "
            "too ([health] allow_remote): anyone who reaches it reads your agents' status"
        )
    elif config.health.listen:
        report.ok(f"health endpoint: http://{config.health.listen}/health")
    from legio.frontends.web.server import web_problem  # aiohttp: only when asked

    cockpit = web_problem(config)
    if cockpit:
        report.bad(cockpit)
    elif config.web.listen:
        where = config.web.public_url or "no public_url: `legio cockpit` links only"
        report.ok(f"cockpit: http://{config.web.listen} ({where})")
        if config.web.public_url.startswith("http://"):
            report.warn("[web] public_url is http: Telegram opens only https Mini Apps")
    mark, text = folder_verdict(config)  # the backup folder: nobody else may write there
    getattr(report, mark)(text)
    login_ok, login = login_state(dict(os.environ))  # legio.limits.plan
    (report.ok if login_ok else report.warn)(login)
    asks = ", ".join(config.approvals.ask) or "nothing (approvals off)"
    report.ok(f"approvals: agents ask Caesar before {asks}")
    for name in castra.roster().names:
        with contextlib.suppress(LegioError):
            own = castra.read_centurio(name).settings.ask
            if own:
                report.ok(f"approvals: {name} also asks before {', '.join(own)} (its ask:)")
    with ThreadPoolExecutor(1) as thread:  # its own loop: a caller may run one already
        projects = thread.submit(asyncio.run, check_projects(config, castra)).result()
        projects += thread.submit(asyncio.run, check_forge(config)).result()
    for mark, text in [
        *projects,
        voice_line(config),
        *keys_report(config, castra),
        *privacy_report(config),  # legio.operations.private
    ]:
        getattr(report, mark)(text)
    report.lines += policy_lines(config, castra)
    return report


def policy_lines(config: Config, castra: Castra) -> list[str]:
    """Each agent's effective policy: tools, sandbox, writable folders, network."""
    lines = ["", "Agent policy:"]
    hidden = denied_env_names(config)
    lines.append(
        "  environment: hidden from agents: "
        + (", ".join(hidden) if hidden else "nothing set now")
        + f" (token variable and claude.env_deny = {config.claude.env_deny})"
    )
    marks = {"ok": OK, "warn": WARN, "bad": BAD, "": " "}
    lines += [
        f"  {marks[mark]} {text}" if mark else f"  {text}"
        for mark, text in policy_report(config, castra)
    ]
    guard = PathGuard(castra, "vorenus", config.path, hide=config.sandbox.hide)
    lines.append("  protected (every centurio): " + "; ".join(guard.protected()))
    return lines


def cmd_check(args: argparse.Namespace) -> int:
    """Validate config and castra, report the token and the Claude CLI."""
    config = load_config(args.config)
    report = check_config(config, console=args.console)
    print("\n".join(report.lines))
    what = " for `legio console`" if args.console else ""
    print(f"\nlegio check{what}: " + ("problems found (✗ above)" if report.failed else "all good"))
    return 1 if report.failed else 0


# ---------------------------------------------------------------- run / console


def setup_logging(config: Config) -> None:
    """Log records to stderr (the journal) and the castra's rotated log file."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        handlers=[logging.StreamHandler(), file_handler(config)],
    )
    for noisy in ("httpx", "httpcore", "telegram.ext.Application"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def startup_problems(config: Config, *, telegram: bool, is_root: bool | None = None) -> list[str]:
    """What stops Legio from starting at all, each with its fix."""
    problems = []
    if is_root is None:
        is_root = running_as_root()
    try:
        Castra(config.castra).read_legatus()
    except LegioError as e:
        problems.append(f"the Legatus has no usable prompt: {e}")
    refusal = root_refusal(config, is_root)
    if refusal:
        problems.append(refusal)
    problems += policy_problems(config, Castra(config.castra))
    health = health_problem(config)
    if health:
        problems.append(health)
    from legio.frontends.web.server import web_problem

    cockpit = web_problem(config)
    if cockpit:
        problems.append(cockpit)
    if telegram:
        if not config.telegram_token():
            problems.append(
                f"${config.telegram.token_env} is empty: export the bot token from @BotFather"
            )
        if not config.telegram.caesar_ids:
            problems.append(
                "telegram.caesar_ids is empty: put your Telegram user id in legio.toml "
                "(an open bot would let anyone run agents on this machine)"
            )
    return problems


def _refuse(command: str, problems: list[str]) -> int:
    print(f"legio {command}: cannot start:", file=sys.stderr)
    for problem in problems:
        print(f"  - {problem}", file=sys.stderr)
    return 1


def cmd_run(args: argparse.Namespace) -> int:
    """Run the Telegram bot until SIGINT/SIGTERM."""
    start_daemon_process()  # descriptors (legio.operations.private)
    config = load_config(args.config)
    handoff.receive()  # python -m legio did already: then this does nothing
    if not handoff.given():  # else checked a moment ago, before the restart
        problems = startup_problems(config, telegram=True)
        if problems:
            return _refuse("run", problems)
    token = take_token(config)  # may start this process again without secrets in its env
    setup_logging(config)
    announce_sandbox(config, Castra(config.castra))

    from legio.app import LegioApp
    from legio.frontends.telegram.serving import serve

    again = False  # /restart: start this process again once it has stopped

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)

        def restart() -> None:
            nonlocal again
            again = True
            stop.set()

        async def opened() -> LegioApp:
            app = await LegioApp.open(config)
            await app.operations.start_operations(restart)  # status socket, health, watchdog
            return app

        await serve(config, token, opened, stop, grace_s=config.shutdown_grace_seconds)

    asyncio.run(main())
    if again:
        logging.getLogger(__name__).info("starting again: %s", " ".join(restart_argv(config)))
        logging.shutdown()
        start_again(config, token)  # returns only if it failed
        print("legio run: could not start again; start it by hand", file=sys.stderr)
        return 1
    return 0


def cmd_console(args: argparse.Namespace) -> int:
    """Chat with the Legatus in this terminal (no Telegram token needed)."""
    start_daemon_process()
    config = load_config(args.config)
    problems = startup_problems(config, telegram=False)
    if problems:
        return _refuse("console", problems)
    take_token(config, "console")  # no secrets in this process's environment either
    log = console_logging(config, verbose=args.verbose)
    note = f"Log records go to {log}" + ("." if args.verbose else " (--verbose shows them here).")
    announce_sandbox(config, Castra(config.castra))

    from legio.app import LegioApp
    from legio.frontends.console.terminal import run_console
    from legio.frontends.web.server import Cockpit, open_cockpit
    from legio.request import Watch

    cockpit: list[Cockpit] = []

    async def opened() -> LegioApp:
        app = await LegioApp.open(config)
        await app.operations.start_operations()  # `legio status` answers here too
        page = await open_cockpit(app, config)  # [web]: `legio cockpit`'s links sign in
        cockpit.extend([page] if page is not None else [])
        app.operations.listening("console")
        return app

    def observe(watch: Watch) -> Watch:  # each request live on the cockpit's page too
        return cockpit[0].observe(watch) if cockpit else watch

    with contextlib.suppress(KeyboardInterrupt):  # the console says it closed, once
        asyncio.run(run_console(opened, note=note, observe=observe))
    return 0


def console_logging(config: Config, *, verbose: bool) -> Path:
    """Log records go to ``castra/state/legio.log`` (rotated), never into the conversation
    (and to the terminal too with ``--verbose``)."""
    handlers: list[logging.Handler] = [file_handler(config)]
    if verbose:
        handlers.append(logging.StreamHandler(sys.stderr))
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )
    for noisy in ("httpx", "httpcore", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return log_path(config.castra)


# ---------------------------------------------------------------- status


def cmd_status(args: argparse.Namespace) -> int:
    """Ask the running daemon how it is; not running: say so, with its log's last lines."""
    config = load_config(args.config)
    status = ask_daemon(config.castra)
    if status is None:
        log = log_path(config.castra)
        print(f"Legio is not running on the castra {config.castra}.")
        lines = tail(log, args.lines)
        if lines:
            print(f"The last lines of its log ({log}):")
            print("\n".join(f"  {line}" for line in lines))
        else:
            print(f"No log at {log}.")
        return 3  # as `systemctl status` says "not running"
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print("\n".join(render(status)))
    return 0


def cmd_cockpit(args: argparse.Namespace) -> int:
    """A one-time link to the cockpit, minted by the running daemon (its status socket)."""
    config = load_config(args.config)
    if not config.web.listen:
        print(
            'The cockpit is off: set [web] listen (e.g. "127.0.0.1:8788") in legio.toml '
            "and restart Legio. docs/cockpit.md shows how.",
            file=sys.stderr,
        )
        return 1
    answer = ask_daemon(config.castra, request="cockpit")
    if answer is None:
        print(f"Legio is not running on the castra {config.castra}: start it first.")
        return 3
    if not isinstance(answer.get("url"), str):
        print(
            "The running Legio serves no cockpit: it was started without [web] listen, or "
            "could not listen there (see `legio status` and its log). Restart it.",
            file=sys.stderr,
        )
        return 1
    print("Open this within 5 minutes; it works once (run `legio cockpit` again for another):")
    print(answer["url"])
    return 0


# ---------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="legio",
        description="Legio: a personal Telegram bot run by a Legatus and its centuriones.",
    )
    parser.add_argument("--version", action="version", version=f"legio {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    init = sub.add_parser(
        "init",
        help="write legio.toml and a default castra into DIR",
        description="Write an annotated legio.toml and the default castra (the Legatus and "
        "two centuriones) into DIR; nothing there is overwritten.",
    )
    init.add_argument(
        "dir", nargs="?", default=".", metavar="DIR", help="the folder (default: this one)"
    )
    init.set_defaults(func=cmd_init)

    config_help = f"config file (default: $LEGIO_CONFIG, else ./{DEFAULT_CONFIG_NAME})"
    for name, func, text in (
        ("check", cmd_check, "validate the config and castra, and report what is missing"),
        ("run", cmd_run, "run the Telegram bot"),
        ("console", cmd_console, "chat with the Legatus in this terminal"),
        ("status", cmd_status, "ask the running Legio how it is (or show its log's end)"),
        ("cockpit", cmd_cockpit, "print a one-time link to the cockpit (the web page)"),
    ):
        command = sub.add_parser(name, help=text, description=text)
        command.add_argument("-c", "--config", type=Path, default=None, help=config_help)
        command.set_defaults(func=func)
        if name == "console":
            command.add_argument(
                "-v", "--verbose", action="store_true", help="show log records here too"
            )
        if name == "status":
            command.add_argument("--json", action="store_true", help="print the raw JSON")
            command.add_argument(
                "-n", "--lines", type=int, default=20, help="log lines shown when not running"
            )
        if name == "check":
            command.add_argument(
                "--console",
                action="store_true",
                help="check for `legio console` only (no Telegram token or id needed)",
            )
    add_commands(sub, config_help)  # backup, restore, export (legio.operations)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``legio`` console script."""
    args = build_parser().parse_args(argv)
    if getattr(args, "config", "unset") is None:
        args.config = default_config_path()
    umask = os.umask(PRIVATE_UMASK)  # what Legio writes is its user's alone
    try:
        result: int = args.func(args)
    except LegioError as e:
        print(f"legio {args.command}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        os.umask(umask)  # for a caller in the same process (tests)
    return result

"""The operations' ``legio`` commands: ``backup``, ``restore``, ``export``.

Each prints what a person needs (the archive written, the castra rebuilt and how to start
it, the file exported) and returns an exit code; ``legio.cli`` registers them
(``add_commands``) and prints a ``LegioError`` as its message.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from legio.castra import Castra
from legio.config import Config, default_config_path, load_config
from legio.errors import ConfigError
from legio.jobs.schedule import zone
from legio.operations.backup import BackupError, backup_dir, make_backup, prune
from legio.operations.export import EXTENSIONS, FORMATS, ExportSpec, export_history, parse_since
from legio.operations.restore import restore
from legio.operations.routine import record_last
from legio.timing import now
from legio.visible import visible


def cmd_backup(args: argparse.Namespace) -> int:
    """Write one archive of the castra (the daemon may be running)."""
    config = load_config(args.config)
    folder = Path(os.path.abspath(args.dir)) if args.dir else backup_dir(config)
    try:
        result = make_backup(config, folder, attachments=args.attachments or None)
    except BackupError as e:
        record_last(config.castra, now(), None, str(e))  # legio status shows it
        raise
    if result.warning:
        print(result.warning, file=sys.stderr)
    print(
        f"backup written: {result.archive} ({result.size / 1e6:.1f} MB, {result.files} files, "
        f"{result.seconds:.1f} s)"
    )
    if result.removed:
        print(f"left out of its legio.toml as secrets: {', '.join(result.removed)}")
    pruned = prune(folder, args.keep, result.archive) if args.keep else None
    record_last(config.castra, now(), result.archive, None, pruned.error if pruned else None)
    if pruned is None:
        return 0
    for old in pruned.removed:
        print(f"removed  {old} (keeping the newest {args.keep})")
    if pruned.foreign:
        names = ", ".join(p.name for p in pruned.foreign)
        print(f"left alone (named like archives, not Legio's): {names}")
    if pruned.error:
        print(f"older archives not removed: {pruned.error}", file=sys.stderr)
        return 1
    return 0


def running_config(path: Path | None) -> tuple[Config | None, str]:
    """The configuration in use for ``legio restore`` (``-c``, else ``$LEGIO_CONFIG`` or
    ``./legio.toml`` if there is one), and a note when there is none."""
    if path is not None:
        return load_config(path), ""
    default = default_config_path()
    if not default.is_file():
        return None, f"no running configuration ({default} does not exist; -c FILE names one)"
    try:
        return load_config(default), ""
    except ConfigError as e:
        return None, f"the running configuration {default} could not be read: {e}"


def cmd_restore(args: argparse.Namespace) -> int:
    """Rebuild a castra from an archive into an empty folder; its legio.toml set aside."""
    running, note = running_config(args.running)
    report = restore(Path(args.archive), Path(args.dir), running)
    print(
        f"restored {report.files} files into {report.castra.parent}: the praetorium is whole "
        f"({report.nuntii:,} messages, schema {report.schema_version})."
    )
    _listed(
        [visible(name, keep="") for name in report.left_out],
        f"not restored ({len(report.left_out)} files a backup never holds: Legio's own "
        "state, logins, workspaces; this archive was changed after it was written):",
    )
    _listed(
        [visible(grant, keep="") for grant in report.grants],
        "Always grants in the archive, restored revoked (each would let an agent act "
        "without asking; answer Always again when an agent asks to grant one anew):",
    )
    _listed(
        [visible(job, keep="") for job in report.jobs],
        "Scheduled jobs in the archive, restored disabled (each would run as Caesar's "
        "request; none runs, /jobs does not list them, no command turns one back on: "
        "ask the Legatus to schedule again each you recognise):",
    )
    _listed(
        list(report.prompts),
        "Prompts unlike the running castra's (a prompt's frontmatter sets its agent's "
        "tools, folders and approvals; read them before starting it):",
    )
    mine = "the running configuration" if running is not None else "Legio's defaults"
    print(
        f"The archive's legio.toml is set aside as {report.restored_config}, not applied"
        + (
            f"; where it differs from {mine} ({'running' if running else 'default'} → archive):"
            if report.differences
            else f" (it matches {mine} in the keys that decide who commands and what "
            "agents may do)."
        )
    )
    print("\n".join(f"  {line}" for line in report.differences))
    if report.config is not None:
        print(
            f"Start it with `legio run -c {report.config}` (the running configuration, "
            "pointed at the restored castra; export the Telegram token again: a backup "
            "never holds secrets). Stop the old daemon first if it uses the same bot."
        )
    else:
        print(
            f"{note}: no legio.toml was written. Review {report.restored_config}, and copy "
            f"it to {report.castra.parent / 'legio.toml'} only once every line of it is yours."
        )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write the conversation to a file, streamed."""
    config = load_config(args.config)
    since = parse_since(args.since, zone_name=config.timezone) if args.since else None
    spec = ExportSpec(args.format, args.agent, since, zone(config.timezone))
    made = now().astimezone(spec.zone)
    out = Path(args.output or f"legio-export-{made:%Y-%m-%d}.{EXTENSIONS[args.format]}")
    result = export_history(Castra(config.castra).praetorium_path, out, spec, made)
    print(f"exported {result.nuntii:,} messages to {result.path} ({result.size / 1e6:.1f} MB)")
    return 0


def add_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], config_help: str
) -> None:
    """Register ``backup``, ``restore`` and ``export`` on ``legio``'s sub-commands."""
    text = "write one dated archive of the castra (while Legio runs, too)"
    backup = sub.add_parser("backup", help=text, description=text)
    backup.add_argument(
        "dir",
        nargs="?",
        default=None,
        metavar="DIR",
        help="where (default: [backup] dir, else castra/state/backups/)",
    )
    backup.add_argument("-c", "--config", type=Path, default=None, help=config_help)
    backup.add_argument(
        "--attachments",
        action="store_true",
        help="also copy the files sent and received (castra/attachments/)",
    )
    backup.add_argument(
        "--keep",
        type=int,
        default=0,
        metavar="N",
        help="then remove all but the newest N archives in DIR",
    )
    backup.set_defaults(func=cmd_backup)

    text = "rebuild a castra from a backup archive into an empty folder"
    again = sub.add_parser("restore", help=text, description=text)
    again.add_argument("archive", metavar="ARCHIVE", help="a legio-backup-….tar.gz")
    again.add_argument("dir", metavar="DIR", help="a new or empty folder")
    again.add_argument(
        "-c",
        "--config",
        dest="running",  # not filled in by legio.cli: no -c and no file is a case of its own
        type=Path,
        default=None,
        help="the running configuration (default: $LEGIO_CONFIG or ./legio.toml if there is "
        "one): DIR/legio.toml is it, pointed at the restored castra",
    )
    again.set_defaults(func=cmd_restore)

    text = "write the conversation to a file (Markdown, HTML or JSON Lines)"
    export = sub.add_parser("export", help=text, description=text)
    export.add_argument("-c", "--config", type=Path, default=None, help=config_help)
    export.add_argument(
        "--agent", default=None, metavar="NAME", help="only what this agent said or was told"
    )
    export.add_argument(
        "--since",
        default=None,
        metavar="DATE",
        help="from this day (2026-11-01, on the configured clock)",
    )
    export.add_argument("--format", choices=FORMATS, default="md")
    export.add_argument(
        "-o",
        "--output",
        default=None,
        metavar="FILE",
        help="default: legio-export-<date>.<md|html|jsonl> here",
    )
    export.set_defaults(func=cmd_export)


def _listed(lines: list[str], heading: str) -> None:
    """``heading`` and ``lines`` indented under it; nothing when there are none."""
    if lines:
        print(heading)
        print("\n".join(f"  {line}" for line in lines))

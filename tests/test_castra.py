"""The castra: prompt files, frontmatter, roster, hashes, and folders that are reported."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from legio.castra import Castra, validate_centurio_name
from legio.errors import CastraError


def add_centurio(castra_dir: Path, name: str, text: str) -> Path:
    folder = castra_dir / "centuriones" / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "prompt.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_default_castra_has_a_legatus_and_two_described_centuriones(castra_dir: Path) -> None:
    castra = Castra(castra_dir)
    roster = castra.roster()
    assert roster.names == ["pullo", "vorenus"]
    assert roster.problems == ()
    assert roster.centuriones["vorenus"].description == "Code reviewer and software engineer"
    legatus = castra.read_legatus()
    assert "dispatch" in legatus.body
    assert not legatus.body.startswith("---")


def test_frontmatter_settings_are_read(castra_dir: Path) -> None:
    add_centurio(
        castra_dir,
        "brutus",
        "---\ndescription: Planner\nmodel: claude-x\nhistory_window: 12\n"
        "tools: [Read, Grep]\ncwd: /srv/work\nadd_dirs: [~/code/app, /srv/data]\n"
        "---\n# Brutus\nPlan things.\n",
    )
    brutus = Castra(castra_dir).roster().centuriones["brutus"]
    assert brutus.description == "Planner"
    assert brutus.settings.model == "claude-x"
    assert brutus.settings.history_window == 12
    assert brutus.settings.tools == ["Read", "Grep"]
    assert brutus.settings.cwd == "/srv/work"
    assert brutus.settings.add_dirs == ["~/code/app", "/srv/data"]
    assert Castra(castra_dir).read_centurio("vorenus").settings.add_dirs == []
    assert brutus.body == "# Brutus\nPlan things."


def test_description_falls_back_to_the_first_heading(castra_dir: Path) -> None:
    add_centurio(castra_dir, "cato", "\n\n## Cato — the censor\n\nBe strict.\n")
    assert Castra(castra_dir).roster().centuriones["cato"].description == "Cato — the censor"


def test_description_falls_back_to_the_first_line_without_heading(castra_dir: Path) -> None:
    add_centurio(castra_dir, "cato", "Keeps the accounts.\nMore text.")
    assert Castra(castra_dir).roster().centuriones["cato"].description == "Keeps the accounts."


@pytest.mark.parametrize(
    ("folder", "expected"),
    [
        ("Vorenus2", "not a valid centurio name"),
        ("9lives", "not a valid centurio name"),
        ("has space", "not a valid centurio name"),
        ("a" * 33, "not a valid centurio name"),
        ("legatus", "'legatus' is reserved"),
        ("all", "'all' is reserved"),
        ("caesar", "'caesar' is reserved"),
    ],
)
def test_invalid_or_reserved_folders_are_reported_not_used(
    castra_dir: Path, folder: str, expected: str
) -> None:
    add_centurio(castra_dir, folder, "# Someone\n")
    roster = Castra(castra_dir).roster()
    assert folder not in roster.centuriones
    assert len(roster.problems) == 1
    assert roster.problems[0].startswith(f"centuriones/{folder}: ignored, ")
    assert expected in roster.problems[0]


def test_folder_without_prompt_and_stray_file_are_reported(castra_dir: Path) -> None:
    (castra_dir / "centuriones" / "empty").mkdir()
    (castra_dir / "centuriones" / "notes.txt").write_text("x")
    (castra_dir / "centuriones" / ".hidden").mkdir()
    problems = Castra(castra_dir).roster().problems
    assert any(
        p.startswith("centuriones/empty: ignored") and "prompt file not found" in p
        for p in problems
    )
    assert any(p.startswith("centuriones/notes.txt: not a folder") for p in problems)
    assert len(problems) == 2


def test_broken_frontmatter_is_reported_with_the_file(castra_dir: Path) -> None:
    add_centurio(castra_dir, "bad", "---\ndescription: [unclosed\n---\nbody\n")
    add_centurio(castra_dir, "worse", "---\nhistory_window: -1\ncolour: red\n---\nbody\n")
    problems = "\n".join(Castra(castra_dir).roster().problems)
    assert "centuriones/bad: ignored" in problems
    assert "frontmatter does not parse" in problems
    assert "`history_window` in" in problems
    assert "Input should be greater than or equal to 1 (got -1)" in problems
    assert "unknown key `colour` in " in problems and "worse/prompt.md" in problems


def test_a_misspelt_frontmatter_key_is_named_like_a_bad_config_key(castra_dir: Path) -> None:
    path = add_centurio(castra_dir, "typo", "---\ndescripton: a typo\n---\nbody\n")
    problems = "\n".join(Castra(castra_dir).roster().problems)
    assert f"unknown key `descripton` in {path}; did you mean `description`?" in problems


def test_non_utf8_prompt_is_reported(castra_dir: Path) -> None:
    path = add_centurio(castra_dir, "latin1", "")
    path.write_bytes(b"caf\xe9")
    assert "not UTF-8 text" in Castra(castra_dir).roster().problems[0]


def test_read_centurio_refuses_path_tricks(castra_dir: Path) -> None:
    with pytest.raises(CastraError, match="not a valid centurio name"):
        Castra(castra_dir).read_centurio("../legatus")


def test_missing_legatus_prompt_is_a_clear_error(castra_dir: Path) -> None:
    (castra_dir / "legatus" / "prompt.md").unlink()
    with pytest.raises(CastraError, match=r"legatus/prompt.md: prompt file not found"):
        Castra(castra_dir).read_legatus()
    assert Castra(castra_dir).legatus_mtime_ns() == 0


def test_prompt_hash_changes_with_the_file_and_only_then(castra_dir: Path) -> None:
    castra = Castra(castra_dir)
    first = castra.read_centurio("pullo").sha256
    assert castra.read_centurio("pullo").sha256 == first
    path = castra_dir / "centuriones" / "pullo" / "prompt.md"
    path.write_text(path.read_text() + "\nAlso be kind.\n")
    assert castra.read_centurio("pullo").sha256 != first


def test_roster_hash_follows_names_and_descriptions_not_prompt_bodies(castra_dir: Path) -> None:
    castra = Castra(castra_dir)
    before = castra.roster().hash
    vorenus = castra_dir / "centuriones" / "vorenus" / "prompt.md"
    vorenus.write_text(vorenus.read_text() + "\nOne more rule.\n")
    assert castra.roster().hash == before
    add_centurio(castra_dir, "brutus", "# Brutus\n")
    added = castra.roster().hash
    assert added != before
    add_centurio(castra_dir, "brutus", "# Brutus the planner\n")
    assert castra.roster().hash != added


def test_legatus_mtime_follows_edits(castra_dir: Path) -> None:
    castra = Castra(castra_dir)
    before = castra.legatus_mtime_ns()
    os.utime(castra.legatus_prompt_path, ns=(before + 10**9, before + 10**9))
    assert castra.legatus_mtime_ns() == before + 10**9


def test_name_rule() -> None:
    assert validate_centurio_name("vorenus") is None
    assert validate_centurio_name("a_b-9") is None
    assert validate_centurio_name("pul") is None
    assert validate_centurio_name("") is not None
    assert validate_centurio_name("-x") is not None


def test_an_unchanged_prompt_is_not_read_again_and_an_edit_is_seen(
    castra_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prompts are asked for on every message: a settled file costs one stat; an edit,
    even of the same size, is read at the next message."""
    import legio.castra as castra_module

    path = add_centurio(castra_dir, "brutus", "---\ndescription: AAAA\n---\nBody one.\n")
    castra = Castra(castra_dir)
    first = castra.read_centurio("brutus")
    assert castra.read_centurio("brutus") is not first  # just written: read again
    real = castra_module.clock
    monkeypatch.setattr(castra_module, "clock", lambda: real() + 10 * 10**9)  # settled
    settled = castra.read_centurio("brutus")
    assert castra.read_centurio("brutus") is settled
    time.sleep(0.05)  # a later tick of the file system's clock
    path.write_text("---\ndescription: BBBB\n---\nBody two.\n")
    edited = castra.read_centurio("brutus")
    assert (edited.description, edited.body.strip()) == ("BBBB", "Body two.")
    path.unlink()
    with pytest.raises(CastraError, match="prompt file not found"):
        castra.read_centurio("brutus")

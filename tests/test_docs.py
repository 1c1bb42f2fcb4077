"""The documentation: README.md (at most 200 lines) and the MkDocs site (mkdocs.yml, docs/).

- The site builds with `mkdocs build --strict`, so no page, link or anchor is broken. MkDocs and
  its Material theme come with the `test` extra: missing, that test skips locally and fails
  under CI=true.
- Every `lockguard ...` command written in README.md and docs/*.md (code blocks and inline code)
  is parsed by the real argument parser (`bot.cli.build_parser`), so a renamed command or flag
  fails here, not in a reader's terminal.
- Every setting name they mention (`LOCKGUARD_*`, `REDIS_*`, `SLACK_*`, `PORT`) is a real setting
  (an alias of `bot.config.Settings` or of its bases, a secret's `_FILE` variant, or another name
  `bot.config` accepts), or one of the few names below that are mentioned on purpose.
- README.md's links into docs/ name a page that exists and a heading it has.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from bot import config
from bot.cli import build_parser
from tests.conftest import missing

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 200

#: Names shaped like settings that the docs mention on purpose, and why.
NOT_SETTINGS = {
    # docs/settings.md: the typo whose warning suggests LOCKGUARD_STALE_THRESHOLD_SECONDS
    "LOCKGUARD_STALE_TRESHOLD_SECONDS",
    # docs/settings.md: an unknown name answered with the setting it means (REDIS_URL)
    "LOCKGUARD_REDIS_URL",
}

#: Placeholders in documented commands, and a value each could really take.
PLACEHOLDERS = {
    "CASE": "LG-261129-350434",
    "LG-...": "LG-261129-350434",
    "LG-…": "LG-261129-350434",
    "NAME": "ann",
    "YOUR-NAME": "ann",
    "TEXT": "not abandoned",
    "N": "1",
    "SECONDS": "1",
    "TARGET": "orders",
}
#: A command written with one of these where its subcommand goes is a pattern, not a command
#: (`lockguard COMMAND --help`, `./dev.sh lockguard ...`).
NOT_A_SUBCOMMAND = {"...", "…", "ARGS", "COMMAND"}
#: Inline code that starts with `lockguard ` but quotes what lockguard says, not a command.
NOT_COMMANDS = {"lockguard cannot tell for <layout> locks"}

FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SETTING = re.compile(r"(?<![A-Za-z0-9_])(?:LOCKGUARD|REDIS|SLACK)_[A-Z0-9_]*\*?|(?<![\w-])PORT\b")
DOCS_LINK = re.compile(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)")


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def name(page: Path) -> str:
    return str(page.relative_to(ROOT))


# -- the site ---------------------------------------------------------------------------------


def test_the_site_builds_with_mkdocs_strict(tmp_path: Path) -> None:
    absent = [m for m in ("mkdocs", "material") if importlib.util.find_spec(m) is None]
    if absent:
        why = f"{' and '.join(absent)} not installed (the `test` extra: pip install -e '.[test]')"
        missing(why)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "operations" / "index.html").is_file()  # the runbooks' address


def test_the_readme_is_at_most_200_lines() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move the detail to docs/"


def slug(heading: str) -> str:
    """The anchor MkDocs gives a heading (Python-Markdown's toc `slugify`), from its text."""
    from markdown.extensions.toc import slugify

    return str(slugify(heading.replace("`", ""), "-"))


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", text, re.M)}


def test_the_readme_links_into_docs_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    links = DOCS_LINK.findall(text)
    assert links, "README.md links to no page of docs/"
    broken = []
    for path, anchor in links:
        target = ROOT / path
        if not target.is_file():
            broken.append(f"{path}: no such page")
        elif anchor and anchor not in anchors(target):
            broken.append(f"{path}#{anchor}: no such heading")
    assert not broken, "README.md: " + "; ".join(broken)


# -- the commands -----------------------------------------------------------------------------


def commands(page: Path) -> Iterator[tuple[str, bool]]:
    """Each `lockguard ...` command written on the page, and whether it stands alone (a line of
    a code block: it must parse as it is) rather than inline in prose, where a command may be
    named without its required arguments (`lockguard approve --resume`)."""
    text = page.read_text(encoding="utf-8")
    for block in FENCE.finditer(text):
        for line in block.group(2).replace("\\\n", " ").splitlines():
            yield line, True
    for span in INLINE.finditer(FENCE.sub("", text)):
        yield " ".join(span.group(1).split()), False


def lockguard_words(line: str, *, comments: bool) -> list[str] | None:
    """The arguments after `lockguard` when `line` runs lockguard (after any `VAR=value`, with
    `./dev.sh ` or `.venv/bin/` before it), placeholders given values; else None."""
    try:
        words = shlex.split(line, comments=comments)
    except ValueError:
        return None
    while words and ENV_ASSIGNMENT.match(words[0]):
        words = words[1:]
    if words[:2] == ["./dev.sh", "demo"]:  # dev.sh runs `lockguard demo "$@"`
        words = ["lockguard", *words[1:]]
    if words[:1] == ["./dev.sh"]:
        words = words[1:]
    if not words or words[0] not in ("lockguard", ".venv/bin/lockguard"):
        return None
    args = [w.removeprefix("[").removesuffix("]") for w in words[1:]]  # [--json] is written out
    if not args or args[0] in NOT_A_SUBCOMMAND:
        return None
    return [PLACEHOLDERS.get(a, "orders" if re.fullmatch(r"<[^>]+>", a) else a) for a in args]


def parse_error(parser: argparse.ArgumentParser, args: list[str]) -> str | None:
    """argparse's complaint about `args`, or None when they parse."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(args)
        except SystemExit as exc:
            return err.getvalue().strip().splitlines()[-1] if exc.code else None
    return None


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("lockguard has no subcommands")


def unknown_options(sub: argparse.ArgumentParser, args: list[str]) -> list[str]:
    known = {s for action in sub._actions for s in action.option_strings}
    return [a for a in args if a.startswith("-") and a.split("=", 1)[0] not in known]


def test_every_documented_lockguard_command_parses() -> None:
    parser = build_parser()
    subs = subcommands(parser)
    for p in (parser, *subs.values()):  # an option is written out in full, never abbreviated
        p.allow_abbrev = False
    seen, bad = 0, []
    for page in pages():
        for line, alone in commands(page):
            args = lockguard_words(line, comments=alone)
            if args is None or line.strip() in NOT_COMMANDS:
                continue
            seen += 1
            error = parse_error(parser, args)
            if error is None:
                continue
            if not alone and "the following arguments are required" in error:
                # named in prose without its required arguments: the command and every option
                # it names must still exist
                sub = subs.get(args[0])
                if sub is not None and not unknown_options(sub, args[1:]):
                    continue
            bad.append(f"{name(page)}: `{line.strip()}`: {error}")
    assert seen > 20, f"only {seen} lockguard commands found in README.md and docs/"
    assert not bad, "commands that do not parse:\n" + "\n".join(bad)


def test_every_option_the_commands_page_names_is_an_option_of_lockguard() -> None:
    """docs/commands.md names options on their own too (`--target NAME`, `--yes-count N`)."""
    subs = subcommands(build_parser())
    known = {s for sub in subs.values() for action in sub._actions for s in action.option_strings}
    page = DOCS / "commands.md"
    named = {
        span.group(1).split()[0].removeprefix("[")
        for span in INLINE.finditer(FENCE.sub("", page.read_text(encoding="utf-8")))
        if span.group(1).lstrip("[").startswith("--")
    }
    assert {"--json", "--target", "--yes-count"} <= named, named
    assert named <= known, f"docs/commands.md names options lockguard has not: {named - known}"


# -- the settings -----------------------------------------------------------------------------


def known_settings() -> set[str]:
    """Every variable lockguard reads as a setting: the alias of each field of `Settings` (its
    bases' fields included), each secret's `NAME_FILE`, and the other names it accepts."""
    fields = config.Settings.model_fields
    names = {(field.alias or field_name).upper() for field_name, field in fields.items()}
    names |= set(config.SECRET_FILE_VARIABLES.values())
    names |= set(getattr(config, "ALIASES", {}))
    return names


def test_every_documented_setting_is_a_setting() -> None:
    known = known_settings()
    assert {"REDIS_URL", "PORT", "LOCKGUARD_DRY_RUN", "SLACK_APP_TOKEN"} <= known
    unknown: dict[str, set[str]] = {}
    for page in pages():
        for found in SETTING.findall(page.read_text(encoding="utf-8")):
            if found.endswith("*"):  # `LOCKGUARD_*`, `REDIS_TLS_*`: a family of settings
                if any(k.startswith(found[:-1]) for k in known):
                    continue
            elif found.rstrip("_") in known | NOT_SETTINGS:
                continue
            unknown.setdefault(found, set()).add(name(page))
    assert not unknown, "not a setting (fix the page, or add it to NOT_SETTINGS with why):\n" + (
        "\n".join(f"  {n}: {', '.join(sorted(where))}" for n, where in sorted(unknown.items()))
    )

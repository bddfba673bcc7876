"""The pages of ``docs/agents/`` stay true to the agent table (``tinyacp.cli.agents._resolve.BUILTIN_AGENTS``).

Each built-in agent but the demo has a page with the same headings; its Start section's first code block is the
exact command line tinyacp runs, and the page carries the pinned version, the login hint's commands and variables,
every behaviour note as the command prints it, and the offline install its entry names. The index tables every
entry with its command line, version and page. No command block on any page installs or starts a package of the
table at another version than the pinned one (a stale ``npm install -g @google/gemini-cli`` is caught; a
``gemini --acp`` in a config example is not, since it is not the way tinyacp starts gemini).
"""

from __future__ import annotations

import re
import shlex

import pytest

from helpers import TESTS
from tinyacp.cli.agents._resolve import BUILTIN_AGENTS, DEMO, AgentSpec
from tinyacp.cli.agents._table import launcher_of

PAGES = TESTS.parent / "docs" / "agents"
AGENTS = {name: spec for name, spec in BUILTIN_AGENTS.items() if name != DEMO}
HEADINGS = [
    "Start",
    "Install so it starts offline",
    "Log in",
    "What it offers",
    "What it does without asking",
    "In the sandbox",
]

FENCE = re.compile(r"^ *```(\w*)\n(.*?)^ *```$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`([^`]+)`")
ENV_NAME = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
INSTALL = re.compile(r"(?:npm install -g|uv tool install) [^\s,]+")
CONFIG_LINE = re.compile(r"(?:command|env) = (?:\[[^\]]*\]|\{[^}]*\})")
URL = re.compile(r"https?://[^\s)]+")


def _page(name: str) -> str:
    return (PAGES / f"{name}.md").read_text(encoding="utf-8")


def _flat(text: str) -> str:
    """The text with its line breaks and indents as single spaces: a sentence reads the same however it wraps."""
    return " ".join(text.split())


def _sections(text: str) -> dict[str, str]:
    """The page's ``##`` sections by heading, in order."""
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _fences(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of ``text``: (language, body without its indent)."""
    return [(lang, "\n".join(line.strip() for line in body.splitlines())) for lang, body in FENCE.findall(text)]


def _pinned(spec: AgentSpec) -> tuple[str, str]:
    """The package an npx/uvx entry pins, as (name, version): ``("@scope/pkg", "1.2.3")``."""
    name, _, version = spec.package.rpartition("@")
    return name, version


PINS = dict(_pinned(spec) for spec in AGENTS.values() if spec.package)


def installed_or_started(line: str) -> str:
    """The package a command line installs (``npm install -g``, ``uv tool install``) or starts (``npx``, ``uvx``),
    as written (``pkg@1.0``, ``pkg==1.0``, ``pkg``); "" for any other line."""
    words = shlex.split(line)
    if words[:1] in (["npx"], ["uvx"]):
        return launcher_of(tuple(words))[1]
    if words[:3] in (["npm", "install", "-g"], ["uv", "tool", "install"]):
        rest = iter(words[3:])
        for word in rest:
            if word in ("--python", "-p", "--with"):
                next(rest, None)
            elif not word.startswith("-"):
                return word
    return ""


def stale_packages(text: str) -> list[str]:
    """The packages of the table that a ``sh`` block of ``text`` installs or starts at another version than the
    pinned one, or at none."""
    stale = []
    for lang, body in _fences(text):
        for word in (installed_or_started(line) for line in body.splitlines() if lang == "sh"):
            if "==" in word:  # uv tool install NAME==VERSION
                name, _, version = word.partition("==")
            else:  # NAME@VERSION, where NAME may be @scope/name
                head, _, version = word[1:].partition("@")
                name = word[:1] + head
            if name in PINS and version != PINS[name]:
                stale.append(word)
    return stale


def login_parts(login: str) -> list[str]:
    """What a login hint asks a person to type or set: its commands (in backticks) and variables."""
    return [*CODE_SPAN.findall(login), *ENV_NAME.findall(CODE_SPAN.sub("", login))]


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_each_agent_page_has_the_same_headings_and_starts_with_the_exact_command_line(name: str) -> None:
    text = _page(name)
    sections = _sections(text)
    assert list(sections) == HEADINGS
    assert _fences(sections["Start"])[0] == ("sh", AGENTS[name].display_command())


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_each_agent_page_names_the_directories_its_entry_makes_writable_in_the_sandbox(name: str) -> None:
    section = _flat(_sections(_page(name))["In the sandbox"])
    for word in AGENTS[name].sandbox.writable or []:
        assert f"`{word}`" in section, word
    if not AGENTS[name].sandbox.writable:
        assert "names no state directory" in section


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_each_agent_page_says_its_version_login_names_and_every_note_as_printed(name: str) -> None:
    spec = AGENTS[name]
    flat = _flat(_page(name))
    if spec.version:
        assert spec.version in flat
    assert login_parts(spec.login) and all(part in flat for part in login_parts(spec.login)), spec.login
    assert all(variable in flat for variable in spec.key_env)
    if spec.key_method:
        assert f"`{spec.key_method}`" in flat
    assert all(f"{key}={value}" in flat for key, value in spec.env.items())
    if spec.registry_id:
        assert f"`{spec.registry_id}`" in flat
    for note in spec.notes:
        assert _flat(note) in flat, note
    if not spec.notes:
        assert "tinyacp prints no note for it" in flat


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_each_agent_page_installs_it_so_that_it_starts_offline_as_its_entry_says(name: str) -> None:
    spec = AGENTS[name]
    section = _sections(_page(name))["Install so it starts offline"]
    blocks = _fences(section)
    commands = [line for lang, body in blocks if lang == "sh" for line in body.splitlines()]
    config = "\n".join(body for lang, body in blocks if lang == "toml")
    for install in INSTALL.findall(spec.offline):
        assert install in commands
    for line in CONFIG_LINE.findall(spec.offline):
        assert line in config
    if spec.launcher in ("npx", "uvx"):
        assert f"[agents.{name}]" in config
    if spec.launcher == "uvx":
        assert "UV_OFFLINE=1" in section and "UV_PYTHON" in section
    if spec.launcher == "path":
        assert all(url in _page(name) for url in URL.findall(spec.install))


def test_the_index_tables_every_entry_with_its_exact_command_line_version_and_page() -> None:
    text = (PAGES / "index.md").read_text(encoding="utf-8")
    header = "| name | how it starts | pinned version | page |"
    assert header in text
    lines = text[text.index(header) :].splitlines()[2:]
    rows = {}
    for line in lines:
        if not line.startswith("|"):
            break
        name, command, version, page = (cell.strip() for cell in line.strip("|").split("|"))
        rows[name.strip("`")] = (command, version, page)
    assert list(rows) == list(BUILTIN_AGENTS)
    for name, (command, version, page) in rows.items():
        spec = BUILTIN_AGENTS[name]
        assert command == f"`{spec.display_command()}`", name
        if spec.launcher in ("npx", "uvx"):
            assert version == spec.version, name
        else:
            assert version.startswith("—") and spec.version in version, name
        if name != DEMO:
            assert page.endswith(f"]({name}.md)"), name


def test_no_agent_page_names_a_package_of_the_table_at_another_version() -> None:
    pages = sorted(PAGES.glob("*.md"))
    assert {page.stem for page in pages} == {*AGENTS, "index"}
    assert {page.name: stale_packages(page.read_text(encoding="utf-8")) for page in pages} == {
        page.name: [] for page in pages
    }
    for page in pages:
        assert not re.search(r"(?<![\w.~])/(?:tmp|work|root|home)/", page.read_text(encoding="utf-8")), page.name


def test_the_stale_package_check_catches_an_unpinned_install_and_an_old_pin() -> None:
    (gemini, version) = _pinned(AGENTS["gemini"])
    page = (
        f"```sh\nnpm install -g {gemini}\nnpx -y {gemini}@0.1.0 --acp\nnpx -y {gemini}@{version} --acp\n```\n"
        f'```toml\ncommand = ["npx", "-y", "{gemini}@0.1.0"]\n```\n'
        "```sh\nuv tool install --python 3.13 kimi-cli==1.52.0\nuvx --python 3.12 --from mistral-vibe@0.0.1 vibe-acp\n"
        "npx -y some-other@1\ngemini --acp\n```\n"
    )
    assert stale_packages(page) == [gemini, f"{gemini}@0.1.0", "kimi-cli==1.52.0", "mistral-vibe@0.0.1"]


def test_login_parts_are_the_commands_and_variables_a_hint_names() -> None:
    hint = "run `claude /login` (Claude Code) once, or set ANTHROPIC_API_KEY"
    assert login_parts(hint) == ["claude /login", "ANTHROPIC_API_KEY"]
    assert login_parts("set your key (for example OPENAI_API_KEY)") == ["OPENAI_API_KEY"]

"""The agents known by name: the table in the ACP registry's shape, how each entry starts, the config file's
entries in the same shape, and the behaviour notes said when a permission rule is given."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import warnings
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from helpers.cli import Cli
from tinyacp import PermissionPolicy
from tinyacp.cli.agents._load import load_config
from tinyacp.cli.agents._resolve import ALIASES, BUILTIN_AGENTS, Config, ConfigError, resolve_agent
from tinyacp.cli.agents._table import TABLE_PATH, launcher_of, platform_target
from tinyacp.cli.shared._features import agent_policy

SCHEMAS = Path(__file__).parent / "registry"
DOCS = Path(__file__).parent.parent / "docs"


def _schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((SCHEMAS / name).read_text())
    return schema


def _table() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(TABLE_PATH.read_text())
    return table


def test_the_table_validates_against_the_acp_registrys_schemas() -> None:
    agent_schema = _schema("agent.schema.json")
    index_schema = _schema("registry.schema.json")
    registry = Registry().with_resource(agent_schema["$id"], Resource.from_contents(agent_schema))
    table = _table()
    jsonschema.Draft7Validator(index_schema, registry=registry).validate(table["registry"])
    for entry in table["registry"]["agents"]:
        jsonschema.Draft7Validator(agent_schema).validate(entry)
    # A broken entry is caught: the schema is not a formality.
    broken = dict(table["registry"]["agents"][0], distribution={"pip": {"package": "x"}})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(agent_schema).validate(broken)


def test_every_package_entry_pins_an_exact_version_and_says_where_it_was_checked() -> None:
    for entry in _table()["registry"]["agents"]:
        spec = BUILTIN_AGENTS[entry["id"]]
        extra = entry["tinyacp"]
        if spec.launcher in ("npx", "uvx"):
            assert spec.package.endswith("@" + entry["version"]), entry["id"]
            assert extra["checked"] == {"npx": "npm", "uvx": "pypi"}[spec.launcher], entry["id"]
        else:
            assert extra["checked"] == "registry", entry["id"]
        assert spec.install and spec.login and spec.needs and spec.offline, entry["id"]


def test_the_names_the_issue_asks_for_are_known_and_the_registry_ids_are_other_names() -> None:
    wanted = {"claude", "codex", "gemini", "opencode", "qwen", "kimi", "fast-agent", "goose", "copilot", "cursor"}
    wanted |= {"kiro", "auggie", "mistral-vibe", "factory-droid", "qoder"}
    assert wanted <= set(BUILTIN_AGENTS)
    for alias, name in {"claude-code-acp": "claude", "qwen-code": "qwen", "droid": "factory-droid"}.items():
        assert ALIASES[alias] == name
    # kimi is pinned to its last working release: 1.52.0 prints "no longer maintained" and exits.
    assert BUILTIN_AGENTS["kimi"].command == ("uvx", "kimi-cli@1.51.0", "acp")
    assert BUILTIN_AGENTS["fast-agent"].command == ("uvx", "--from", "fast-agent-mcp@0.10.48", "fast-agent-acp")
    assert BUILTIN_AGENTS["mistral-vibe"].command == ("uvx", "--from", "mistral-vibe@3.0.2", "vibe-acp")
    assert BUILTIN_AGENTS["auggie"].env == {"AUGMENT_DISABLE_AUTO_UPDATE": "1"}


def test_an_alias_resolves_to_its_agent() -> None:
    known = Config(dict(BUILTIN_AGENTS))
    assert resolve_agent("qwen-code", known).command == BUILTIN_AGENTS["qwen"].command
    assert resolve_agent("droid --verbose", known).command == (*BUILTIN_AGENTS["factory-droid"].command, "--verbose")


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_a_config_entry_in_the_registrys_shape_starts_as_the_registry_says(tmp_path: Path) -> None:
    here = platform_target()
    path = _config(
        tmp_path,
        f"""
[agents.viaNpx]
version = "1.2.3"
distribution = {{ npx = {{ package = "@acme/agent@1.2.3", args = ["--acp"], env = {{ ACME_NO_UPDATE = "1" }} }} }}
notes = ["edits files without asking in mode auto"]

[agents.viaUvx]
distribution = {{ uvx = {{ package = "acme-agent@2.0.0", args = ["acp"] }} }}
executable = "acme-acp"

[agents.viaBinary]
id = "viaBinary"
name = "Acme"
authors = ["Acme"]
license = "MIT"
[agents.viaBinary.distribution.binary.{here}]
archive = "https://example.com/acme.tar.gz"
cmd = "./bin/acme"
args = ["acp"]
""",
    )
    agents = load_config(path).agents
    npx = agents["viaNpx"]
    assert npx.command == ("npx", "--prefer-offline", "-y", "@acme/agent@1.2.3", "--acp")
    assert (npx.launcher, npx.package, npx.version) == ("npx", "@acme/agent@1.2.3", "1.2.3")
    assert npx.env == {"ACME_NO_UPDATE": "1"} and npx.notes == ("edits files without asking in mode auto",)
    uvx = agents["viaUvx"]
    assert uvx.command == ("uvx", "--from", "acme-agent@2.0.0", "acme-acp", "acp") and uvx.launcher == "uvx"
    binary = agents["viaBinary"]
    assert binary.command == ("acme", "acp") and binary.launcher == "path"
    assert "https://example.com/acme.tar.gz" in binary.install


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[agents.x]\ncommand = "demo"\ndistribution = { npx = { package = "a@1.0.0" } }\n', "not both"),
        ('[agents.x]\nid = "y"\ncommand = "demo"\n', "agents.x.id: 'y' is not the table's name"),
        ("[agents.x]\ndistribution = {}\n", "agents.x.distribution: needs a command, or a distribution"),
        (
            '[agents.x]\ndistribution = { binary = { "plan9-mips" = { archive = "https://e.com/a", cmd = "a" } } }\n',
            "no archive for",
        ),
        ('[agents.x]\ndistribution = { pip = { package = "a" } }\n', "agents.x.distribution"),
        ('[agents.x]\ndistribution = { npx = { args = ["--acp"] } }\n', "package"),
    ],
)
def test_a_config_entry_that_cannot_start_says_why(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_config(tmp_path, text))
    assert expected in str(caught.value)


def test_a_command_line_of_ones_own_through_npx_or_uvx_is_known_as_a_download(tmp_path: Path) -> None:
    path = _config(tmp_path, '[agents.mine]\ncommand = ["npx", "-y", "acme@1.0.0", "--acp"]\n')
    mine = load_config(path).agents["mine"]
    assert (mine.launcher, mine.package) == ("npx", "acme@1.0.0")
    own = resolve_agent(None, Config(dict(BUILTIN_AGENTS)), command="uvx --python 3.12 --from acme@2.0 acme-acp")
    assert (own.launcher, own.package) == ("uvx", "acme@2.0")
    for line, expected in (
        ("uvx --from=acme@2.0 acme-acp", ("uvx", "acme@2.0")),
        ("uvx -p 3.12 acme@2.0", ("uvx", "acme@2.0")),
        ("npx -p acme@1.0 acme-acp --acp", ("npx", "acme@1.0")),
        ("npx --package=acme@1.0 acme-acp", ("npx", "acme@1.0")),
        ("npx --registry https://r.example acme@1.0", ("npx", "acme@1.0")),
        ("pnpm dlx acme@1.0 --acp", ("npx", "acme@1.0")),
        ("bunx acme@1.0", ("npx", "acme@1.0")),
    ):
        assert launcher_of(tuple(shlex.split(line))) == expected, line
    plain = resolve_agent(None, Config(dict(BUILTIN_AGENTS)), command="./my-agent --acp")
    assert (plain.launcher, plain.package) == ("path", "")


def test_a_config_entry_that_renames_the_program_keeps_the_agents_notes_but_not_its_pin(tmp_path: Path) -> None:
    agents = load_config(_config(tmp_path, '[agents.fast-agent]\ncommand = ["fast-agent-acp"]\n')).agents
    spec = agents["fast-agent"]
    assert spec.command == ("fast-agent-acp",) and spec.launcher == "path" and spec.version == ""
    assert spec.notes == BUILTIN_AGENTS["fast-agent"].notes
    assert spec.install == BUILTIN_AGENTS["fast-agent"].offline  # uv tool install …, not "uvx fetches it"


def _flags(**given: Any) -> argparse.Namespace:
    """The permission flags of ``prompt``, none given but ``given``."""
    flags: dict[str, Any] = {"allow_kind": [], "allow_title": [], "allow_tool": [], "deny_tool": [], "yes": False}
    return argparse.Namespace(**{**flags, **given})


def test_behaviour_notes_are_said_only_when_a_permission_rule_is_given() -> None:
    fast = BUILTIN_AGENTS["fast-agent"]
    policy, notes = agent_policy(_flags(), fast.name, fast.allow_tools, fast.deny_tools, fast.notes)
    assert policy == PermissionPolicy() and notes == []
    for given, expected in (
        ({"allow_kind": ["read"]}, PermissionPolicy(kinds={"read"})),
        ({"allow_tool": ["Read"]}, PermissionPolicy(tools={"Read"})),
        ({"deny_tool": ["Bash"]}, PermissionPolicy(deny_tools={"Bash"})),
        ({"yes": True}, PermissionPolicy(allow_all=True)),
    ):
        policy, notes = agent_policy(_flags(**given), fast.name, fast.allow_tools, fast.deny_tools, fast.notes)
        assert policy == expected
        assert any("without asking for permission" in line for line in notes), policy


def _noted_config(cli: Cli) -> None:
    directory = cli.tmp / "config" / "tinyacp"
    directory.mkdir(parents=True, exist_ok=True)
    demo = shlex.join([sys.executable, "-m", "tinyacp.demo"])
    (directory / "config.toml").write_text(
        f"[agents.noted]\ncommand = {json.dumps(demo)}\n"
        'notes = ["runs its shell tool without asking when the client offers no terminal"]\n'
    )


@pytest.mark.smoke
def test_the_command_says_an_agents_notes_when_it_starts_it_with_a_permission_rule(cli: Cli) -> None:
    _noted_config(cli)
    ruled = cli.run("prompt", "--agent", "noted", "--allow-kind", "read", "--no-journal", "hello")
    assert ruled.returncode == 0, ruled.stderr
    note = "tinyacp: note on noted: runs its shell tool without asking when the client offers no terminal"
    assert note in ruled.stderr.decode()
    plain = cli.run("prompt", "--agent", "noted", "--no-journal", "hello")
    assert plain.returncode == 0, plain.stderr
    assert "note on noted" not in plain.stderr.decode()


def test_agents_shows_each_entrys_version_how_it_starts_and_its_notes(cli: Cli) -> None:
    text = cli.run("agents").stdout.decode()
    assert "fast-agent 0.10.48" in text and "runs uvx --from fast-agent-mcp@0.10.48 fast-agent-acp" in text
    assert "note: runs its shell tool itself, without asking for permission" in text
    listing = json.loads(cli.run("agents", "--format", "json").stdout)
    rows = {row["name"]: row for row in listing["agents"]}
    assert rows["qwen"]["notes"] and rows["qwen"]["registry_id"] == "qwen-code"
    assert rows["kimi"]["launcher"] == "uvx" and rows["kimi"]["package"] == "kimi-cli@1.51.0"
    assert rows["goose"]["launcher"] == "path" and rows["goose"]["package"] is None


def test_an_npx_agent_whose_node_is_older_than_it_declares_gets_a_warning_not_a_verdict(cli: Cli) -> None:
    bin_dir = cli.tmp / "old-node"
    bin_dir.mkdir()
    for name, script in (("node", "echo v18.19.0"), ("npx", "exit 0")):
        program = bin_dir / name
        program.write_text(f"#!/bin/sh\n{script}\n")
        program.chmod(0o755)
    env = dict(cli.env, PATH=f"{bin_dir}:/usr/bin:/bin")
    rows = {row["name"]: row for row in json.loads(cli.run("agents", "--format", "json", env=env).stdout)["agents"]}
    claude = rows["claude"]
    assert claude["state"] == "declares Node.js ≥ 22 (found 18)" and claude["ready"] is True
    assert claude["warning"] == (
        "declares Node.js ≥ 22 (found 18): `tinyacp agents --check claude` tells whether it starts on Node.js 18"
    )
    assert rows["codex"]["state"] == "ready" and rows["codex"]["warning"] is None
    text = cli.run("agents", env=env).stdout.decode()
    assert "declares Node.js ≥ 22 (found 18)" in text and "needs Node.js 22+" not in text
    assert "    warning: declares Node.js ≥ 22 (found 18): `tinyacp agents --check claude` tells" in text


def test_a_batch_with_a_permission_rule_warns_once_per_agent_of_its_notes(tmp_path: Path) -> None:
    from dataclasses import dataclass, field

    from tinyacp.batch import AgentNoteWarning, run_batch

    @dataclass
    class Entry:
        command: tuple[str, ...] = (sys.executable, "-m", "tinyacp.demo")
        env: dict[str, str] = field(default_factory=dict)
        notes: tuple[str, ...] = ("runs its shell tool without asking",)

    items = [{"id": n, "prompt": "hi", "agent": "noted"} for n in range(3)] + [{"id": 9, "prompt": "hi"}]
    for policy, expected in ((PermissionPolicy(kinds={"read"}), 1), (PermissionPolicy(), 0)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            summary = run_batch(
                items, tmp_path / f"out{expected}", agent="demo", agents={"noted": Entry()}, policy=policy
            )
        assert summary.all_ok
        said = [str(w.message) for w in caught if issubclass(w.category, AgentNoteWarning)]
        assert said == ["note on noted: runs its shell tool without asking"] * expected, said


@pytest.mark.smoke
def test_the_batch_command_says_an_agents_notes_once_when_it_has_a_permission_rule(cli: Cli) -> None:
    _noted_config(cli)
    items = cli.tmp / "items.jsonl"
    items.write_text("".join(json.dumps({"id": n, "prompt": "hi", "agent": "noted"}) + "\n" for n in range(2)))
    done = cli.run("batch", str(items), "--out", str(cli.tmp / "out"), "--allow-kind", "read")
    assert done.returncode == 0, done.stderr
    err = done.stderr.decode()
    assert err.count("tinyacp: note on noted: runs its shell tool without asking") == 1, err


def test_the_config_file_example_of_the_docs_is_read_as_it_says(tmp_path: Path) -> None:
    text = (DOCS / "cli.md").read_text()
    example = text.split("### The config file", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    config = load_config(_config(tmp_path, example))
    assert config.agents["qwen-offline"].command == (
        "npx",
        "--prefer-offline",
        "-y",
        "@qwen-code/qwen-code@0.24.4",
        "--acp",
    )
    assert config.agents["qwen-offline"].notes and config.agents["qwen-offline"].launcher == "npx"
    assert config.agents["vibe"].command == ("uvx", "--from", "mistral-vibe@3.0.2", "vibe-acp")
    assert config.agents["slow-demo"].command[-2:] == ("--delay", "0.1")


def test_a_reported_version_with_a_builds_detail_is_the_pinned_one() -> None:
    from tinyacp.cli.agents._check import _same_version

    assert _same_version("0.36.0", "0.36.0 (commit 7c61e5bb)")  # auggie 0.36.0's own words
    assert _same_version("1.2.3", "v1.2.3")
    assert not _same_version("0.36.0", "0.36.1 (commit 7c61e5bb)")
    assert not _same_version("1.0.0", "")


def test_the_version_check_tool_flags_a_pin_its_registry_does_not_have(capsys: pytest.CaptureFixture[str]) -> None:
    from urllib.parse import unquote

    from tools.agent_versions import NPM, main, split_package

    pins = {split_package(spec.package)[0]: spec.version for spec in BUILTIN_AGENTS.values() if spec.package}

    def fetch(url: str) -> dict[str, Any]:
        if url.startswith(NPM):
            name = unquote(url.removeprefix(NPM))
            if name == "@qwen-code/qwen-code":  # the pin is gone from npm
                return {"dist-tags": {"latest": "0.30.0"}, "versions": {"0.30.0": {}}}
            return {"dist-tags": {"latest": pins[name]}, "versions": {pins[name]: {}}}
        name = unquote(url.split("/pypi/")[1].removesuffix("/json"))
        yanked = name == "kimi-cli"  # there, but yanked
        return {"info": {"version": "9.9.9"}, "releases": {pins[name]: [{"yanked": yanked}]}}

    assert main([], fetch=fetch) == 1
    lines = capsys.readouterr().out.splitlines()
    assert {line.split()[0] for line in lines if "CANNOT INSTALL" in line} == {"qwen", "kimi"}, lines
    assert any(line.startswith("claude ") and line.endswith(": ok") for line in lines)
    assert any(line.startswith("fast-agent ") and line.endswith("newest 9.9.9") for line in lines)


def test_a_built_in_agent_that_fails_as_it_starts_is_shown_with_what_it_needs(cli: Cli) -> None:
    bin_dir = cli.tmp / "fake-uv"
    bin_dir.mkdir()
    uvx = bin_dir / "uvx"  # fast-agent 0.10.48's own words when no model is set, and its exit status
    uvx.write_text("#!/bin/sh\necho 'Model Configuration Error:' >&2\necho 'No model configured' >&2\nexit 1\n")
    uvx.chmod(0o755)
    env = dict(cli.env, PATH=f"{bin_dir}:/usr/bin:/bin")
    done = cli.run("prompt", "--agent", "fast-agent", "--no-journal", "hi", env=env)
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert "fast-agent needs uv and a Python 3.12 or newer" in err and "FAST_AGENT_MODEL" in err
    assert "No model configured" in err


def test_an_npx_or_uvx_agent_without_its_runner_says_which_runner_and_package(cli: Cli) -> None:
    empty = cli.tmp / "no-runners"
    empty.mkdir()
    done = cli.run("prompt", "--agent", "kimi", "--no-journal", "hi", env=dict(cli.env, PATH=str(empty)))
    err = done.stderr.decode()
    assert done.returncode == 7, err
    assert "kimi cannot start: 'uvx' was not found on PATH (it runs kimi-cli@1.51.0)" in err
    assert "to install kimi: install uv (https://docs.astral.sh/uv/)" in err


@pytest.mark.parametrize(
    ("package", "offline"),
    [
        ("@qwen-code/qwen-code@0.24.4", True),
        ("droid@0.215.0", True),
        ("pkg@1.2.3-beta.1", True),
        ("pkg@latest", False),
        ("pkg@^1.2.3", False),
        ("@scope/pkg", False),
        ("pkg", False),
    ],
)
def test_only_an_exact_npx_pin_is_started_from_the_cache_without_asking_the_registry(
    package: str, offline: bool
) -> None:
    from tinyacp.cli.agents._table import Distribution, PackageDistribution, start

    begun = start(Distribution(npx=PackageDistribution(package=package)))
    assert begun.command[:2] == (("npx", "--prefer-offline") if offline else ("npx", "-y"))

"""What people install, tested: the sdist and the wheel built as a release builds them, then used as a user would.

``python tools/check_dist.py [--out DIR]`` (CI runs it from ``.ci/run``):

1. builds the sdist and the wheel from the repository (``python -m build``), and a second wheel from the sdist
   alone (unpacked in a directory of its own), and checks that the two wheels hold the same files, byte for byte;
2. checks both archives' metadata (``twine check --strict``);
3. checks that every file of the package in git (the modules and the package data: the page assets of
   ``tinyacp view``, the agent table ``agents.json`` wherever it sits, ``py.typed``) is in the wheel and in the sdist;
4. installs the wheel, not the repository, into a fresh virtual environment, and runs there, in an empty folder
   with a home of its own: the README's main command (a prompt to the demo agent), ``tinyacp view`` of that run,
   ``tinyacp agents``, and the README's "library in ten lines" program, each read from the README as written.

It exits 1 and says what is wrong when any step fails. The builds use ``uv`` for their environments when it is on
the PATH or named by ``$UV`` (as ``build --installer uv`` finds it), ``pip`` otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "tinyacp"

PACKAGE_DATA = ("tinyacp/py.typed", "_view_assets/view.css", "_view_assets/view.js", "agents.json")
"""Files of the package that are not modules and that it reads at run time: each pattern must match a file of the
package in git, and every such file must be in both archives. A pattern matches a path from its right end
(:meth:`pathlib.PurePath.match`), so ``agents.json`` is found wherever it sits in the package and moving it into
a sub-package needs no edit here."""

COMMAND_TIMEOUT = 120.0
"""Seconds for each command run against the installed wheel: the demo agent answers in well under one."""


class DistError(Exception):
    """A check failed: the message says which and what was found."""


# ----------------------------------------------------------------------------------------------------------------
# What the archives hold (pure: tested in tests/test_check_dist.py).


def wheel_files(wheel: Path) -> dict[str, str]:
    """Each file of a wheel, by its name in the archive, with the SHA-256 of its bytes."""
    with zipfile.ZipFile(wheel) as archive:
        return {
            info.filename: hashlib.sha256(archive.read(info)).hexdigest()
            for info in archive.infolist()
            if not info.is_dir()
        }


def sdist_files(sdist: Path) -> set[str]:
    """The files of an sdist, by their path under its top directory (``src/tinyacp/py.typed``)."""
    with tarfile.open(sdist) as archive:
        return {
            member.name.split("/", 1)[1] for member in archive.getmembers() if member.isfile() and "/" in member.name
        }


def wheel_differences(built: Mapping[str, str], from_sdist: Mapping[str, str]) -> list[str]:
    """How the wheel built from the sdist differs from the one built from the repository, one line per file."""
    lines = [f"only in the wheel from the repository: {name}" for name in sorted(built.keys() - from_sdist.keys())]
    lines += [f"only in the wheel from the sdist: {name}" for name in sorted(from_sdist.keys() - built.keys())]
    lines += [
        f"differs between the two wheels: {name}"
        for name in sorted(built.keys() & from_sdist.keys())
        if built[name] != from_sdist[name]
    ]
    return lines


def missing_files(package_files: Iterable[str], wheel: Iterable[str], sdist: Iterable[str]) -> list[str]:
    """What the archives lack of the package's files (paths under ``src/``, as git lists them), and which
    :data:`PACKAGE_DATA` pattern matches no file of the package at all."""
    files = sorted(package_files)
    in_wheel, in_sdist = set(wheel), set(sdist)
    lines = [f"no file of the package matches {pattern!r}" for pattern in PACKAGE_DATA if not _matches(pattern, files)]
    lines += [f"not in the wheel: {name}" for name in files if name not in in_wheel]
    lines += [f"not in the sdist: src/{name}" for name in files if f"src/{name}" not in in_sdist]
    return lines


def _matches(pattern: str, files: Sequence[str]) -> list[str]:
    return [name for name in files if PurePosixPath(name).match(pattern)]


def readme_prompt_command(readme: str) -> list[str]:
    """The README's main command, from ``tinyacp prompt`` on, as an argv: the end of the first command of its
    set-up block, which installs tinyacp and runs a prompt.

    Raises:
        DistError: the README's set-up block holds no ``.venv/bin/tinyacp prompt`` command.
    """
    block = _section_block(readme, "## Set-up", "sh")
    for line in block.splitlines():
        head, found, tail = line.partition(".venv/bin/tinyacp prompt ")
        if found and not head.lstrip().startswith("#"):
            return ["tinyacp", "prompt", *shlex.split(tail)]
    raise DistError("the README's set-up block has no `.venv/bin/tinyacp prompt` command")


def readme_library_program(readme: str) -> str:
    """The README's "library in ten lines" program.

    Raises:
        DistError: the README has no such section, or no python block in it.
    """
    return _section_block(readme, "## The library in ten lines", "python")


def _section_block(readme: str, heading: str, language: str) -> str:
    """The first fenced block of ``language`` in the section whose heading starts with ``heading``."""
    start = readme.find(f"\n{heading}")
    if start < 0:
        raise DistError(f"the README has no section {heading!r}")
    section = readme[start + 1 :].split("\n## ", 1)[0]
    match = re.search(rf"^```{language}\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    if match is None:
        raise DistError(f"the README's section {heading!r} has no {language} block")
    return match.group(1)


# ----------------------------------------------------------------------------------------------------------------
# The steps.


def _run(argv: Sequence[str | Path], *, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> str:
    """Run a program to its end; its stdout, or :class:`DistError` with its output when it fails."""
    try:
        done = subprocess.run(
            [str(arg) for arg in argv],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT * 3,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise DistError(f"{shlex.join(map(str, argv))} did not end within {exc.timeout:.0f} s") from None
    if done.returncode != 0:
        raise DistError(
            f"{shlex.join(map(str, argv))} exited with {done.returncode}\n--- stdout ---\n{done.stdout}"
            f"--- stderr ---\n{done.stderr}"
        )
    return done.stdout


def _uv() -> str | None:
    return shutil.which(os.environ.get("UV") or "uv")


def _build(source: Path, out: Path, *kinds: str) -> None:
    installer = ["--installer", "uv"] if _uv() else []
    _run([sys.executable, "-m", "build", *kinds, *installer, "--outdir", out, source])


def build(out: Path) -> tuple[Path, Path, Path]:
    """The sdist and the wheel from the repository, and a wheel from the sdist alone.

    Raises:
        DistError: a build failed, or did not make exactly one archive of each kind.
    """
    _build(ROOT, out / "dist", "--sdist", "--wheel")
    sdist, wheel = _one(out / "dist", "*.tar.gz"), _one(out / "dist", "*.whl")
    unpacked = out / "sdist"
    with tarfile.open(sdist) as archive:
        archive.extractall(unpacked, filter="data")
    (top,) = unpacked.iterdir()
    _build(top, out / "from-sdist", "--wheel")
    return sdist, wheel, _one(out / "from-sdist", "*.whl")


def _one(directory: Path, pattern: str) -> Path:
    found = sorted(directory.glob(pattern))
    if len(found) != 1:
        raise DistError(f"{directory} holds {len(found)} files matching {pattern}, not one: {found}")
    return found[0]


def package_files() -> list[str]:
    """The package's files (``tinyacp/...``) as git has them, what a clean clone builds from; outside a git checkout
    (an unpacked sdist), every file under ``src/tinyacp`` but bytecode."""
    if (ROOT / ".git").exists():
        listed = _run(["git", "-C", ROOT, "ls-files", "-z", f"src/{PACKAGE}"])
        return sorted(name.removeprefix("src/") for name in listed.split("\0") if name)
    src = ROOT / "src"
    return sorted(
        path.relative_to(src).as_posix()
        for path in (src / PACKAGE).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    )


def check_archives(sdist: Path, wheel: Path, from_sdist: Path) -> None:
    """The two wheels equal, every file of the package in both archives, the metadata accepted by twine.

    Raises:
        DistError: what differs or is missing, or twine's complaint.
    """
    built = wheel_files(wheel)
    problems = wheel_differences(built, wheel_files(from_sdist))
    problems += missing_files(package_files(), built, sdist_files(sdist))
    if problems:
        raise DistError("the archives are not what the package is:\n  " + "\n  ".join(problems))
    _run([sys.executable, "-m", "twine", "check", "--strict", sdist, wheel])


def install(wheel: Path, venv: Path) -> Path:
    """A fresh virtual environment with the wheel installed (and its dependencies); its ``bin`` directory.

    Raises:
        DistError: the environment could not be made or the wheel installed.
    """
    uv = _uv()
    if uv:
        _run([uv, "venv", "--quiet", "--python", sys.executable, venv])
        _run([uv, "pip", "install", "--quiet", "--python", venv / "bin" / "python", wheel])
    else:
        _run([sys.executable, "-m", "venv", venv])
        _run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel])
    return venv / "bin"


def user_environment(bin_dir: Path, home: Path) -> dict[str, str]:
    """The environment of a user who installed the wheel: its ``bin`` first on the PATH, a home of their own
    (journals, config and sessions land there), and nothing that would import the repository instead."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV", "XDG_"))}
    env.update(HOME=str(home), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", NO_COLOR="1")
    return env


def check_installed(bin_dir: Path, work: Path) -> None:
    """Run the README's commands and its library program against the installed wheel, in ``work``.

    Raises:
        DistError: a command failed, or printed other than it should.
    """
    folder = work / "project"
    folder.mkdir()
    (folder / "hello.py").write_text('print("hello")\n', encoding="utf-8")
    env = user_environment(bin_dir, work / "home")
    python = bin_dir / "python"

    where = _run([python, "-c", _WHERE], cwd=folder, env=env).split()
    if len(where) != 2 or not Path(where[0]).is_relative_to(bin_dir.parent) or where[1] != "wheel":
        raise DistError(f"tinyacp is not the installed wheel in {bin_dir.parent}: {where}")

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = readme_prompt_command(readme)
    reply = _run([bin_dir / command[0], *command[1:]], cwd=folder, env=env)
    _expect("hello.py" in reply, f"{shlex.join(command)} printed no listing of the folder", reply)

    page = folder / "tinyacp-view.html"
    _run([bin_dir / "tinyacp", "view"], cwd=folder, env=env)
    _expect(page.is_file(), "tinyacp view wrote no ./tinyacp-view.html", "")
    html = page.read_text(encoding="utf-8")
    for asset in ("view.css", "view.js"):
        text = (ROOT / "src" / PACKAGE / "_view_assets" / asset).read_text(encoding="utf-8")
        _expect(text in html, f"tinyacp view's page lacks {asset}", html[:400])
    _expect("demo-1" in html, "tinyacp view's page does not show the session of the prompt", html[:400])

    agents = _run([bin_dir / "tinyacp", "agents"], cwd=folder, env=env)
    _expect("claude" in agents and "demo" in agents, "tinyacp agents did not list the agent table", agents)

    program = readme_library_program(readme)
    printed = _run([python, "-c", program], cwd=folder, env=env)
    _expect(printed.startswith("end_turn ") and "hello.py" in printed, "the library program's reply", printed)
    _expect((folder / "run.jsonl").is_file(), "the library program wrote no journal run.jsonl", printed)


_WHERE = """
import importlib.metadata, json, tinyacp
distribution = importlib.metadata.distribution("tinyacp")
direct = distribution.read_text("direct_url.json")
editable = direct is not None and json.loads(direct).get("dir_info", {}).get("editable", False)
same = distribution.version == tinyacp.__version__
print(tinyacp.__file__, "editable" if editable else "wheel" if same else "version " + distribution.version)
"""
"""Prints where ``tinyacp`` is imported from, and ``wheel`` when it was installed from one at its own version."""


def _expect(condition: bool, what: str, output: str) -> None:
    if not condition:
        raise DistError(f"{what}\n--- output ---\n{output}")


# ----------------------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/check_dist.py", description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--out", type=Path, help="keep the archives and environments here (default: a temporary directory)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tinyacp-dist-") as scratch:
        out = Path(args.out or scratch).resolve()
        out.mkdir(parents=True, exist_ok=True)
        steps = 0.0
        try:
            start = time.monotonic()
            sdist, wheel, from_sdist = build(out)
            check_archives(sdist, wheel, from_sdist)
            print(f"dist: built and checked {sdist.name} and {wheel.name} ({time.monotonic() - start:.1f} s)")
            steps = time.monotonic()
            bin_dir = install(wheel, out / "venv")
            check_installed(bin_dir, Path(tempfile.mkdtemp(dir=out, prefix="user-")))
        except DistError as exc:
            print(f"dist: {exc}", file=sys.stderr)
            return 1
        print(f"dist: the installed wheel ran the README's commands and program ({time.monotonic() - steps:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``tinyacp view [PATH ...]``: a batch, a journal or a directory of journals as one self-contained HTML page;
several batch directories compared on one page.

With no PATH, the journals of the command's own runs (``tinyacp prompt`` and ``chat``), the latest first. The
page is written whole (to a temporary name, then renamed) and its path printed on stdout; ``--open`` then shows it
in the system's browser. Exit status 0 when the page was written, 2 when the source cannot be read or the page
cannot be written.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..shared._display import one_line, print_error
from ..shared._exit import Exit

__all__ = ["cmd_view"]


def cmd_view(args: argparse.Namespace) -> int:
    """``tinyacp view``."""
    from ... import view
    from ..shared._dirs import journal_dir

    paths: list[Path] = list(args.path) if args.path else [journal_dir()]
    if args.path:  # a journal's name, as `tinyacp journals` prints it
        from ._journals import journal_named

        paths = [path if os.path.lexists(path) else journal_named(os.fspath(path)) or path for path in paths]
    if not args.path and not paths[0].is_dir():
        print_error(f"no journals yet in {paths[0]}: run `tinyacp prompt` first, or name a batch directory or journal")
        return int(Exit.USAGE)
    try:
        written = view.write_html(paths, args.output, max_turn_bytes=args.max_turn_bytes)
    except OSError as exc:
        where = exc.filename if exc.filename is not None else paths[0]
        print_error(f"{one_line(os.fspath(where), 300)}: {one_line(exc.strerror or exc, 300)}")
        return int(Exit.USAGE)
    print(one_line(os.fspath(written), 1000))
    if args.open:
        import webbrowser

        if not webbrowser.open(written.resolve().as_uri()):
            print("tinyacp: no browser could be started here; open the file above in one", file=sys.stderr)
    return int(Exit.OK)

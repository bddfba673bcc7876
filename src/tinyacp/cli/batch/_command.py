"""``tinyacp batch``: its settings (:mod:`tinyacp.cli.batch._settings`), then the run (:mod:`tinyacp.cli.batch._batch`).

Imported when the command runs, never for parsing: ``tinyacp --help`` and a usage error start without the batch
runner.
"""

from __future__ import annotations

import argparse

from ._batch import run_batch_command
from ._settings import batch_settings

__all__ = ["cmd_batch"]


def cmd_batch(args: argparse.Namespace) -> int:
    """``tinyacp batch``."""
    settings = batch_settings(args)
    return run_batch_command(settings)

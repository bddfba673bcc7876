"""``tinyacp batch``: many turns from a JSONL file, run by :mod:`tinyacp.batch`, with the progress line, the
summary table and the failures said on the terminal (``_batch``).

This ``__init__`` imports nothing: the parser never loads this folder; the subcommand does when it runs.
"""

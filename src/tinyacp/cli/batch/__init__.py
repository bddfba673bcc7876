"""``tinyacp batch``: many turns from a JSONL file, run by :mod:`tinyacp.batch`, with the progress line, the
summary table and the failures said on the terminal (``_batch``); its command line (``_args``).

This ``__init__`` imports nothing: the parser reads ``_args`` alone; the subcommand loads ``_batch`` when it runs.
"""

"""``tinyacp batch``: many turns from a JSONL file, run by :mod:`tinyacp.batch`: ``_args`` (its command line),
``_command`` (``cmd_batch``), ``_settings`` (the arguments and the config file, read into ``BatchSettings`` in one
pass), ``_batch`` (the run, with the progress line, the summary table and the failures said on the terminal).

This ``__init__`` imports nothing: the parser reads ``_args`` alone; the subcommand loads ``_batch`` when it runs.
"""

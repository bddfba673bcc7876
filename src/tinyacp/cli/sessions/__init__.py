"""``tinyacp sessions``: the sessions this machine ran, with their journals, and with ``--agent`` the agent's own
list (``session/list``) beside them (``_sessions``); its command line (``_args``).

This ``__init__`` imports nothing: the parser reads ``_args`` alone; the subcommand loads ``_sessions`` when it
runs.
"""

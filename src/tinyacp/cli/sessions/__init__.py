"""``tinyacp sessions``: the sessions this machine ran, with their journals, and with ``--agent`` the agent's own
list (``session/list``) beside them (``_sessions``).

This ``__init__`` imports nothing: the parser never loads this folder; the subcommand does when it runs.
"""

"""The agents: which one a command runs and how it starts, and the subcommands that ask about them.

- Naming an agent: ``_load`` (reading the config file), ``_resolve`` (``--agent``, ``--agent-command`` and the
  config file's entries, to an ``AgentSpec``), ``_config`` (the config file's typed shape), ``_table`` (the
  built-in agents, ``agents.json`` in the ACP registry's shape, read and started).
- Talking to one, for every command that starts an agent: ``_session`` (opening a session: login, continue,
  fork, its mode, model and options), ``_explain`` (why an agent failed, in words).
- The command line of ``probe`` and ``agents``: ``_args``. ``tinyacp agents``: ``_list``; ``tinyacp agents
  --check``: ``_check``; ``tinyacp probe``: ``_probe``; what an answer to ``initialize`` offers, as ``probe`` and
  ``--check`` report it: ``_offers``.

This ``__init__`` imports nothing: the parser reads ``_args`` alone, and a subcommand imports the module it needs.
"""

"""``tinyacp prompt`` and ``tinyacp chat``: one run of an agent, watched and answered on the terminal.

- ``_args``: the command line of both; ``_command``: ``cmd_prompt`` and ``cmd_chat``; ``_settings``: the run's
  settings, made of the parsed arguments and the config file in one pass.
- ``_prompt``: one ``prompt`` run; ``_chat``: ``chat``, many turns in one session.
- What a run wires: ``_observer`` (journal, show, ask), ``_terminal`` (the person's answer, Ctrl-C),
  ``_questions`` (the agent's questions, asked on the terminal), ``_events`` (``--format json``), ``_outcome``
  (how the run ended), ``_attachments`` (``--file``, ``--image``), ``_mcp`` (``--mcp-config``), ``_display``
  (what a person sees while the agent works).

This ``__init__`` imports nothing: the parser reads ``_args`` alone; the subcommand loads the rest when it runs.
"""

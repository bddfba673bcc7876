"""What several subcommands share: the command line's shared parts (``_args``: the table of subcommands, the
types of the flags' values, the options several subcommands take), the exit status and the command's own errors
(``_exit``), usage errors (``_usage``), where config, state and journals live (``_dirs``), text checked before it
goes into an ACP message (``_text``), lines for a terminal, sanitised (``_display``), the opt-ins and the policy of
the flags (``_features``), the sessions this machine ran (``_index``), the sandbox over an agent's entry
(``_sandbox``), the files and terminals served (``_serving``) and the run's traces (``_trace``).

Nothing here imports a subcommand's folder at import time: each folder stands on this one. This ``__init__``
imports nothing, so that the parser, which reads ``_args``, ``_exit`` and ``_usage`` (and ``_dirs`` for a
subcommand's help), stays light.
"""

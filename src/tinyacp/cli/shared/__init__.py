"""What several subcommands share: the exit status and the command's own errors (``_exit``), usage errors
(``_usage``), where config, state and journals live (``_dirs``), text checked before it goes into an ACP message
(``_text``), lines for a terminal, sanitised (``_display``), the opt-ins and the policy of the flags
(``_features``), and the sessions this machine ran (``_index``).

Nothing here imports a subcommand's folder at import time: each folder stands on this one. This ``__init__``
imports nothing, so that the parser, which reads ``_exit``, ``_usage`` and ``_dirs``, stays light.
"""

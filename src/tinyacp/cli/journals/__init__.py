"""The journals a run wrote, read back: ``tinyacp journals`` (the list, and ``last`` or a session id resolved
to a journal: ``_journals``), ``tinyacp show`` (a journal as text or JSON: ``_show``) and ``tinyacp view`` (a
journal as an HTML page: ``_view``) and ``tinyacp export`` (journals sent to a trace backend: ``_export``); the
command line of all four (``_args``).

This ``__init__`` imports nothing: the parser reads ``_args`` alone; a subcommand loads its module when it runs.
"""

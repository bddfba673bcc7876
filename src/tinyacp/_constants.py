"""Values that the message structs and the command's light modules (its parser, replay) both need. No imports:
those modules read them without loading msgspec, so ``tinyacp --help`` stays fast."""

SYSTEM_PROMPT_MODES = ("append", "override")
"""How a session's system prompt meets the agent's own: added after it, or in its place."""

SECRET_MARKER = "<secret>"
"""What a journal writes in place of each secret's value."""

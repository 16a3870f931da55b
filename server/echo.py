"""How much of a client's own strings the server repeats: in status messages and in its log.

A model name, a health service name or a reflection symbol comes from the client and can
be as long as a request (megabytes). Repeated whole, it makes a refusal's status message
too large for the client's metadata limit (a stock client then sees RESOURCE_EXHAUSTED
instead of NOT_FOUND) and lets one client write a log byte for every byte it sends. So
every such string goes through `clip` before it is formatted into a message, and
`clip_message` bounds a whole message as the last line of defence. Cutting says so, with
the length, so nobody mistakes the cut string for the one that was sent.
"""

from __future__ import annotations

# A real model or service name is a few dozen characters.
MAX_NAME_CHARS = 100
# A status message or log field: what the longest of our own messages needs, with room.
MAX_MESSAGE_CHARS = 1000


def clip(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """`text` quoted as repr() does, or its first `limit` characters and a note that it was cut."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters, cut to the first {limit})"


def clip_message(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A whole message cut to `limit` characters, saying so."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]}... (message of {len(message):,} characters, cut)"

"""The project's one type for a user's mistake (a bad option, file, line or value).

Every entry point (train.py, `python -m batching`, python -m scripts...) turns a UserError, or any of its
subclasses, into one `error: ...` line on stderr and exit status 2; any other exception is a
programming error and keeps its traceback. It lives here, in the lowest package, because every
other package of the project imports `batching` and none is imported by it.
"""

from __future__ import annotations


class UserError(ValueError):
    """Bad input from the user; the message names the culprit (file:line, key, value) and what to do."""

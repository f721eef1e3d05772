"""The one error type of data/corpora/: a corpus that cannot be made or used, raised by every
builder and by the corpus table, so that no builder borrows another's."""

from __future__ import annotations

from pathlib import Path

from batching.errors import UserError

MAX_REPORTED_PROBLEMS = 30


class CorpusError(UserError):
    """A corpus setting that cannot work (the message names the hparam and what to do instead), or
    a corpus whose files have problems: `problems` lists each one, naming its file and line, all
    reported together so that a broken copy is fixed in one pass (CorpusError.listing)."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []

    @classmethod
    def listing(cls, source: Path, problems: list[str]) -> CorpusError:
        """Every problem of `source`, the first MAX_REPORTED_PROBLEMS of them in the message."""
        shown = "\n  ".join(problems[:MAX_REPORTED_PROBLEMS])
        extra = len(problems) - MAX_REPORTED_PROBLEMS
        more = f"\n  ... and {extra} more" if extra > 0 else ""
        return cls(f"{source}: {len(problems)} problem(s):\n  {shown}{more}", problems)

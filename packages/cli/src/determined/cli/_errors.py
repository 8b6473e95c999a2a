"""The one error type a command raises for a user mistake: printed as one line, no traceback."""

from __future__ import annotations


class CliError(Exception):
    """A user-facing failure: ``det`` prints ``message`` on stderr and exits with ``exit_code``.

    Attributes:
        message: one line saying what went wrong and, where possible, what to do.
        exit_code: the process exit status (1 unless a command says otherwise).
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

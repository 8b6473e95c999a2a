"""Passwords and tokens.

Clients hash passwords before sending them (salted SHA-512, like upstream's CLI) and say so with
``isHashed: true``; the master stores bcrypt of that hashed string. Session and allocation tokens are
random strings; only their SHA-256 is stored.
"""

from __future__ import annotations

import hashlib
import secrets

import bcrypt

PASSWORD_SALT = "GubPEmmotfiK9TMD6Zdw"
SESSION_DAYS = 7


def client_hash(password: str) -> str:
    """The hash a Determined client sends for ``password`` (empty stays empty)."""
    if not password:
        return ""
    return hashlib.sha512((PASSWORD_SALT + password).encode()).hexdigest()


def store_hash(hashed_password: str) -> str:
    """What goes in ``users.password_hash`` for an already client-hashed password."""
    if not hashed_password:
        return ""
    return bcrypt.hashpw(hashed_password.encode()[:72], bcrypt.gensalt()).decode()


def check_password(hashed_password: str, stored: str) -> bool:
    """Whether a client-hashed password matches the stored bcrypt hash."""
    if not stored:
        return hashed_password == ""
    if not hashed_password:
        return False
    try:
        return bcrypt.checkpw(hashed_password.encode()[:72], stored.encode())
    except ValueError:
        return False


def new_token() -> str:
    """A fresh random bearer token, never starting with ``-``: one in 64 did, and a command line
    took it for an option (``det token login -Ab3...``: "the following arguments are required")."""
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token


def token_hash(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode()).hexdigest()

"""Upstream's ``determined.common`` import paths that user code still names.

Only compatibility layers live here: ``determined.common.api`` (upstream's sessions, generated
``bindings`` and ``errors``, on det's typed client) and ``determined.common.experimental`` (the
SDK's old home).
"""

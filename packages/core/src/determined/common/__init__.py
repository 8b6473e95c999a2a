"""Upstream's ``determined.common`` import paths that user code still names.

Only compatibility aliases live here: ``determined.common.api.errors`` (the client's typed errors
under upstream's names) and ``determined.common.experimental`` (the SDK's old home).
"""

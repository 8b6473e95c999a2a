"""Upstream's ``determined.lightning`` import path: only its ``experimental`` module.

det's Lightning support lives in det-plugin-pytorch (``determined.pytorch.lightning``). This
package, shipped by det-core, only keeps upstream's path working: it loads nothing until a name of
``determined.lightning.experimental`` is used, and then says which distribution provides it when
that one is missing.
"""

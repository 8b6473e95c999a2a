"""Conformance suites for det-master's extension points (opt-in: nothing here is collected
unless a test module subclasses it).

- ``determined.master.testing.rm_suite.ResourceManagerSuite``: every resource manager (a
  ``det_resource_manager`` plugin) should pass it.
- ``determined.master.testing.searcher_suite.SearchMethodSuite``: every search method (a
  ``det_search_method`` plugin) should pass it.

The suites import pytest; import them from their modules, in tests only.
"""

from __future__ import annotations

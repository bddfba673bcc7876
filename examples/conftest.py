"""Lets ``python -m pytest examples/test_record_replay.py`` run where pytest alone is installed.

The repository's pytest settings give every test a deadline through pytest-timeout (``timeout = 120``, a test
extra) and refuse unknown settings (``--strict-config``). Without the plugin, the setting would be unknown and
pytest would stop before running anything; the example itself needs no more than pytest, so the setting is
declared here (and has no effect) when the plugin is missing or disabled (``-p no:timeout``).
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.hasplugin("timeout"):
        parser.addini("timeout", "the per-test deadline of pytest-timeout, which is not installed: no effect")

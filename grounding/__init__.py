"""Grounding: the public package.

``grounding.cli`` is the command line (``grounding check|index|...``). The checks themselves
live in :mod:`grounding_core`; the language server in :mod:`server`.
"""

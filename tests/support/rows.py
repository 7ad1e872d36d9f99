"""Ordering SQL rows in tests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def nulls_first(row: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    """A sort key for rows whose nullable columns hold None beside texts (a ``dated_lines``
    value: NULL where it equals the normalised one), which ``sorted()`` of the rows cannot
    compare: two lines of one content differing only in spaces tie up to that column.
    """
    return tuple((False, 0) if value is None else (True, value) for value in row)


def sorted_rows(rows: Iterable[Iterable[Any]]) -> list[tuple[Any, ...]]:
    """``rows`` as tuples in :func:`nulls_first` order."""
    return sorted((tuple(row) for row in rows), key=nulls_first)

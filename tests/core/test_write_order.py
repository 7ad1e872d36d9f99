"""The order a batch of derived rows is inserted in (``backend.index_order``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from grounding_core.backend import index_order

ROW = st.tuples(st.integers(-(1 << 63), (1 << 63) - 1), st.sampled_from([-3, 0, 7]),
                st.integers(-5, 5), st.integers(1, 4), st.text(max_size=3))
"""A field line's shape (64-bit hashes first); mapped below to a term's (a text first)."""


@given(st.lists(ROW, max_size=60) | st.lists(ROW.map(lambda r: (r[4], *r[1:4], r[0])), max_size=60))
def test_index_order_is_exactly_sorted(rows: list[tuple[object, ...]]) -> None:
    assert index_order(rows) == sorted(rows)  # type: ignore[type-var]


def test_index_order_groups_rows_sharing_a_first_column_and_keeps_none_after_a_unique_prefix() -> None:
    rows = [(5, 1, "b", None), (-2, 9, "a", "x"), (5, 0, "c", "y"), (-2, 3, "z", None), (5, 1, "a", None)]
    assert index_order(rows) == [(-2, 3, "z", None), (-2, 9, "a", "x"), (5, 0, "c", "y"), (5, 1, "a", None),
                                 (5, 1, "b", None)]

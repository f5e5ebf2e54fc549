"""The association rows of an engine unit's golden model: written by the host, checked against the unit's count."""

from __future__ import annotations

from typing import TypeVar

__all__ = ["check_row", "written_row"]

Row = TypeVar("Row")


def check_row(association: int, count: int) -> None:
    """`association` names one of the unit's `count` rows."""
    if not 0 <= association < count:
        raise ValueError(f"association {association} is not one of the unit's {count} rows")


def written_row(rows: dict[int, Row], association: int, count: int) -> Row:
    """The row the host wrote for `association`."""
    check_row(association, count)
    if association not in rows:
        raise ValueError(f"association row {association} was never written")
    return rows[association]

"""Enum state machines with one explicit transition table; an illegal move raises."""
from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Generic, TypeVar

from runtime.core.errors import IllegalStateTransitionError

S = TypeVar("S", bound=enum.Enum)


class StateMachine(Generic[S]):
    """Holds a current state of enum type S and allows only the moves in `table`."""

    def __init__(self, initial: S, table: Mapping[S, frozenset[S]], what: str = "state") -> None:
        self._state = initial
        self._table = table
        self._what = what

    @property
    def state(self) -> S:
        return self._state

    def can_transition(self, to: S) -> bool:
        return to in self._table.get(self._state, frozenset())

    def transition(self, to: S) -> S:
        """Move to `to`; raises IllegalStateTransitionError if the table forbids it."""
        if not self.can_transition(to):
            raise IllegalStateTransitionError(
                f"{self._what}: illegal transition {self._state.name} -> {to.name}"
            )
        previous, self._state = self._state, to
        return previous

    def __repr__(self) -> str:
        return f"StateMachine({self._what}={self._state.name})"

"""A registry: the things of one kind users add (position encodings, ...), by name.

A seam of the project (a kind of position encoding, section 3.5, say) is a base class plus a
`Registry` of its instances; every list of names (a flag's choices, a config's check) is the
registry's, so a new kind is one registration and nothing typed twice:

    >>> KINDS = Registry("position encoding", "positional_encoding")
    >>> KINDS.add("sinusoidal", Sinusoidal())
    >>> KINDS.lookup("rotary")
    ValueError: positional_encoding must be one of sinusoidal, learned, got 'rotary'

This module imports nothing but the standard library (the configs read registries before
TensorFlow starts).
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Items by name, in the order they were added.

    Args:
        what: str, what an item is, in an error ("position encoding").
        choice: str, the setting whose value names an item, in a lookup's error
            ("positional_encoding").
    """

    def __init__(self, what: str, choice: str):
        self.what = what
        self.choice = choice
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        """Registers `item` under `name`; returns it.

        Raises:
            ValueError: `name` is not a non-empty string, or it is taken.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.what} needs a name, got {name!r}")
        if name in self._items:
            raise ValueError(f"a {self.what} named {name!r} is already registered "
                             f"({type(self._items[name]).__name__})")
        self._items[name] = item
        return item

    def remove(self, name: str) -> None:
        """Removes the item `name` (a test's or a plug-in's own).

        Raises:
            ValueError: no item has that name (`lookup`'s error).
        """
        self.lookup(name)
        del self._items[name]

    def names(self) -> tuple[str, ...]:
        """The registered names, in the order they were added."""
        return tuple(self._items)

    def values(self) -> tuple[T, ...]:
        """The registered items, in the order they were added."""
        return tuple(self._items.values())

    def lookup(self, name: str) -> T:
        """The item `name`.

        Raises:
            ValueError: no item has that name; the message names the registered ones.
        """
        try:
            return self._items[name]
        except (KeyError, TypeError):
            raise ValueError(f"{self.choice} must be one of {', '.join(self._items)}, got {name!r}") from None

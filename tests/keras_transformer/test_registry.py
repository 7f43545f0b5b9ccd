"""A registry: names in the order added, refusals naming what is wrong, a lookup naming the known names."""

import pytest

from keras_transformer.registry import Registry


def _registry():
    registry = Registry("widget", "--widget")
    registry.add("a", 1)
    registry.add("b", 2)
    return registry


def test_items_keep_the_order_they_were_added():
    registry = _registry()
    assert registry.names() == ("a", "b") and registry.values() == (1, 2)
    assert registry.lookup("b") == 2


def test_a_lookup_of_an_unknown_name_names_the_known_ones():
    with pytest.raises(ValueError, match=r"^--widget must be one of a, b, got 'c'$"):
        _registry().lookup("c")
    with pytest.raises(ValueError, match=r"got \['a'\]$"):  # an unhashable value is unknown too
        _registry().lookup(["a"])


def test_a_taken_or_empty_name_is_refused():
    registry = _registry()
    with pytest.raises(ValueError, match=r"a widget named 'a' is already registered \(int\)"):
        registry.add("a", 3)
    with pytest.raises(ValueError, match="a widget needs a name"):
        registry.add("", 3)
    assert registry.names() == ("a", "b")


def test_remove_takes_out_one_name():
    registry = _registry()
    registry.remove("a")
    assert registry.names() == ("b",)
    with pytest.raises(ValueError, match="got 'a'"):
        registry.remove("a")

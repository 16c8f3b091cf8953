"""JSON Pointers (RFC 6901): parse, resolve, set, and the nearest valid path for a bad one."""

from __future__ import annotations

import pytest

from needle_action.request.jsonpointer import PointerError, join, nearest_valid, parse, resolve, set_value

BODY = {
    "model": "m",
    "messages": [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "docs"}]},
    ],
    "a/b": {"m~n": 1},
}


def test_rfc6901_escapes_round_trip():
    assert parse("/a~1b/m~0n") == ["a/b", "m~n"]
    assert join(["a/b", "m~n"]) == "/a~1b/m~0n"
    assert resolve(BODY, "/a~1b/m~0n") == 1
    assert resolve(BODY, "") is BODY


def test_resolves_into_lists_and_dicts():
    assert resolve(BODY, "/messages/1/content/0/content") == "docs"


@pytest.mark.parametrize("bad", ["messages", "/a~2"])
def test_malformed_pointers_are_refused(bad):
    with pytest.raises(PointerError):
        parse(bad)


def test_unresolved_pointer_names_where_it_stopped_and_the_nearest_path():
    with pytest.raises(PointerError) as err:
        resolve(BODY, "/mesages/1/content")
    assert "at the document's root" in err.value.message
    assert "'mesages'" in err.value.message
    assert err.value.hint == "the nearest valid path is '/messages'"
    with pytest.raises(PointerError) as err:
        resolve(BODY, "/messages/5/content")
    assert "past the end (the array has 2 items)" in err.value.message
    assert nearest_valid(BODY, "/messages/5/content") == "/messages/1"
    assert nearest_valid(BODY, "/messages/1/content/0/contnt") == "/messages/1/content/0/content"


def test_leading_zero_index_is_not_an_index():
    with pytest.raises(PointerError):
        resolve(BODY, "/messages/01")


def test_set_value_copies_and_replaces():
    out = set_value(BODY, "/messages/1/content/0/content", ["x", "y"])
    assert out["messages"][1]["content"][0]["content"] == ["x", "y"]
    assert BODY["messages"][1]["content"][0]["content"] == "docs"
    with pytest.raises(PointerError):
        set_value(BODY, "/messages/9", "x")

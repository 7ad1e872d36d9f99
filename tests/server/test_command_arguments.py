"""server.protocol.command_object: a command's arguments, and the message for bad ones."""

from __future__ import annotations

import pytest
from pygls.exceptions import JsonRpcInvalidParams

from server.protocol import command_object


@pytest.mark.parametrize(("args", "expected"), [
    (({"uri": "file:///答案.md", "key": "会员日🎉"},), {"uri": "file:///答案.md", "key": "会员日🎉"}),
    (([{"scope": "𠮷"}],), {"scope": "𠮷"}),
    ((), {}),
])
def test_an_argument_object_is_taken_as_given(args: tuple[object, ...], expected: dict[str, object]) -> None:
    assert command_object(args) == expected


@pytest.mark.parametrize(("args", "named"), [
    ((None,), "got null"),
    (([None],), "got null"),
    (("会员日",), "got a string"),
    ((3,), "got a number"),
    ((True,), "got a boolean"),
    (([[1]],), "got a list"),
])
def test_one_argument_that_is_not_an_object_is_named_by_its_kind(args: tuple[object, ...], named: str) -> None:
    """Found by the adversarial pass: ``[None]`` said "got 1 arguments"."""
    with pytest.raises(JsonRpcInvalidParams) as raised:
        command_object(args)
    assert "expected one argument object" in str(raised.value) and named in str(raised.value)


def test_more_arguments_than_the_command_takes_are_counted() -> None:
    with pytest.raises(JsonRpcInvalidParams, match="got 2 arguments"):
        command_object(({"a": 1}, {"b": 2}))
    assert command_object(("file:///a.md",), positional=("uri",)) == {"uri": "file:///a.md"}

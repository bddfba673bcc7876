"""A griffe extension for the API reference: the clients' calls as the methods they are.

``Client`` and ``AsyncClient`` take each public call from ``tinyacp._calls`` as a class attribute
(``new_session = blocking(_calls.new_session)``), which static analysis sees as an attribute with no docstring.
This extension turns each into a method with the call's parameters (``self`` first), its docstring as Python
has it (with what any call may raise added to its ``Raises:`` list), and the answer's type as the result
(``CallSpec[Session]`` becomes ``Session``; a ``streaming`` method returns the shell's prompt stream class);
``awaitable`` methods are async.
"""

from __future__ import annotations

import inspect
from typing import Any

import griffe

_SHELLS = {"_client": "Client", "_async_client": "AsyncClient"}
_ADAPTERS = {"blocking": False, "awaitable": True, "streaming": False}


class SharedCalls(griffe.Extension):
    """Replaces ``name = blocking(_calls.name)`` and ``name = awaitable(_calls.name)`` by the call itself."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != "tinyacp":
            return
        calls = pkg["_calls"]
        for module, name in _SHELLS.items():
            shell = pkg[module][name]
            for member in list(shell.members.values()):
                value = getattr(member, "value", None)
                adapter = str(value.function) if isinstance(value, griffe.ExprCall) else None
                if adapter in _ADAPTERS:
                    # streaming("Client", PromptStream, _calls.prompt_stream): the stream class is the result
                    stream = str(value.arguments[1]) if adapter == "streaming" else None
                    shell.set_member(member.name, _method(member, calls[member.name], _ADAPTERS[adapter], stream))


def _method(attribute: griffe.Object, call: griffe.Function, is_async: bool, stream: str | None) -> griffe.Function:
    answer = call.returns
    if not (isinstance(answer, griffe.ExprSubscript) and str(answer.left) == "CallSpec"):
        raise TypeError(f"{call.path} must be annotated to return CallSpec[...], not {answer}")
    _shell, *parameters = call.parameters
    method = griffe.Function(
        attribute.name,
        lineno=attribute.lineno,
        endlineno=attribute.endlineno,
        parameters=griffe.Parameters(
            griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword), *parameters
        ),
        returns=stream or answer.slice,
    )
    if call.docstring is None:
        raise TypeError(f"{call.path} has no docstring")
    docstring = call.docstring
    method.docstring = griffe.Docstring(
        inspect.cleandoc(griffe.dynamic_import(call.path).__doc__),
        lineno=docstring.lineno,
        endlineno=docstring.endlineno,
        parent=method,
        parser=docstring.parser,
        parser_options=docstring.parser_options,
    )
    if is_async:
        method.labels.add("async")
    return method

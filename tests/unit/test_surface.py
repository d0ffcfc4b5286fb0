"""One submit surface: the client, the pool and their blocking twins offer the document
methods of one definition, with one set of keywords (a keyword is added in one place)."""

from __future__ import annotations

import inspect

import pytest

from invoicing_async import ClientOptions, InvoicingClient, IssuerPool
from invoicing_async.blocking import BlockingClient, BlockingPool

DOCUMENT_METHODS = ("submit_secure", "submit_json", "submit_many", "submit_stream")


def _keywords(method) -> list[tuple[str, object]]:
    return [
        (name, parameter.default)
        for name, parameter in inspect.signature(method).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    ]


@pytest.mark.parametrize("name", DOCUMENT_METHODS)
def test_the_client_and_the_pool_share_each_document_method(name):
    """The pool's document methods are the client's: one definition, one docstring."""
    assert getattr(IssuerPool, name) is getattr(InvoicingClient, name)


@pytest.mark.parametrize("name", ["submit_secure", "submit_json", "submit_many"])
@pytest.mark.parametrize("blocking", [BlockingClient, BlockingPool])
def test_the_blocking_twins_take_the_same_keywords(name, blocking):
    """Each blocking method takes exactly the keywords (and defaults) of the async one."""
    assert _keywords(getattr(blocking, name)) == _keywords(getattr(InvoicingClient, name))


def test_submit_many_takes_submit_streams_keywords():
    """``submit_many`` is ``submit_stream`` collected: their keywords are one list."""
    assert _keywords(InvoicingClient.submit_many) == _keywords(InvoicingClient.submit_stream)
    assert _keywords(InvoicingClient.submit_json) == _keywords(InvoicingClient.submit_secure)


def test_the_options_are_the_constructors_keywords():
    """``ClientOptions`` lists the keywords a client and a pool take, and a keyword that
    is none of them is a TypeError naming it, as a misspelt keyword always was."""
    assert "retry" in ClientOptions.__annotations__
    assert "max_document_size" in ClientOptions.__annotations__
    with pytest.raises(TypeError, match="timout"):
        InvoicingClient("http://127.0.0.1:9/x", "094019245", "key", timout=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="timout"):
        IssuerPool("http://127.0.0.1:9/x", {}, timout=5)  # type: ignore[call-arg]

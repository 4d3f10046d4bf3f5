"""The media cache's pure pieces: which routing trees hash uploads, how a stored event stream is replayed, which
stream endings are errors, and the bound on what is collected."""

from __future__ import annotations

from gateway.api.config_checks import config_checks
from gateway.config.validate import ConfigParser
from gateway.pipeline.media_cache import AnswerCollector, ended_with_error, sse_events, tree_caches
from gateway.routing.plan import Planner

KEY = '"provider": "vendorA", "api_key": "k"'


def test_uploads_are_hashed_only_when_some_target_caches():
    parser = ConfigParser(config_checks())
    planner = Planner(parser)

    def caches(text: str) -> bool:
        return tree_caches(planner.plan(parser.parse(text)))

    assert not caches("{" + KEY + "}")
    assert not caches('{"input_guardrails": [{"default.wordCount": {"maxWords": 3}}], ' + KEY + "}")
    assert caches('{"cache": {"mode": "simple"}, ' + KEY + "}")
    assert caches('{"strategy": {"mode": "fallback"}, "targets": [{' + KEY + '}, {"strategy": {"mode": "single"}, '
                  '"targets": [{' + KEY + ', "cache": {"mode": "semantic"}}]}]}')


def test_a_stored_stream_is_replayed_event_by_event():
    stream = b'data: {"a":1}\n\nevent: x\ndata: {"b":2}\n\ndata: {"c":3}\n\n'
    assert sse_events(stream) == [b'data: {"a":1}\n\n', b'event: x\ndata: {"b":2}\n\n', b'data: {"c":3}\n\n']
    assert sse_events(b'data: {"a":1}\n\ndata: tail') == [b'data: {"a":1}\n\n', b"data: tail"]
    assert sse_events(b"") == []


def test_a_stream_ending_with_an_error_event_is_told_apart():
    done = b'data: {"type":"speech.audio.delta"}\n\ndata: {"type":"speech.audio.done","usage":{}}\n\n'
    assert not ended_with_error(done)
    assert ended_with_error(b'data: {"type":"speech.audio.delta"}\n\ndata: {"type":"error","error":{}}\n\n')
    assert ended_with_error(b'data: {"x":1}\n\ndata: {"error":{"message":"boom"}}\n\n')
    assert ended_with_error(b'data: {"x":1}\n\nevent: error\ndata: {"message":"boom"}\n\n')
    assert not ended_with_error(b'data: {"x":1}\n\ndata: {"type":"done","error":null}\n\n')


def test_the_collector_keeps_nothing_past_its_bound():
    collector = AnswerCollector(10)
    collector.feed(b"12345")
    collector.feed(b"67890")
    assert collector.pieces == [b"12345", b"67890"] and not collector.full
    collector.feed(b"x")
    collector.feed(b"y")
    assert collector.full and collector.pieces == []

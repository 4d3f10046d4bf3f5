"""The mock's scripted behaviour that benchmarks and tests rely on."""

from gateway_mock.kit import DEFAULT_REPLY, MockRequest, Step


def test_default_reply_streams_as_twenty_content_chunks():
    req = MockRequest("POST", "/v1/chat/completions", "", {}, b"{}", Step())
    assert len(DEFAULT_REPLY.split(" ")) == 20
    assert len(req.reply_words()) == 20
    assert "".join(req.reply_words()) == DEFAULT_REPLY


def test_chunks_knob_repeats_or_cuts_the_reply():
    req = MockRequest("POST", "/", "", {}, b"{}", Step(chunks=3))
    assert len(req.reply_words()) == 3

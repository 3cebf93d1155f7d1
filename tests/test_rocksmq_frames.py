"""The shared store's frames (``msgstream.backends.rocksmq.frames``): what is written is
read back, in any cut of the byte stream, and anything else is a FrameError naming why."""

from __future__ import annotations

import random

import orjson
import pytest

from msgstream.backends.rocksmq.frames import (
    HEADER,
    LAYOUTS,
    Frame,
    FrameDecoder,
    FrameError,
    Op,
    checked,
    encode,
)
from msgstream.backends.rocksmq.wire_errors import error_fields, rebuild_error
from msgstream.errors import (
    BackendUnavailableError,
    DiskFullError,
    StoreError,
    TopicNotFoundError,
)

FRAMES = [
    Frame(Op.HELLO, 0, [1, 42], []),
    Frame(Op.APPEND, 7, ["ch", 2**62, 3, False, {"k": "v"}], [b"a", b"", b"\x00" * 300]),
    Frame(Op.APPEND, 8, ["ch", 1, 4, True, None], [b"one"]),
    Frame(Op.REPLY, 9, [5, True], [bytes(16), b"p", b"q", b'{"a":"b"}', b""]),
    Frame(Op.LIST_CHANNELS, 2**32 - 1, [], []),
]


def test_frames_read_back_whatever_the_cuts() -> None:
    stream = b"".join(encode(f.op, f.request, f.control, f.blobs) for f in FRAMES)
    rng = random.Random(5)
    for _ in range(50):
        decoder = FrameDecoder(1 << 20)
        got: list[Frame] = []
        at = 0
        while at < len(stream):
            step = rng.randint(1, 40)
            got.extend(decoder.feed(stream[at : at + step]))
            at += step
        assert got == FRAMES
        assert decoder.buffered == 0


def test_a_frame_over_the_limit_is_refused_before_it_is_read() -> None:
    frame = encode(Op.APPEND, 1, ["ch", 1, 1, False, None], [b"x" * 1000])
    with pytest.raises(FrameError, match=r"frame of \d+ bytes \(the limit is 100"):
        FrameDecoder(100).feed(frame[:4])  # the length alone is enough to refuse it


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (HEADER.pack(3, Op.HELLO, 1, 0, 0), "frame of 3 bytes"),
        (HEADER.pack(HEADER.size - 4, 0x55, 1, 0, 0), "unknown operation 0x55"),
        (HEADER.pack(HEADER.size - 4 + 2, Op.HELLO, 1, 2, 0) + b"[1", "control is not JSON"),
        (HEADER.pack(HEADER.size - 4 + 2, Op.HELLO, 1, 9, 0) + b"[]", "do not fit"),
        (HEADER.pack(HEADER.size - 4 + 3, Op.HELLO, 1, 2, 0) + b"[]x", "1 byte.s. after its"),
        (HEADER.pack(HEADER.size - 4 + 6, Op.APPEND, 1, 2, 2) + b"[]" + bytes(4), "do not fit"),
        (
            HEADER.pack(HEADER.size - 4 + 7, Op.APPEND, 1, 2, 1) + b"[]" + b"\x09\0\0\0" + b"x",
            "blobs of 9 bytes declared, 1 present",
        ),
    ],
)
def test_a_malformed_frame_says_why(data: bytes, why: str) -> None:
    with pytest.raises(FrameError, match=why):
        FrameDecoder(1 << 20).feed(data)


def test_a_control_must_be_the_declared_array() -> None:
    fields = LAYOUTS[Op.READ].request
    good = [1, "ch", 5, 10, 100, 0]
    assert checked(fields, good, "READ") == good
    with pytest.raises(FrameError, match="READ: expected 6 control field"):
        checked(fields, good[:5], "READ")
    with pytest.raises(FrameError, match="READ: expected 6"):
        checked(fields, {"handle": 1}, "READ")
    with pytest.raises(FrameError, match="field 'from_id' is str"):
        checked(fields, [1, "ch", "5", 10, 100, 0], "READ")
    with pytest.raises(FrameError, match="field 'wait_ms' is bool"):  # a bool is no int here
        checked(fields, [1, "ch", 5, 10, 100, True], "READ")


def test_errors_cross_with_their_class_text_and_attributes() -> None:
    for error in (
        TopicNotFoundError("ch", "rocksmq"),
        TopicNotFoundError("ch-1", "rocksmq", ["ch-2", "other"]),
        DiskFullError("/s", "the disk is full"),
        StoreError("/s", "broken"),
    ):
        text = str(error)  # for the hint: its suggestions are worked out (and cached) here
        back = rebuild_error(*orjson.loads(orjson.dumps(error_fields(error))))
        assert type(back) is type(error)
        assert str(back) == text
        assert vars(back) == vars(error)
    hinted = rebuild_error(*error_fields(TopicNotFoundError("ch-1", "rocksmq", ["ch-2"])))
    assert isinstance(hinted, TopicNotFoundError)
    assert hinted.suggestions == ("ch-2",)
    assert str(hinted) == "channel 'ch-1' does not exist on backend 'rocksmq'; did you mean 'ch-2'?"
    assert rebuild_error(*error_fields(DiskFullError("/s", "full"))).path == "/s"
    # a failure that is no msgstream error, and a name that is none: BackendUnavailableError
    kind, text, attributes = error_fields(ValueError("boom"))
    assert (kind, text, attributes) == ("BackendUnavailableError", "ValueError: boom", {})
    forged = rebuild_error("SystemExit", "x", {"__class__": 1, "code": [1]})
    assert type(forged) is BackendUnavailableError and str(forged) == "x"

"""The shared store's frames (``msgstream.backends.rocksmq.frames``): what is written is
read back, in any cut of the byte stream, and anything else is a FrameError naming why."""

from __future__ import annotations

import random

import orjson
import pytest

from msgstream.backends.rocksmq.frames import (
    HEADER,
    LAYOUTS,
    READ_ROOM,
    Frame,
    FrameDecoder,
    FrameError,
    Op,
    check_error,
    check_reply,
    check_request,
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
    Frame(Op.REPLY, 10, [6, False], [b"\x01" * 9, b"one record"]),  # two blobs
    Frame(Op.REPLY, 11, [6, False], [b"", b"x"]),
    Frame(Op.REPLY, 12, [40, False], [bytes([n]) * n for n in range(40)]),  # > 16 blobs
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


def read_into(decoder: FrameDecoder, data: bytes, most: int) -> tuple[list[Frame], int]:
    """What a socket read does through asyncio.BufferedProtocol: up to ``most`` bytes
    of ``data`` straight into the decoder's room; the frames completed, the bytes read."""
    room = decoder.get_buffer(-1)
    n = min(len(room), len(data), most)
    room[:n] = data[:n]
    room.release()
    return decoder.buffer_updated(n), n


def test_frames_read_straight_into_the_buffer_whatever_the_reads() -> None:
    big = Frame(Op.REPLY, 3, [1, False], [bytes(range(256)) * 4096, b"tail"])  # 1 MiB
    rng = random.Random(7)
    for most, frames in ((1, FRAMES), (40, FRAMES), (4096, [*FRAMES, big, *FRAMES]),
                         (1 << 30, [*FRAMES, big, *FRAMES])):  # fmt: skip
        stream = b"".join(encode(f.op, f.request, f.control, f.blobs) for f in frames)
        decoder = FrameDecoder(4 << 20)
        got: list[Frame] = []
        at = 0
        while at < len(stream):
            completed, n = read_into(decoder, stream[at:], rng.randint(1, most))
            got.extend(completed)
            at += n
        assert got == frames
        assert decoder.buffered == 0


def test_a_claimed_size_alone_does_not_grow_the_buffer() -> None:
    decoder = FrameDecoder(64 << 20)
    header = HEADER.pack(60 << 20, Op.APPEND, 1, 2, 1)  # claims 60 MiB, sends 17 bytes
    assert read_into(decoder, header, len(header)) == ([], len(header))
    assert len(decoder.get_buffer(-1)) == READ_ROOM
    decoder.get_buffer(-1).release()
    assert decoder.buffered == len(header)


def test_the_buffer_shrinks_after_a_large_frame() -> None:
    decoder = FrameDecoder(64 << 20)
    frame = encode(Op.REPLY, 1, [1, False], [bytes(8 << 20)])
    at = 0
    while at < len(frame):
        room = decoder.get_buffer(-1)
        n = min(len(room), len(frame) - at)
        room[:n] = frame[at : at + n]
        room.release()
        assert len(decoder.buffer_updated(n)) == (1 if at + n == len(frame) else 0)
        at += n
    assert len(decoder.get_buffer(-1)) <= 2 * READ_ROOM


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


def test_requests_replies_and_errors_are_checked_against_their_layouts() -> None:
    check_request(Op.APPEND, ["ch", 1, 2, False, None], [b"p"])
    check_request(Op.READ, [1, "ch", 5, 10, 100, 0], [])
    check_reply(Op.READ, [6, False], [b"ids", b"p"])
    check_reply(Op.APPEND, [5], [])
    assert check_error(["TopicNotFoundError", "text", {}]) == ["TopicNotFoundError", "text", {}]
    with pytest.raises(FrameError, match="READ frame: unexpected blobs"):
        check_request(Op.READ, [1, "ch", 5, 10, 100, 0], [b"x"])
    with pytest.raises(FrameError, match="APPEND: field 'seq' is float"):
        check_request(Op.APPEND, ["ch", 1, 2.0, False, None], [b"p"])
    with pytest.raises(FrameError, match="APPEND reply: unexpected blobs"):
        check_reply(Op.APPEND, [5], [b"x"])
    with pytest.raises(FrameError, match="READ reply: field 'with_properties' is int"):
        check_reply(Op.READ, [6, 1], [b"ids"])
    with pytest.raises(FrameError, match="ERROR: expected 3"):
        check_error(["TopicNotFoundError", "text"])


def test_an_operation_hashes_as_its_number() -> None:
    assert {Op.APPEND: 1}[Op.APPEND] == 1 and {6: "six"}[Op.APPEND] == "six"
    assert hash(Op.READ) == hash(7) and Op.READ == 7


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

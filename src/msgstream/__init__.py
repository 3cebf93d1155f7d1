"""msgstream: an asyncio message-stream runtime.

Ordered, replayable, timestamped channels over an embedded RocksDB log (the default),
Kafka or Pulsar, with a time-tick barrier that merges channels into aligned packs.
Importing this package never imports a broker library.
"""

from .backend import Client, ConsumedMessage, Consumer, MessageID, Producer
from .barrier import TickBarrier
from .codec import MessageRegistry, decode, default_registry, encode, register_message_type
from .config import Config, config_from_dict, load_config, resolve_backend
from .emitter import TimeTickEmitter
from .errors import (
    AuthenticationError,
    AuthorizationError,
    BackendUnavailableError,
    CodecError,
    ConfigError,
    DecodeError,
    DiskFullError,
    ForeignMessageIdError,
    InvalidChannelNameError,
    InvalidPositionError,
    LateMessageError,
    MessageTooLargeError,
    MissingTimestampError,
    MsgStreamError,
    ProblemError,
    SendOutcomeUnknownError,
    StoreCorruptedError,
    StoreError,
    StoreLockedError,
    StorePathError,
    StreamClosedError,
    StreamStateError,
    TopicNotFoundError,
    UnknownMessageTypeError,
    UnknownTypeCodeError,
)
from .factory import MsgStreamFactory, new_client, new_msgstream, new_ttmsgstream
from .messages import (
    CreateCollectionMsg,
    CreatePartitionMsg,
    DeleteMsg,
    DropCollectionMsg,
    DropPartitionMsg,
    InsertMsg,
    MsgType,
    TimeTickMsg,
    TsMsg,
)
from .pack import MsgPack
from .plugins import BackendSpec, register_backend, unregister_backend
from .position import MsgPosition, SubscriptionPosition, positions_from_json, positions_to_json
from .routing import (
    RepackFunc,
    default_repack,
    hash_int64,
    hash_primary_keys,
    hash_str,
    repack_by_first_key,
)
from .schema import CollectionSchema, DataType, FieldData, FieldSchema
from .shutdown import StopOnSignals
from .stream import MsgStream
from .tso import TsoAllocator, compose_ts, parse_ts
from .ttstream import TtMsgStream

__version__ = "0.1.0"

__all__ = [
    "BackendSpec",
    "AuthenticationError",
    "AuthorizationError",
    "BackendUnavailableError",
    "Client",
    "CodecError",
    "CollectionSchema",
    "Config",
    "ConfigError",
    "ConsumedMessage",
    "Consumer",
    "CreateCollectionMsg",
    "CreatePartitionMsg",
    "DataType",
    "DecodeError",
    "DeleteMsg",
    "DiskFullError",
    "DropCollectionMsg",
    "DropPartitionMsg",
    "FieldData",
    "FieldSchema",
    "ForeignMessageIdError",
    "InsertMsg",
    "InvalidChannelNameError",
    "InvalidPositionError",
    "LateMessageError",
    "MissingTimestampError",
    "MessageID",
    "MessageRegistry",
    "MessageTooLargeError",
    "MsgPack",
    "MsgPosition",
    "MsgStream",
    "MsgStreamError",
    "ProblemError",
    "SendOutcomeUnknownError",
    "MsgStreamFactory",
    "MsgType",
    "Producer",
    "RepackFunc",
    "StoreCorruptedError",
    "StoreError",
    "StopOnSignals",
    "StoreLockedError",
    "StorePathError",
    "StreamClosedError",
    "StreamStateError",
    "SubscriptionPosition",
    "TickBarrier",
    "TimeTickEmitter",
    "TimeTickMsg",
    "TopicNotFoundError",
    "TsMsg",
    "TsoAllocator",
    "TtMsgStream",
    "UnknownMessageTypeError",
    "UnknownTypeCodeError",
    "compose_ts",
    "config_from_dict",
    "decode",
    "default_registry",
    "default_repack",
    "encode",
    "hash_int64",
    "hash_primary_keys",
    "hash_str",
    "load_config",
    "new_client",
    "new_msgstream",
    "new_ttmsgstream",
    "parse_ts",
    "positions_from_json",
    "positions_to_json",
    "register_message_type",
    "repack_by_first_key",
    "register_backend",
    "resolve_backend",
    "unregister_backend",
]


def __getattr__(name: str) -> object:
    """The renamed errors of 0.1 (``TopicNotFound``, ``InvalidChannelName``), with a warning."""
    from . import errors

    return errors.__getattr__(name)

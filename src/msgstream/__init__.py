"""msgstream: an asyncio message-stream runtime.

Ordered, replayable, timestamped channels over an embedded RocksDB log (the default),
Kafka or Pulsar, with a time-tick barrier that merges channels into aligned packs.
Importing this package never imports a broker library.

``__all__`` is the user API: streams, messages, routing, positions, configuration,
errors and what a backend plug-in implements. Internals (the time-tick barrier, decode
plans, readers, ...) are importable from their own modules, with no promise of stability.
"""

from .configuration.config import Config, config_from_dict, load_config, resolve_backend
from .configuration.plugins import BackendSpec, register_backend, unregister_backend
from .contract.backend import Client, ConsumedMessage, Consumer, MessageID, Producer
from .errors import (
    AuthenticationError,
    AuthorizationError,
    BackendUnavailableError,
    CodecError,
    ConfigError,
    DecodeError,
    ForeignMessageIdError,
    InvalidChannelNameError,
    InvalidPositionError,
    LateMessageError,
    MessageTooLargeError,
    MissingTimestampError,
    MsgStreamError,
    ProblemError,
    ReadIncompleteError,
    SendOutcomeUnknownError,
    StreamClosedError,
    StreamStateError,
    TopicNotFoundError,
    UnknownMessageTypeError,
    UnknownTypeCodeError,
)
from .runtime.shutdown import StopOnSignals
from .streams.emitter import TimeTickEmitter
from .streams.factory import MsgStreamFactory, new_client, new_msgstream, new_ttmsgstream
from .streams.routing import (
    RepackFunc,
    default_repack,
    hash_int64,
    hash_primary_keys,
    hash_str,
    repack_by_first_key,
)
from .streams.stream import MsgStream
from .streams.ttstream import TtMsgStream
from .wire.codec import MessageRegistry, decode, default_registry, encode, register_message_type
from .wire.messages import (
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
from .wire.pack import MsgPack
from .wire.position import MsgPosition, SubscriptionPosition, positions_from_json, positions_to_json
from .wire.schema import CollectionSchema, DataType, FieldData, FieldSchema
from .wire.tso import TsoAllocator, compose_ts, parse_ts

__version__ = "0.1.0"

__all__ = [
    # streams, and the factory that makes them from configuration
    "MsgStream",
    "TtMsgStream",
    "MsgStreamFactory",
    "new_client",
    "new_msgstream",
    "new_ttmsgstream",
    "TimeTickEmitter",
    "StopOnSignals",
    # messages and packs
    "MsgPack",
    "MsgType",
    "TsMsg",
    "TimeTickMsg",
    "InsertMsg",
    "DeleteMsg",
    "CreateCollectionMsg",
    "DropCollectionMsg",
    "CreatePartitionMsg",
    "DropPartitionMsg",
    "CollectionSchema",
    "DataType",
    "FieldData",
    "FieldSchema",
    # the codec and your own message types
    "MessageRegistry",
    "decode",
    "default_registry",
    "encode",
    "register_message_type",
    # routing
    "RepackFunc",
    "default_repack",
    "hash_int64",
    "hash_primary_keys",
    "hash_str",
    "repack_by_first_key",
    # timestamps and positions
    "TsoAllocator",
    "compose_ts",
    "parse_ts",
    "MessageID",
    "MsgPosition",
    "SubscriptionPosition",
    "positions_from_json",
    "positions_to_json",
    # configuration
    "Config",
    "config_from_dict",
    "load_config",
    "resolve_backend",
    # errors
    "MsgStreamError",
    "ProblemError",
    "ConfigError",
    "CodecError",
    "DecodeError",
    "UnknownMessageTypeError",
    "UnknownTypeCodeError",
    "MissingTimestampError",
    "LateMessageError",
    "TopicNotFoundError",
    "ReadIncompleteError",
    "InvalidChannelNameError",
    "InvalidPositionError",
    "ForeignMessageIdError",
    "MessageTooLargeError",
    "StreamClosedError",
    "StreamStateError",
    "BackendUnavailableError",
    "SendOutcomeUnknownError",
    "AuthenticationError",
    "AuthorizationError",
    "StoreError",
    "StorePathError",
    "StoreLockedError",
    "StoreCorruptedError",
    "DiskFullError",
    # plug-ins: a backend's spec and the protocols its client implements
    "BackendSpec",
    "register_backend",
    "unregister_backend",
    "Client",
    "Producer",
    "Consumer",
    "ConsumedMessage",
]


def __getattr__(name: str) -> type[MsgStreamError]:
    """The backends' own errors (the embedded store's ``StoreError`` and its kinds), and the
    renamed errors of 0.1 (``TopicNotFound``, ``InvalidChannelName``), with a warning."""
    from . import errors

    return errors.__getattr__(name)

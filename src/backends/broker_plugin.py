"""How the networked backends (Kafka, Pulsar) declare themselves as plug-ins.

What makes them alike is stated once here: each is installed by the msgstream extra named
after it, is made by its package's client class (``kafka.client:KafkaClient``, called with
its section and the shared ``msgstream`` section), and is chosen by ``mq.type: default``
when its address key is set, which it then cannot do without.
"""

from __future__ import annotations

from msgstream.configuration.plugins import DEFAULT_READER_ACCESS, BackendSpec
from msgstream.configuration.sections import Section

_PACKAGE = __name__.rpartition(".")[0]
"""Where the backends are installed (``msgstream.backends``)."""


def broker_spec(
    section: type[Section],
    *,
    address_key: str,
    selection_rank: int,
    listing_position: int,
    client_class: str,
    message_id_tag: bytes | None = None,
    reader_access: str = DEFAULT_READER_ACCESS,
) -> BackendSpec:
    """The spec of the broker whose config section is ``section``, reached at the address
    its key ``address_key`` holds."""
    name = section.SECTION
    return BackendSpec(
        name=name,
        section=section,
        listing_position=listing_position,
        client_factory=f"{_PACKAGE}.{name}.client:{client_class}",
        message_id_tag=message_id_tag,
        extra=name,
        selected_by=address_key,
        selection_rank=selection_rank,
        required_keys=(address_key,),
        reader_access=reader_access,
    )

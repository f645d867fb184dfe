"""The compute protocol on the wire: Protobuf messages and the codec to and from spec dataclasses.

* ``proto/tidegate_compute.proto`` -- the contract; generated code in :mod:`.gen`;
* :mod:`.codec` -- ``encode_command``/``decode_command``, ``encode_response``/``decode_response``;
* :mod:`.plans` -- plans (the IR of :mod:`tidegate.spec.plan`) as typed messages;
* ``_rows`` (private) -- row payloads as Arrow IPC bytes;
* :mod:`.errors` -- :class:`WireError` and its subclasses.
"""

from .errors import MalformedMessage, UnknownMessageKind, WireError

__all__ = ["MalformedMessage", "UnknownMessageKind", "WireError"]

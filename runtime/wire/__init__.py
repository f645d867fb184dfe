"""The compute and storage protocols on the wire: Protobuf messages and the codecs to and from spec dataclasses.

* ``proto/tidegate_compute.proto``, ``proto/tidegate_storage.proto`` -- the contracts;
  generated code in :mod:`.gen`;
* :mod:`.codec` -- ``encode_command``/``decode_command``, ``encode_response``/``decode_response``;
* :mod:`.storage_codec` -- the same for the storage protocol (``encode_storage_command``, ...);
* :mod:`.frames` -- large messages as fragments, for either protocol (:class:`~.frames.MessageCodec`);
* :mod:`.plans` -- plans (the IR of :mod:`tidegate.spec.plan`) as typed messages;
* ``_rows`` (private) -- row payloads as Arrow IPC bytes;
* :mod:`.errors` -- :class:`WireError` and its subclasses.
"""

from .errors import MalformedMessage, UnknownMessageKind, WireError

__all__ = ["MalformedMessage", "UnknownMessageKind", "WireError"]

"""Sink writers of a storage replica: each commits a collection's updates to an external system exactly once.

:mod:`.iceberg` writes an Apache Iceberg table through ``pyiceberg``
(:class:`~tidegate.spec.storage.connections.IcebergSink`).
"""

from .iceberg import IcebergSinkWriter, read_changelog

__all__ = ["IcebergSinkWriter", "read_changelog"]

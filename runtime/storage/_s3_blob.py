"""Blob in an S3-compatible object store (AWS S3, MinIO, moto) through boto3.

Credentials come from the usual boto3 sources (environment, config files).
A PUT is atomic in S3, so ``set`` needs no temporary object.
"""

from __future__ import annotations

from typing import Any

from tidegate.spec.shard import BlobMeta

__all__ = ["S3Blob"]


class S3Blob:
    """Objects under ``prefix`` in ``bucket``; ``endpoint`` selects a non-AWS server."""

    local = False
    """Calls are network round trips, which may hang: never run on an event loop (see
    :attr:`~tidegate.runtime.storage.ShardStore.local`)."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint: str | None = None,
        region: str | None = None,
        client: Any = None,
    ) -> None:
        if not bucket:
            raise ValueError("an S3 blob URL needs a bucket: s3://bucket/prefix")
        if client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError as e:
                raise ModuleNotFoundError(
                    "the S3 blob backend needs boto3: pip install 'tidegate[s3]'"
                ) from e

            client = boto3.client(
                "s3",
                endpoint_url=endpoint,
                region_name=region or "us-east-1",
                config=Config(retries={"max_attempts": 5, "mode": "standard"}),
            )
        self._s3 = client
        self.bucket = bucket
        self.prefix = f"{prefix.strip('/')}/" if prefix.strip("/") else ""

    def _key(self, key: str) -> str:
        if not key or key.startswith("/"):
            raise ValueError(f"invalid blob key {key!r}")
        return self.prefix + key

    def get(self, key: str) -> bytes | None:
        try:
            resp = self._s3.get_object(Bucket=self.bucket, Key=self._key(key))
        except self._s3.exceptions.NoSuchKey:
            return None
        data: bytes = resp["Body"].read()
        return data

    def set(self, key: str, value: bytes) -> None:
        self._s3.put_object(Bucket=self.bucket, Key=self._key(key), Body=bytes(value))

    def delete(self, key: str) -> int | None:
        k = self._key(key)
        try:
            size: int = self._s3.head_object(Bucket=self.bucket, Key=k)["ContentLength"]
        except self._s3.exceptions.ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        self._s3.delete_object(Bucket=self.bucket, Key=k)
        return size

    def list_keys(self, prefix: str = "") -> list[BlobMeta]:
        out: list[BlobMeta] = []
        paginator = self._s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
            for obj in page.get("Contents", []):
                out.append(
                    BlobMeta(
                        obj["Key"][len(self.prefix) :],
                        obj["Size"],
                        obj["LastModified"].timestamp(),
                    )
                )
        return sorted(out, key=lambda m: m.key)

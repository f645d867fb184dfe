"""An S3-compatible server for the tests: a pytest plugin (``tests/conftest.py`` loads it).

``s3_endpoint`` is moto's server (``moto[server]``) on a free loopback port,
with a bucket ``tidegate``, for the session.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest
from postgres_cluster import free_port, stop_process


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(k, v)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(endpoint, timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"moto's S3 server did not start on port {port}")
                time.sleep(0.2)
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
            Bucket="tidegate"
        )
        yield endpoint
    finally:
        stop_process(proc, signal.SIGTERM)

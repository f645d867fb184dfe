"""Outside readers of a sink's table: N threads read it with pyiceberg in a loop (test_iceberg_sink).

    python iceberg_loop_readers.py CATALOG_URL WAREHOUSE TABLE THREADS STOP_FILE DELAY_S

Each thread opens its own SQL catalog under the documented catalog name
(``tidegate``) and, until ``STOP_FILE`` exists, loads the table (the
catalog's pointer, then the metadata file it names) and scans it (manifest
list, manifests, data files), as an outside reader does. Every other read
then waits up to ``DELAY_S`` seconds (a reader slow between reading the
pointer and opening the file: a fresh process importing pyarrow's file
system takes seconds there) and reads the metadata file it got again, by
its location, and the snapshot in it. Prints ``ready`` once
every thread has read the table once, then, at the end, one JSON object:
``reads`` (how many reads succeeded), ``failures`` (each failed read's error
text) and ``metadata_locations`` (how many distinct metadata files were read).
Shares no code with the writer; only pyiceberg's.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import StaticTable


def main() -> None:
    catalog_url, warehouse, table, threads, stop_file, delay_s = sys.argv[1:7]
    stop = Path(stop_file)
    lock = threading.Lock()
    reads = 0
    failures: list[str] = []
    locations: set[str] = set()
    first = threading.Barrier(int(threads) + 1)

    def read_loop() -> None:
        nonlocal reads
        catalog = SqlCatalog("tidegate", uri=catalog_url, warehouse=warehouse)
        started = False
        rng = random.Random(threading.get_ident())
        try:
            while not stop.exists():
                try:
                    t = catalog.load_table(table)
                    t.scan().to_arrow()
                    if rng.random() < 0.5:
                        time.sleep(rng.uniform(0, float(delay_s)))
                        StaticTable.from_metadata(t.metadata_location).scan().to_arrow()
                    with lock:
                        reads += 1
                        locations.add(t.metadata_location)
                except Exception as e:
                    with lock:
                        failures.append(f"{type(e).__name__}: {e}")
                if not started:
                    started = True
                    first.wait()
        finally:
            catalog.engine.dispose()
            if not started:
                first.wait()

    workers = [threading.Thread(target=read_loop, daemon=True) for _ in range(int(threads))]
    for w in workers:
        w.start()
    first.wait()
    print("ready", flush=True)
    for w in workers:
        while w.is_alive():
            w.join(0.5)
    print(json.dumps({"reads": reads, "failures": failures, "metadata_locations": len(locations)}))


if __name__ == "__main__":
    main()

"""tidegate: the control layer of an incremental-view database on Apache Spark.

The import package has four parts, each its own top-level folder in the
repository:

* :mod:`tidegate.spec` -- the pure, sans-IO executable model;
* :mod:`tidegate.sim` -- the deterministic trio simulator;
* :mod:`tidegate.runtime` -- the production controller, shard store and API;
* :mod:`tidegate.replica` -- the replica process that runs dataflows on Spark.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]

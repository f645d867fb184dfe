"""Generated Protobuf code; do not edit (see tidegate.runtime.wire.generate)."""

__all__: list[str] = []  # import the generated modules by name (tidegate_compute_pb2)

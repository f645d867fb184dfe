"""Generated Protobuf code; do not edit (see tidegate.runtime.wire.generate)."""

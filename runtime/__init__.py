"""tidegate's production runtime: transport, controller driver, storage (shards), orchestration."""

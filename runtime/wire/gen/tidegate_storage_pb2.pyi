from . import tidegate_compute_pb2 as _tidegate_compute_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ProtoLoadGeneratorKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTO_LOAD_GENERATOR_KIND_UNSPECIFIED: _ClassVar[ProtoLoadGeneratorKind]
    PROTO_LOAD_GENERATOR_KIND_COUNTER: _ClassVar[ProtoLoadGeneratorKind]
    PROTO_LOAD_GENERATOR_KIND_AUCTION: _ClassVar[ProtoLoadGeneratorKind]

class ProtoSourceStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTO_SOURCE_STATUS_UNSPECIFIED: _ClassVar[ProtoSourceStatus]
    PROTO_SOURCE_STATUS_STARTING: _ClassVar[ProtoSourceStatus]
    PROTO_SOURCE_STATUS_RUNNING: _ClassVar[ProtoSourceStatus]
    PROTO_SOURCE_STATUS_PAUSED: _ClassVar[ProtoSourceStatus]
    PROTO_SOURCE_STATUS_STALLED: _ClassVar[ProtoSourceStatus]
    PROTO_SOURCE_STATUS_CEASED: _ClassVar[ProtoSourceStatus]
    PROTO_SOURCE_STATUS_DROPPED: _ClassVar[ProtoSourceStatus]
PROTO_LOAD_GENERATOR_KIND_UNSPECIFIED: ProtoLoadGeneratorKind
PROTO_LOAD_GENERATOR_KIND_COUNTER: ProtoLoadGeneratorKind
PROTO_LOAD_GENERATOR_KIND_AUCTION: ProtoLoadGeneratorKind
PROTO_SOURCE_STATUS_UNSPECIFIED: ProtoSourceStatus
PROTO_SOURCE_STATUS_STARTING: ProtoSourceStatus
PROTO_SOURCE_STATUS_RUNNING: ProtoSourceStatus
PROTO_SOURCE_STATUS_PAUSED: ProtoSourceStatus
PROTO_SOURCE_STATUS_STALLED: ProtoSourceStatus
PROTO_SOURCE_STATUS_CEASED: ProtoSourceStatus
PROTO_SOURCE_STATUS_DROPPED: ProtoSourceStatus

class ProtoLoadGenerator(_message.Message):
    __slots__ = ("kind", "tick_ms", "seed", "max_cardinality", "rows_per_tick")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TICK_MS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    MAX_CARDINALITY_FIELD_NUMBER: _ClassVar[int]
    ROWS_PER_TICK_FIELD_NUMBER: _ClassVar[int]
    kind: ProtoLoadGeneratorKind
    tick_ms: int
    seed: int
    max_cardinality: int
    rows_per_tick: int
    def __init__(self, kind: _Optional[_Union[ProtoLoadGeneratorKind, str]] = ..., tick_ms: _Optional[int] = ..., seed: _Optional[int] = ..., max_cardinality: _Optional[int] = ..., rows_per_tick: _Optional[int] = ...) -> None: ...

class ProtoPostgresSource(_message.Message):
    __slots__ = ("url", "table", "publication", "slot")
    URL_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    PUBLICATION_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    url: str
    table: str
    publication: str
    slot: str
    def __init__(self, url: _Optional[str] = ..., table: _Optional[str] = ..., publication: _Optional[str] = ..., slot: _Optional[str] = ...) -> None: ...

class ProtoSimulatedSource(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ProtoSourceConnection(_message.Message):
    __slots__ = ("load_generator", "postgres", "simulated")
    LOAD_GENERATOR_FIELD_NUMBER: _ClassVar[int]
    POSTGRES_FIELD_NUMBER: _ClassVar[int]
    SIMULATED_FIELD_NUMBER: _ClassVar[int]
    load_generator: ProtoLoadGenerator
    postgres: ProtoPostgresSource
    simulated: ProtoSimulatedSource
    def __init__(self, load_generator: _Optional[_Union[ProtoLoadGenerator, _Mapping]] = ..., postgres: _Optional[_Union[ProtoPostgresSource, _Mapping]] = ..., simulated: _Optional[_Union[ProtoSimulatedSource, _Mapping]] = ...) -> None: ...

class ProtoIcebergSink(_message.Message):
    __slots__ = ("catalog_url", "warehouse", "table", "commit_interval_ms", "progress_interval_ms")
    CATALOG_URL_FIELD_NUMBER: _ClassVar[int]
    WAREHOUSE_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    catalog_url: str
    warehouse: str
    table: str
    commit_interval_ms: int
    progress_interval_ms: int
    def __init__(self, catalog_url: _Optional[str] = ..., warehouse: _Optional[str] = ..., table: _Optional[str] = ..., commit_interval_ms: _Optional[int] = ..., progress_interval_ms: _Optional[int] = ...) -> None: ...

class ProtoSimulatedSink(_message.Message):
    __slots__ = ("name", "commit_interval_ms", "progress_interval_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    commit_interval_ms: int
    progress_interval_ms: int
    def __init__(self, name: _Optional[str] = ..., commit_interval_ms: _Optional[int] = ..., progress_interval_ms: _Optional[int] = ...) -> None: ...

class ProtoSinkConnection(_message.Message):
    __slots__ = ("iceberg", "simulated")
    ICEBERG_FIELD_NUMBER: _ClassVar[int]
    SIMULATED_FIELD_NUMBER: _ClassVar[int]
    iceberg: ProtoIcebergSink
    simulated: ProtoSimulatedSink
    def __init__(self, iceberg: _Optional[_Union[ProtoIcebergSink, _Mapping]] = ..., simulated: _Optional[_Union[ProtoSimulatedSink, _Mapping]] = ...) -> None: ...

class ProtoIngestion(_message.Message):
    __slots__ = ("instance", "remap_collection", "connection", "schema")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    REMAP_COLLECTION_FIELD_NUMBER: _ClassVar[int]
    CONNECTION_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    instance: str
    remap_collection: str
    connection: ProtoSourceConnection
    schema: _tidegate_compute_pb2.ProtoSchema
    def __init__(self, instance: _Optional[str] = ..., remap_collection: _Optional[str] = ..., connection: _Optional[_Union[ProtoSourceConnection, _Mapping]] = ..., schema: _Optional[_Union[_tidegate_compute_pb2.ProtoSchema, _Mapping]] = ...) -> None: ...

class ProtoIntrospection(_message.Message):
    __slots__ = ("kind",)
    KIND_FIELD_NUMBER: _ClassVar[int]
    kind: str
    def __init__(self, kind: _Optional[str] = ...) -> None: ...

class ProtoMaterializedViewSource(_message.Message):
    __slots__ = ("inputs",)
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, inputs: _Optional[_Iterable[str]] = ...) -> None: ...

class ProtoDataSource(_message.Message):
    __slots__ = ("table", "webhook", "introspection", "progress", "ingestion", "materialized_view", "other")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    INTROSPECTION_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    INGESTION_FIELD_NUMBER: _ClassVar[int]
    MATERIALIZED_VIEW_FIELD_NUMBER: _ClassVar[int]
    OTHER_FIELD_NUMBER: _ClassVar[int]
    table: _tidegate_compute_pb2.ProtoEmpty
    webhook: _tidegate_compute_pb2.ProtoEmpty
    introspection: ProtoIntrospection
    progress: _tidegate_compute_pb2.ProtoEmpty
    ingestion: ProtoIngestion
    materialized_view: ProtoMaterializedViewSource
    other: _tidegate_compute_pb2.ProtoEmpty
    def __init__(self, table: _Optional[_Union[_tidegate_compute_pb2.ProtoEmpty, _Mapping]] = ..., webhook: _Optional[_Union[_tidegate_compute_pb2.ProtoEmpty, _Mapping]] = ..., introspection: _Optional[_Union[ProtoIntrospection, _Mapping]] = ..., progress: _Optional[_Union[_tidegate_compute_pb2.ProtoEmpty, _Mapping]] = ..., ingestion: _Optional[_Union[ProtoIngestion, _Mapping]] = ..., materialized_view: _Optional[_Union[ProtoMaterializedViewSource, _Mapping]] = ..., other: _Optional[_Union[_tidegate_compute_pb2.ProtoEmpty, _Mapping]] = ...) -> None: ...

class ProtoCollectionDescription(_message.Message):
    __slots__ = ("data_source", "since", "status_collection", "schema")
    DATA_SOURCE_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    STATUS_COLLECTION_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    data_source: ProtoDataSource
    since: _tidegate_compute_pb2.ProtoAntichain
    status_collection: str
    schema: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, data_source: _Optional[_Union[ProtoDataSource, _Mapping]] = ..., since: _Optional[_Union[_tidegate_compute_pb2.ProtoAntichain, _Mapping]] = ..., status_collection: _Optional[str] = ..., schema: _Optional[_Iterable[str]] = ...) -> None: ...

class ProtoExportDescription(_message.Message):
    __slots__ = ("from_id", "instance", "as_of", "connection", "schema")
    FROM_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    CONNECTION_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    from_id: str
    instance: str
    as_of: _tidegate_compute_pb2.ProtoAntichain
    connection: ProtoSinkConnection
    schema: _tidegate_compute_pb2.ProtoSchema
    def __init__(self, from_id: _Optional[str] = ..., instance: _Optional[str] = ..., as_of: _Optional[_Union[_tidegate_compute_pb2.ProtoAntichain, _Mapping]] = ..., connection: _Optional[_Union[ProtoSinkConnection, _Mapping]] = ..., schema: _Optional[_Union[_tidegate_compute_pb2.ProtoSchema, _Mapping]] = ...) -> None: ...

class ProtoStorageParameters(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedCompositeFieldContainer[_tidegate_compute_pb2.ProtoConfigEntry]
    def __init__(self, values: _Optional[_Iterable[_Union[_tidegate_compute_pb2.ProtoConfigEntry, _Mapping]]] = ...) -> None: ...

class ProtoRunIngestion(_message.Message):
    __slots__ = ("id", "description", "resume_upper")
    ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    RESUME_UPPER_FIELD_NUMBER: _ClassVar[int]
    id: str
    description: ProtoCollectionDescription
    resume_upper: _tidegate_compute_pb2.ProtoAntichain
    def __init__(self, id: _Optional[str] = ..., description: _Optional[_Union[ProtoCollectionDescription, _Mapping]] = ..., resume_upper: _Optional[_Union[_tidegate_compute_pb2.ProtoAntichain, _Mapping]] = ...) -> None: ...

class ProtoRunSink(_message.Message):
    __slots__ = ("id", "description", "as_of", "strict")
    ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    id: str
    description: ProtoExportDescription
    as_of: _tidegate_compute_pb2.ProtoAntichain
    strict: bool
    def __init__(self, id: _Optional[str] = ..., description: _Optional[_Union[ProtoExportDescription, _Mapping]] = ..., as_of: _Optional[_Union[_tidegate_compute_pb2.ProtoAntichain, _Mapping]] = ..., strict: _Optional[bool] = ...) -> None: ...

class ProtoStorageCommand(_message.Message):
    __slots__ = ("hello", "initialization_complete", "allow_writes", "update_configuration", "run_ingestion", "run_sink", "allow_compaction", "fragment", "hello_epoch")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    INITIALIZATION_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    ALLOW_WRITES_FIELD_NUMBER: _ClassVar[int]
    UPDATE_CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    RUN_INGESTION_FIELD_NUMBER: _ClassVar[int]
    RUN_SINK_FIELD_NUMBER: _ClassVar[int]
    ALLOW_COMPACTION_FIELD_NUMBER: _ClassVar[int]
    FRAGMENT_FIELD_NUMBER: _ClassVar[int]
    HELLO_EPOCH_FIELD_NUMBER: _ClassVar[int]
    hello: bytes
    initialization_complete: _tidegate_compute_pb2.ProtoEmpty
    allow_writes: _tidegate_compute_pb2.ProtoEmpty
    update_configuration: ProtoStorageParameters
    run_ingestion: ProtoRunIngestion
    run_sink: ProtoRunSink
    allow_compaction: _tidegate_compute_pb2.ProtoAllowCompaction
    fragment: _tidegate_compute_pb2.ProtoFragment
    hello_epoch: int
    def __init__(self, hello: _Optional[bytes] = ..., initialization_complete: _Optional[_Union[_tidegate_compute_pb2.ProtoEmpty, _Mapping]] = ..., allow_writes: _Optional[_Union[_tidegate_compute_pb2.ProtoEmpty, _Mapping]] = ..., update_configuration: _Optional[_Union[ProtoStorageParameters, _Mapping]] = ..., run_ingestion: _Optional[_Union[ProtoRunIngestion, _Mapping]] = ..., run_sink: _Optional[_Union[ProtoRunSink, _Mapping]] = ..., allow_compaction: _Optional[_Union[_tidegate_compute_pb2.ProtoAllowCompaction, _Mapping]] = ..., fragment: _Optional[_Union[_tidegate_compute_pb2.ProtoFragment, _Mapping]] = ..., hello_epoch: _Optional[int] = ...) -> None: ...

class ProtoStorageFrontierUpper(_message.Message):
    __slots__ = ("id", "upper")
    ID_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    id: str
    upper: _tidegate_compute_pb2.ProtoAntichain
    def __init__(self, id: _Optional[str] = ..., upper: _Optional[_Union[_tidegate_compute_pb2.ProtoAntichain, _Mapping]] = ...) -> None: ...

class ProtoStatusUpdate(_message.Message):
    __slots__ = ("id", "status", "error", "hint")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    HINT_FIELD_NUMBER: _ClassVar[int]
    id: str
    status: ProtoSourceStatus
    error: str
    hint: str
    def __init__(self, id: _Optional[str] = ..., status: _Optional[_Union[ProtoSourceStatus, str]] = ..., error: _Optional[str] = ..., hint: _Optional[str] = ...) -> None: ...

class ProtoSourceStatistics(_message.Message):
    __slots__ = ("messages_received", "bytes_received", "updates_staged", "updates_committed", "snapshot_records_known", "snapshot_records_staged", "offset_known", "offset_committed", "rehydration_latency_ms")
    MESSAGES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    BYTES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    UPDATES_STAGED_FIELD_NUMBER: _ClassVar[int]
    UPDATES_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_RECORDS_KNOWN_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_RECORDS_STAGED_FIELD_NUMBER: _ClassVar[int]
    OFFSET_KNOWN_FIELD_NUMBER: _ClassVar[int]
    OFFSET_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    REHYDRATION_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    messages_received: int
    bytes_received: int
    updates_staged: int
    updates_committed: int
    snapshot_records_known: int
    snapshot_records_staged: int
    offset_known: int
    offset_committed: int
    rehydration_latency_ms: int
    def __init__(self, messages_received: _Optional[int] = ..., bytes_received: _Optional[int] = ..., updates_staged: _Optional[int] = ..., updates_committed: _Optional[int] = ..., snapshot_records_known: _Optional[int] = ..., snapshot_records_staged: _Optional[int] = ..., offset_known: _Optional[int] = ..., offset_committed: _Optional[int] = ..., rehydration_latency_ms: _Optional[int] = ...) -> None: ...

class ProtoSinkStatistics(_message.Message):
    __slots__ = ("updates_staged", "updates_committed", "bytes_staged", "bytes_committed")
    UPDATES_STAGED_FIELD_NUMBER: _ClassVar[int]
    UPDATES_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    BYTES_STAGED_FIELD_NUMBER: _ClassVar[int]
    BYTES_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    updates_staged: int
    updates_committed: int
    bytes_staged: int
    bytes_committed: int
    def __init__(self, updates_staged: _Optional[int] = ..., updates_committed: _Optional[int] = ..., bytes_staged: _Optional[int] = ..., bytes_committed: _Optional[int] = ...) -> None: ...

class ProtoStatisticsUpdate(_message.Message):
    __slots__ = ("id", "source", "sink")
    ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SINK_FIELD_NUMBER: _ClassVar[int]
    id: str
    source: ProtoSourceStatistics
    sink: ProtoSinkStatistics
    def __init__(self, id: _Optional[str] = ..., source: _Optional[_Union[ProtoSourceStatistics, _Mapping]] = ..., sink: _Optional[_Union[ProtoSinkStatistics, _Mapping]] = ...) -> None: ...

class ProtoStorageResponse(_message.Message):
    __slots__ = ("frontier_upper", "dropped_id", "status_update", "statistics_update", "fragment")
    FRONTIER_UPPER_FIELD_NUMBER: _ClassVar[int]
    DROPPED_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_UPDATE_FIELD_NUMBER: _ClassVar[int]
    STATISTICS_UPDATE_FIELD_NUMBER: _ClassVar[int]
    FRAGMENT_FIELD_NUMBER: _ClassVar[int]
    frontier_upper: ProtoStorageFrontierUpper
    dropped_id: str
    status_update: ProtoStatusUpdate
    statistics_update: ProtoStatisticsUpdate
    fragment: _tidegate_compute_pb2.ProtoFragment
    def __init__(self, frontier_upper: _Optional[_Union[ProtoStorageFrontierUpper, _Mapping]] = ..., dropped_id: _Optional[str] = ..., status_update: _Optional[_Union[ProtoStatusUpdate, _Mapping]] = ..., statistics_update: _Optional[_Union[ProtoStatisticsUpdate, _Mapping]] = ..., fragment: _Optional[_Union[_tidegate_compute_pb2.ProtoFragment, _Mapping]] = ...) -> None: ...

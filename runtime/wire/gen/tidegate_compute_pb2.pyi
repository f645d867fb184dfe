from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ProtoPeekTarget(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTO_PEEK_TARGET_INDEX: _ClassVar[ProtoPeekTarget]
    PROTO_PEEK_TARGET_PERSIST: _ClassVar[ProtoPeekTarget]

class ProtoScalarType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTO_SCALAR_TYPE_UNSPECIFIED: _ClassVar[ProtoScalarType]
    PROTO_SCALAR_TYPE_INT64: _ClassVar[ProtoScalarType]
    PROTO_SCALAR_TYPE_FLOAT64: _ClassVar[ProtoScalarType]
    PROTO_SCALAR_TYPE_STRING: _ClassVar[ProtoScalarType]
    PROTO_SCALAR_TYPE_BOOL: _ClassVar[ProtoScalarType]
    PROTO_SCALAR_TYPE_DATE: _ClassVar[ProtoScalarType]
    PROTO_SCALAR_TYPE_TIMESTAMP: _ClassVar[ProtoScalarType]
    PROTO_SCALAR_TYPE_NUMERIC: _ClassVar[ProtoScalarType]
    PROTO_SCALAR_TYPE_INT16: _ClassVar[ProtoScalarType]
    PROTO_SCALAR_TYPE_INT32: _ClassVar[ProtoScalarType]
    PROTO_SCALAR_TYPE_FLOAT32: _ClassVar[ProtoScalarType]

class ProtoUnaryFunc(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTO_UNARY_FUNC_UNSPECIFIED: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_NOT: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_NEG: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_IS_NULL: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_LOWER: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_UPPER: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_LENGTH: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_ABS: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_ROUND: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_TRIM: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_LTRIM: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_RTRIM: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_CEIL: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_FLOOR: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_TRUNC: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_RINT: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_SIGN: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_SQRT: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_CBRT: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_LN: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_LOG10: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_EXP: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_ASCII: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_CHR: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_INITCAP: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_REVERSE: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_OCTET_LENGTH: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_ERROR: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_FLOAT32_TEXT: _ClassVar[ProtoUnaryFunc]
    PROTO_UNARY_FUNC_FLOAT32_NUMERIC: _ClassVar[ProtoUnaryFunc]

class ProtoBinaryFunc(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTO_BINARY_FUNC_UNSPECIFIED: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_ADD: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_SUB: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_MUL: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_DIV: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_MOD: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_EQ: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_NE: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_LT: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_LE: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_GT: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_GE: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_LIKE: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_ILIKE: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_CONCAT: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_ADD_MS: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_SUB_MS: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_ADD_US: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_SUB_US: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_DATE_ADD_DAYS: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_DATE_DIFF: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_POWER: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_LOG: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_ROUND_DIGITS: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_TRUNC_DIGITS: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_LEFT: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_RIGHT: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_REPEAT: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_STRPOS: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_REGEX_MATCH: _ClassVar[ProtoBinaryFunc]
    PROTO_BINARY_FUNC_REGEX_IMATCH: _ClassVar[ProtoBinaryFunc]

class ProtoVariadicFunc(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTO_VARIADIC_FUNC_UNSPECIFIED: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_AND: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_OR: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_COALESCE: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_CONCAT: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_SUBSTRING: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_GREATEST: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_LEAST: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_NULLIF: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_REPLACE: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_LIKE_ESCAPE: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_ILIKE_ESCAPE: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_DATE_TRUNC: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_EXTRACT: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_CONCAT_WS: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_LPAD: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_RPAD: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_TRANSLATE: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_SPLIT_PART: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_REGEXP_REPLACE: _ClassVar[ProtoVariadicFunc]
    PROTO_VARIADIC_FUNC_NUMERIC_TYPMOD: _ClassVar[ProtoVariadicFunc]

class ProtoTemporalOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTO_TEMPORAL_OP_UNSPECIFIED: _ClassVar[ProtoTemporalOp]
    PROTO_TEMPORAL_OP_EQ: _ClassVar[ProtoTemporalOp]
    PROTO_TEMPORAL_OP_LT: _ClassVar[ProtoTemporalOp]
    PROTO_TEMPORAL_OP_LE: _ClassVar[ProtoTemporalOp]
    PROTO_TEMPORAL_OP_GT: _ClassVar[ProtoTemporalOp]
    PROTO_TEMPORAL_OP_GE: _ClassVar[ProtoTemporalOp]

class ProtoJoinKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTO_JOIN_KIND_UNSPECIFIED: _ClassVar[ProtoJoinKind]
    PROTO_JOIN_KIND_INNER: _ClassVar[ProtoJoinKind]
    PROTO_JOIN_KIND_LEFT: _ClassVar[ProtoJoinKind]
    PROTO_JOIN_KIND_RIGHT: _ClassVar[ProtoJoinKind]
    PROTO_JOIN_KIND_FULL: _ClassVar[ProtoJoinKind]

class ProtoAggFunc(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTO_AGG_FUNC_UNSPECIFIED: _ClassVar[ProtoAggFunc]
    PROTO_AGG_FUNC_COUNT: _ClassVar[ProtoAggFunc]
    PROTO_AGG_FUNC_SUM: _ClassVar[ProtoAggFunc]
    PROTO_AGG_FUNC_MIN: _ClassVar[ProtoAggFunc]
    PROTO_AGG_FUNC_MAX: _ClassVar[ProtoAggFunc]
    PROTO_AGG_FUNC_AVG: _ClassVar[ProtoAggFunc]
    PROTO_AGG_FUNC_BOOL_AND: _ClassVar[ProtoAggFunc]
    PROTO_AGG_FUNC_BOOL_OR: _ClassVar[ProtoAggFunc]
    PROTO_AGG_FUNC_STRING_AGG: _ClassVar[ProtoAggFunc]

class ProtoWindowFuncKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTO_WINDOW_FUNC_KIND_UNSPECIFIED: _ClassVar[ProtoWindowFuncKind]
    PROTO_WINDOW_FUNC_KIND_ROW_NUMBER: _ClassVar[ProtoWindowFuncKind]
    PROTO_WINDOW_FUNC_KIND_RANK: _ClassVar[ProtoWindowFuncKind]
    PROTO_WINDOW_FUNC_KIND_DENSE_RANK: _ClassVar[ProtoWindowFuncKind]
    PROTO_WINDOW_FUNC_KIND_LAG: _ClassVar[ProtoWindowFuncKind]
    PROTO_WINDOW_FUNC_KIND_LEAD: _ClassVar[ProtoWindowFuncKind]
    PROTO_WINDOW_FUNC_KIND_FIRST_VALUE: _ClassVar[ProtoWindowFuncKind]
    PROTO_WINDOW_FUNC_KIND_LAST_VALUE: _ClassVar[ProtoWindowFuncKind]
    PROTO_WINDOW_FUNC_KIND_AGGREGATE: _ClassVar[ProtoWindowFuncKind]

class ProtoWindowBoundKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTO_WINDOW_BOUND_KIND_UNSPECIFIED: _ClassVar[ProtoWindowBoundKind]
    PROTO_WINDOW_BOUND_KIND_UNBOUNDED_PRECEDING: _ClassVar[ProtoWindowBoundKind]
    PROTO_WINDOW_BOUND_KIND_PRECEDING: _ClassVar[ProtoWindowBoundKind]
    PROTO_WINDOW_BOUND_KIND_CURRENT_ROW: _ClassVar[ProtoWindowBoundKind]
    PROTO_WINDOW_BOUND_KIND_FOLLOWING: _ClassVar[ProtoWindowBoundKind]
    PROTO_WINDOW_BOUND_KIND_UNBOUNDED_FOLLOWING: _ClassVar[ProtoWindowBoundKind]
PROTO_PEEK_TARGET_INDEX: ProtoPeekTarget
PROTO_PEEK_TARGET_PERSIST: ProtoPeekTarget
PROTO_SCALAR_TYPE_UNSPECIFIED: ProtoScalarType
PROTO_SCALAR_TYPE_INT64: ProtoScalarType
PROTO_SCALAR_TYPE_FLOAT64: ProtoScalarType
PROTO_SCALAR_TYPE_STRING: ProtoScalarType
PROTO_SCALAR_TYPE_BOOL: ProtoScalarType
PROTO_SCALAR_TYPE_DATE: ProtoScalarType
PROTO_SCALAR_TYPE_TIMESTAMP: ProtoScalarType
PROTO_SCALAR_TYPE_NUMERIC: ProtoScalarType
PROTO_SCALAR_TYPE_INT16: ProtoScalarType
PROTO_SCALAR_TYPE_INT32: ProtoScalarType
PROTO_SCALAR_TYPE_FLOAT32: ProtoScalarType
PROTO_UNARY_FUNC_UNSPECIFIED: ProtoUnaryFunc
PROTO_UNARY_FUNC_NOT: ProtoUnaryFunc
PROTO_UNARY_FUNC_NEG: ProtoUnaryFunc
PROTO_UNARY_FUNC_IS_NULL: ProtoUnaryFunc
PROTO_UNARY_FUNC_LOWER: ProtoUnaryFunc
PROTO_UNARY_FUNC_UPPER: ProtoUnaryFunc
PROTO_UNARY_FUNC_LENGTH: ProtoUnaryFunc
PROTO_UNARY_FUNC_ABS: ProtoUnaryFunc
PROTO_UNARY_FUNC_ROUND: ProtoUnaryFunc
PROTO_UNARY_FUNC_TRIM: ProtoUnaryFunc
PROTO_UNARY_FUNC_LTRIM: ProtoUnaryFunc
PROTO_UNARY_FUNC_RTRIM: ProtoUnaryFunc
PROTO_UNARY_FUNC_CEIL: ProtoUnaryFunc
PROTO_UNARY_FUNC_FLOOR: ProtoUnaryFunc
PROTO_UNARY_FUNC_TRUNC: ProtoUnaryFunc
PROTO_UNARY_FUNC_RINT: ProtoUnaryFunc
PROTO_UNARY_FUNC_SIGN: ProtoUnaryFunc
PROTO_UNARY_FUNC_SQRT: ProtoUnaryFunc
PROTO_UNARY_FUNC_CBRT: ProtoUnaryFunc
PROTO_UNARY_FUNC_LN: ProtoUnaryFunc
PROTO_UNARY_FUNC_LOG10: ProtoUnaryFunc
PROTO_UNARY_FUNC_EXP: ProtoUnaryFunc
PROTO_UNARY_FUNC_ASCII: ProtoUnaryFunc
PROTO_UNARY_FUNC_CHR: ProtoUnaryFunc
PROTO_UNARY_FUNC_INITCAP: ProtoUnaryFunc
PROTO_UNARY_FUNC_REVERSE: ProtoUnaryFunc
PROTO_UNARY_FUNC_OCTET_LENGTH: ProtoUnaryFunc
PROTO_UNARY_FUNC_ERROR: ProtoUnaryFunc
PROTO_UNARY_FUNC_FLOAT32_TEXT: ProtoUnaryFunc
PROTO_UNARY_FUNC_FLOAT32_NUMERIC: ProtoUnaryFunc
PROTO_BINARY_FUNC_UNSPECIFIED: ProtoBinaryFunc
PROTO_BINARY_FUNC_ADD: ProtoBinaryFunc
PROTO_BINARY_FUNC_SUB: ProtoBinaryFunc
PROTO_BINARY_FUNC_MUL: ProtoBinaryFunc
PROTO_BINARY_FUNC_DIV: ProtoBinaryFunc
PROTO_BINARY_FUNC_MOD: ProtoBinaryFunc
PROTO_BINARY_FUNC_EQ: ProtoBinaryFunc
PROTO_BINARY_FUNC_NE: ProtoBinaryFunc
PROTO_BINARY_FUNC_LT: ProtoBinaryFunc
PROTO_BINARY_FUNC_LE: ProtoBinaryFunc
PROTO_BINARY_FUNC_GT: ProtoBinaryFunc
PROTO_BINARY_FUNC_GE: ProtoBinaryFunc
PROTO_BINARY_FUNC_LIKE: ProtoBinaryFunc
PROTO_BINARY_FUNC_ILIKE: ProtoBinaryFunc
PROTO_BINARY_FUNC_CONCAT: ProtoBinaryFunc
PROTO_BINARY_FUNC_ADD_MS: ProtoBinaryFunc
PROTO_BINARY_FUNC_SUB_MS: ProtoBinaryFunc
PROTO_BINARY_FUNC_ADD_US: ProtoBinaryFunc
PROTO_BINARY_FUNC_SUB_US: ProtoBinaryFunc
PROTO_BINARY_FUNC_DATE_ADD_DAYS: ProtoBinaryFunc
PROTO_BINARY_FUNC_DATE_DIFF: ProtoBinaryFunc
PROTO_BINARY_FUNC_POWER: ProtoBinaryFunc
PROTO_BINARY_FUNC_LOG: ProtoBinaryFunc
PROTO_BINARY_FUNC_ROUND_DIGITS: ProtoBinaryFunc
PROTO_BINARY_FUNC_TRUNC_DIGITS: ProtoBinaryFunc
PROTO_BINARY_FUNC_LEFT: ProtoBinaryFunc
PROTO_BINARY_FUNC_RIGHT: ProtoBinaryFunc
PROTO_BINARY_FUNC_REPEAT: ProtoBinaryFunc
PROTO_BINARY_FUNC_STRPOS: ProtoBinaryFunc
PROTO_BINARY_FUNC_REGEX_MATCH: ProtoBinaryFunc
PROTO_BINARY_FUNC_REGEX_IMATCH: ProtoBinaryFunc
PROTO_VARIADIC_FUNC_UNSPECIFIED: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_AND: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_OR: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_COALESCE: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_CONCAT: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_SUBSTRING: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_GREATEST: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_LEAST: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_NULLIF: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_REPLACE: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_LIKE_ESCAPE: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_ILIKE_ESCAPE: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_DATE_TRUNC: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_EXTRACT: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_CONCAT_WS: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_LPAD: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_RPAD: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_TRANSLATE: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_SPLIT_PART: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_REGEXP_REPLACE: ProtoVariadicFunc
PROTO_VARIADIC_FUNC_NUMERIC_TYPMOD: ProtoVariadicFunc
PROTO_TEMPORAL_OP_UNSPECIFIED: ProtoTemporalOp
PROTO_TEMPORAL_OP_EQ: ProtoTemporalOp
PROTO_TEMPORAL_OP_LT: ProtoTemporalOp
PROTO_TEMPORAL_OP_LE: ProtoTemporalOp
PROTO_TEMPORAL_OP_GT: ProtoTemporalOp
PROTO_TEMPORAL_OP_GE: ProtoTemporalOp
PROTO_JOIN_KIND_UNSPECIFIED: ProtoJoinKind
PROTO_JOIN_KIND_INNER: ProtoJoinKind
PROTO_JOIN_KIND_LEFT: ProtoJoinKind
PROTO_JOIN_KIND_RIGHT: ProtoJoinKind
PROTO_JOIN_KIND_FULL: ProtoJoinKind
PROTO_AGG_FUNC_UNSPECIFIED: ProtoAggFunc
PROTO_AGG_FUNC_COUNT: ProtoAggFunc
PROTO_AGG_FUNC_SUM: ProtoAggFunc
PROTO_AGG_FUNC_MIN: ProtoAggFunc
PROTO_AGG_FUNC_MAX: ProtoAggFunc
PROTO_AGG_FUNC_AVG: ProtoAggFunc
PROTO_AGG_FUNC_BOOL_AND: ProtoAggFunc
PROTO_AGG_FUNC_BOOL_OR: ProtoAggFunc
PROTO_AGG_FUNC_STRING_AGG: ProtoAggFunc
PROTO_WINDOW_FUNC_KIND_UNSPECIFIED: ProtoWindowFuncKind
PROTO_WINDOW_FUNC_KIND_ROW_NUMBER: ProtoWindowFuncKind
PROTO_WINDOW_FUNC_KIND_RANK: ProtoWindowFuncKind
PROTO_WINDOW_FUNC_KIND_DENSE_RANK: ProtoWindowFuncKind
PROTO_WINDOW_FUNC_KIND_LAG: ProtoWindowFuncKind
PROTO_WINDOW_FUNC_KIND_LEAD: ProtoWindowFuncKind
PROTO_WINDOW_FUNC_KIND_FIRST_VALUE: ProtoWindowFuncKind
PROTO_WINDOW_FUNC_KIND_LAST_VALUE: ProtoWindowFuncKind
PROTO_WINDOW_FUNC_KIND_AGGREGATE: ProtoWindowFuncKind
PROTO_WINDOW_BOUND_KIND_UNSPECIFIED: ProtoWindowBoundKind
PROTO_WINDOW_BOUND_KIND_UNBOUNDED_PRECEDING: ProtoWindowBoundKind
PROTO_WINDOW_BOUND_KIND_PRECEDING: ProtoWindowBoundKind
PROTO_WINDOW_BOUND_KIND_CURRENT_ROW: ProtoWindowBoundKind
PROTO_WINDOW_BOUND_KIND_FOLLOWING: ProtoWindowBoundKind
PROTO_WINDOW_BOUND_KIND_UNBOUNDED_FOLLOWING: ProtoWindowBoundKind

class ProtoEmpty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ProtoTimestamp(_message.Message):
    __slots__ = ("int", "product")
    INT_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    int: int
    product: ProtoProduct
    def __init__(self, int: _Optional[int] = ..., product: _Optional[_Union[ProtoProduct, _Mapping]] = ...) -> None: ...

class ProtoProduct(_message.Message):
    __slots__ = ("outer", "inner")
    OUTER_FIELD_NUMBER: _ClassVar[int]
    INNER_FIELD_NUMBER: _ClassVar[int]
    outer: ProtoTimestamp
    inner: ProtoTimestamp
    def __init__(self, outer: _Optional[_Union[ProtoTimestamp, _Mapping]] = ..., inner: _Optional[_Union[ProtoTimestamp, _Mapping]] = ...) -> None: ...

class ProtoAntichain(_message.Message):
    __slots__ = ("elements",)
    ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    elements: _containers.RepeatedCompositeFieldContainer[ProtoTimestamp]
    def __init__(self, elements: _Optional[_Iterable[_Union[ProtoTimestamp, _Mapping]]] = ...) -> None: ...

class ProtoRows(_message.Message):
    __slots__ = ("arrow_ipc", "arity", "times")
    ARROW_IPC_FIELD_NUMBER: _ClassVar[int]
    ARITY_FIELD_NUMBER: _ClassVar[int]
    TIMES_FIELD_NUMBER: _ClassVar[int]
    arrow_ipc: bytes
    arity: int
    times: _containers.RepeatedCompositeFieldContainer[ProtoTimestamp]
    def __init__(self, arrow_ipc: _Optional[bytes] = ..., arity: _Optional[int] = ..., times: _Optional[_Iterable[_Union[ProtoTimestamp, _Mapping]]] = ...) -> None: ...

class ProtoLogIndex(_message.Message):
    __slots__ = ("variant", "id")
    VARIANT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    variant: str
    id: str
    def __init__(self, variant: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class ProtoLoggingConfig(_message.Message):
    __slots__ = ("interval_ms", "enable_logging", "log_logging", "index_logs")
    INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_LOGGING_FIELD_NUMBER: _ClassVar[int]
    LOG_LOGGING_FIELD_NUMBER: _ClassVar[int]
    INDEX_LOGS_FIELD_NUMBER: _ClassVar[int]
    interval_ms: int
    enable_logging: bool
    log_logging: bool
    index_logs: _containers.RepeatedCompositeFieldContainer[ProtoLogIndex]
    def __init__(self, interval_ms: _Optional[int] = ..., enable_logging: _Optional[bool] = ..., log_logging: _Optional[bool] = ..., index_logs: _Optional[_Iterable[_Union[ProtoLogIndex, _Mapping]]] = ...) -> None: ...

class ProtoInstanceConfig(_message.Message):
    __slots__ = ("logging", "expiration_offset_ms", "peek_stash_location")
    LOGGING_FIELD_NUMBER: _ClassVar[int]
    EXPIRATION_OFFSET_MS_FIELD_NUMBER: _ClassVar[int]
    PEEK_STASH_LOCATION_FIELD_NUMBER: _ClassVar[int]
    logging: ProtoLoggingConfig
    expiration_offset_ms: int
    peek_stash_location: str
    def __init__(self, logging: _Optional[_Union[ProtoLoggingConfig, _Mapping]] = ..., expiration_offset_ms: _Optional[int] = ..., peek_stash_location: _Optional[str] = ...) -> None: ...

class ProtoConfigValue(_message.Message):
    __slots__ = ("bool_value", "int_value", "float_value", "string_value")
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    FLOAT_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    bool_value: bool
    int_value: int
    float_value: float
    string_value: str
    def __init__(self, bool_value: _Optional[bool] = ..., int_value: _Optional[int] = ..., float_value: _Optional[float] = ..., string_value: _Optional[str] = ...) -> None: ...

class ProtoConfigEntry(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: ProtoConfigValue
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[ProtoConfigValue, _Mapping]] = ...) -> None: ...

class ProtoComputeParameters(_message.Message):
    __slots__ = ("max_result_size", "workload_class", "dyncfg_updates")
    MAX_RESULT_SIZE_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_CLASS_FIELD_NUMBER: _ClassVar[int]
    DYNCFG_UPDATES_FIELD_NUMBER: _ClassVar[int]
    max_result_size: int
    workload_class: str
    dyncfg_updates: _containers.RepeatedCompositeFieldContainer[ProtoConfigEntry]
    def __init__(self, max_result_size: _Optional[int] = ..., workload_class: _Optional[str] = ..., dyncfg_updates: _Optional[_Iterable[_Union[ProtoConfigEntry, _Mapping]]] = ...) -> None: ...

class ProtoColumnOrder(_message.Message):
    __slots__ = ("column", "desc", "nulls_last")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    DESC_FIELD_NUMBER: _ClassVar[int]
    NULLS_LAST_FIELD_NUMBER: _ClassVar[int]
    column: int
    desc: bool
    nulls_last: bool
    def __init__(self, column: _Optional[int] = ..., desc: _Optional[bool] = ..., nulls_last: _Optional[bool] = ...) -> None: ...

class ProtoProjection(_message.Message):
    __slots__ = ("columns",)
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, columns: _Optional[_Iterable[int]] = ...) -> None: ...

class ProtoRowSetFinishing(_message.Message):
    __slots__ = ("order_by", "limit", "offset", "project")
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    order_by: _containers.RepeatedCompositeFieldContainer[ProtoColumnOrder]
    limit: int
    offset: int
    project: ProtoProjection
    def __init__(self, order_by: _Optional[_Iterable[_Union[ProtoColumnOrder, _Mapping]]] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ..., project: _Optional[_Union[ProtoProjection, _Mapping]] = ...) -> None: ...

class ProtoPeekDescription(_message.Message):
    __slots__ = ("uuid", "id", "timestamp", "finishing", "target", "literal_constraints")
    UUID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    FINISHING_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    LITERAL_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    uuid: bytes
    id: str
    timestamp: ProtoTimestamp
    finishing: ProtoRowSetFinishing
    target: ProtoPeekTarget
    literal_constraints: ProtoRows
    def __init__(self, uuid: _Optional[bytes] = ..., id: _Optional[str] = ..., timestamp: _Optional[_Union[ProtoTimestamp, _Mapping]] = ..., finishing: _Optional[_Union[ProtoRowSetFinishing, _Mapping]] = ..., target: _Optional[_Union[ProtoPeekTarget, str]] = ..., literal_constraints: _Optional[_Union[ProtoRows, _Mapping]] = ...) -> None: ...

class ProtoSourceImport(_message.Message):
    __slots__ = ("id", "upper", "monotonic", "with_snapshot")
    ID_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    MONOTONIC_FIELD_NUMBER: _ClassVar[int]
    WITH_SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    id: str
    upper: ProtoAntichain
    monotonic: bool
    with_snapshot: bool
    def __init__(self, id: _Optional[str] = ..., upper: _Optional[_Union[ProtoAntichain, _Mapping]] = ..., monotonic: _Optional[bool] = ..., with_snapshot: _Optional[bool] = ...) -> None: ...

class ProtoIndexImport(_message.Message):
    __slots__ = ("id", "on_id", "key", "monotonic")
    ID_FIELD_NUMBER: _ClassVar[int]
    ON_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MONOTONIC_FIELD_NUMBER: _ClassVar[int]
    id: str
    on_id: str
    key: _containers.RepeatedScalarFieldContainer[int]
    monotonic: bool
    def __init__(self, id: _Optional[str] = ..., on_id: _Optional[str] = ..., key: _Optional[_Iterable[int]] = ..., monotonic: _Optional[bool] = ...) -> None: ...

class ProtoColumnType(_message.Message):
    __slots__ = ("scalar", "nullable")
    SCALAR_FIELD_NUMBER: _ClassVar[int]
    NULLABLE_FIELD_NUMBER: _ClassVar[int]
    scalar: ProtoScalarType
    nullable: bool
    def __init__(self, scalar: _Optional[_Union[ProtoScalarType, str]] = ..., nullable: _Optional[bool] = ...) -> None: ...

class ProtoColumn(_message.Message):
    __slots__ = ("name", "type")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: ProtoColumnType
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[ProtoColumnType, _Mapping]] = ...) -> None: ...

class ProtoSchema(_message.Message):
    __slots__ = ("columns",)
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedCompositeFieldContainer[ProtoColumn]
    def __init__(self, columns: _Optional[_Iterable[_Union[ProtoColumn, _Mapping]]] = ...) -> None: ...

class ProtoDatum(_message.Message):
    __slots__ = ("null_value", "int64_value", "float64_value", "string_value", "bool_value", "date_days", "timestamp_micros", "numeric_text")
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT64_VALUE_FIELD_NUMBER: _ClassVar[int]
    FLOAT64_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    DATE_DAYS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MICROS_FIELD_NUMBER: _ClassVar[int]
    NUMERIC_TEXT_FIELD_NUMBER: _ClassVar[int]
    null_value: ProtoEmpty
    int64_value: int
    float64_value: float
    string_value: str
    bool_value: bool
    date_days: int
    timestamp_micros: int
    numeric_text: str
    def __init__(self, null_value: _Optional[_Union[ProtoEmpty, _Mapping]] = ..., int64_value: _Optional[int] = ..., float64_value: _Optional[float] = ..., string_value: _Optional[str] = ..., bool_value: _Optional[bool] = ..., date_days: _Optional[int] = ..., timestamp_micros: _Optional[int] = ..., numeric_text: _Optional[str] = ...) -> None: ...

class ProtoLiteral(_message.Message):
    __slots__ = ("value", "type")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    value: ProtoDatum
    type: ProtoScalarType
    def __init__(self, value: _Optional[_Union[ProtoDatum, _Mapping]] = ..., type: _Optional[_Union[ProtoScalarType, str]] = ...) -> None: ...

class ProtoCallUnary(_message.Message):
    __slots__ = ("func", "expr")
    FUNC_FIELD_NUMBER: _ClassVar[int]
    EXPR_FIELD_NUMBER: _ClassVar[int]
    func: ProtoUnaryFunc
    expr: int
    def __init__(self, func: _Optional[_Union[ProtoUnaryFunc, str]] = ..., expr: _Optional[int] = ...) -> None: ...

class ProtoCallBinary(_message.Message):
    __slots__ = ("func", "left", "right")
    FUNC_FIELD_NUMBER: _ClassVar[int]
    LEFT_FIELD_NUMBER: _ClassVar[int]
    RIGHT_FIELD_NUMBER: _ClassVar[int]
    func: ProtoBinaryFunc
    left: int
    right: int
    def __init__(self, func: _Optional[_Union[ProtoBinaryFunc, str]] = ..., left: _Optional[int] = ..., right: _Optional[int] = ...) -> None: ...

class ProtoCallVariadic(_message.Message):
    __slots__ = ("func", "exprs")
    FUNC_FIELD_NUMBER: _ClassVar[int]
    EXPRS_FIELD_NUMBER: _ClassVar[int]
    func: ProtoVariadicFunc
    exprs: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, func: _Optional[_Union[ProtoVariadicFunc, str]] = ..., exprs: _Optional[_Iterable[int]] = ...) -> None: ...

class ProtoIf(_message.Message):
    __slots__ = ("cond", "then", "els")
    COND_FIELD_NUMBER: _ClassVar[int]
    THEN_FIELD_NUMBER: _ClassVar[int]
    ELS_FIELD_NUMBER: _ClassVar[int]
    cond: int
    then: int
    els: int
    def __init__(self, cond: _Optional[int] = ..., then: _Optional[int] = ..., els: _Optional[int] = ...) -> None: ...

class ProtoCast(_message.Message):
    __slots__ = ("expr", "to")
    EXPR_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    expr: int
    to: ProtoScalarType
    def __init__(self, expr: _Optional[int] = ..., to: _Optional[_Union[ProtoScalarType, str]] = ...) -> None: ...

class ProtoScalarExpr(_message.Message):
    __slots__ = ("column", "literal", "call_unary", "call_binary", "call_variadic", "if_then_else", "cast")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    LITERAL_FIELD_NUMBER: _ClassVar[int]
    CALL_UNARY_FIELD_NUMBER: _ClassVar[int]
    CALL_BINARY_FIELD_NUMBER: _ClassVar[int]
    CALL_VARIADIC_FIELD_NUMBER: _ClassVar[int]
    IF_THEN_ELSE_FIELD_NUMBER: _ClassVar[int]
    CAST_FIELD_NUMBER: _ClassVar[int]
    column: int
    literal: ProtoLiteral
    call_unary: ProtoCallUnary
    call_binary: ProtoCallBinary
    call_variadic: ProtoCallVariadic
    if_then_else: ProtoIf
    cast: ProtoCast
    def __init__(self, column: _Optional[int] = ..., literal: _Optional[_Union[ProtoLiteral, _Mapping]] = ..., call_unary: _Optional[_Union[ProtoCallUnary, _Mapping]] = ..., call_binary: _Optional[_Union[ProtoCallBinary, _Mapping]] = ..., call_variadic: _Optional[_Union[ProtoCallVariadic, _Mapping]] = ..., if_then_else: _Optional[_Union[ProtoIf, _Mapping]] = ..., cast: _Optional[_Union[ProtoCast, _Mapping]] = ...) -> None: ...

class ProtoGet(_message.Message):
    __slots__ = ("id", "schema")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    id: str
    schema: ProtoSchema
    def __init__(self, id: _Optional[str] = ..., schema: _Optional[_Union[ProtoSchema, _Mapping]] = ...) -> None: ...

class ProtoConstantRow(_message.Message):
    __slots__ = ("values", "diff")
    VALUES_FIELD_NUMBER: _ClassVar[int]
    DIFF_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedCompositeFieldContainer[ProtoDatum]
    diff: int
    def __init__(self, values: _Optional[_Iterable[_Union[ProtoDatum, _Mapping]]] = ..., diff: _Optional[int] = ...) -> None: ...

class ProtoConstant(_message.Message):
    __slots__ = ("rows", "schema")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    rows: _containers.RepeatedCompositeFieldContainer[ProtoConstantRow]
    schema: ProtoSchema
    def __init__(self, rows: _Optional[_Iterable[_Union[ProtoConstantRow, _Mapping]]] = ..., schema: _Optional[_Union[ProtoSchema, _Mapping]] = ...) -> None: ...

class ProtoMap(_message.Message):
    __slots__ = ("input", "exprs", "names")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    EXPRS_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    input: int
    exprs: _containers.RepeatedScalarFieldContainer[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, input: _Optional[int] = ..., exprs: _Optional[_Iterable[int]] = ..., names: _Optional[_Iterable[str]] = ...) -> None: ...

class ProtoFilter(_message.Message):
    __slots__ = ("input", "predicates")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    PREDICATES_FIELD_NUMBER: _ClassVar[int]
    input: int
    predicates: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, input: _Optional[int] = ..., predicates: _Optional[_Iterable[int]] = ...) -> None: ...

class ProtoTemporalFilter(_message.Message):
    __slots__ = ("input", "ops", "bounds")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    input: int
    ops: _containers.RepeatedScalarFieldContainer[ProtoTemporalOp]
    bounds: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, input: _Optional[int] = ..., ops: _Optional[_Iterable[_Union[ProtoTemporalOp, str]]] = ..., bounds: _Optional[_Iterable[int]] = ...) -> None: ...

class ProtoProject(_message.Message):
    __slots__ = ("input", "columns")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    input: int
    columns: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, input: _Optional[int] = ..., columns: _Optional[_Iterable[int]] = ...) -> None: ...

class ProtoUnion(_message.Message):
    __slots__ = ("inputs",)
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, inputs: _Optional[_Iterable[int]] = ...) -> None: ...

class ProtoNegate(_message.Message):
    __slots__ = ("input",)
    INPUT_FIELD_NUMBER: _ClassVar[int]
    input: int
    def __init__(self, input: _Optional[int] = ...) -> None: ...

class ProtoEquivalence(_message.Message):
    __slots__ = ("columns",)
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, columns: _Optional[_Iterable[int]] = ...) -> None: ...

class ProtoJoin(_message.Message):
    __slots__ = ("inputs", "equivalences", "kind")
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    EQUIVALENCES_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.RepeatedScalarFieldContainer[int]
    equivalences: _containers.RepeatedCompositeFieldContainer[ProtoEquivalence]
    kind: ProtoJoinKind
    def __init__(self, inputs: _Optional[_Iterable[int]] = ..., equivalences: _Optional[_Iterable[_Union[ProtoEquivalence, _Mapping]]] = ..., kind: _Optional[_Union[ProtoJoinKind, str]] = ...) -> None: ...

class ProtoAggregate(_message.Message):
    __slots__ = ("func", "column", "distinct", "separator")
    FUNC_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    DISTINCT_FIELD_NUMBER: _ClassVar[int]
    SEPARATOR_FIELD_NUMBER: _ClassVar[int]
    func: ProtoAggFunc
    column: int
    distinct: bool
    separator: str
    def __init__(self, func: _Optional[_Union[ProtoAggFunc, str]] = ..., column: _Optional[int] = ..., distinct: _Optional[bool] = ..., separator: _Optional[str] = ...) -> None: ...

class ProtoReduce(_message.Message):
    __slots__ = ("input", "group_key", "aggregates")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    GROUP_KEY_FIELD_NUMBER: _ClassVar[int]
    AGGREGATES_FIELD_NUMBER: _ClassVar[int]
    input: int
    group_key: _containers.RepeatedScalarFieldContainer[int]
    aggregates: _containers.RepeatedCompositeFieldContainer[ProtoAggregate]
    def __init__(self, input: _Optional[int] = ..., group_key: _Optional[_Iterable[int]] = ..., aggregates: _Optional[_Iterable[_Union[ProtoAggregate, _Mapping]]] = ...) -> None: ...

class ProtoDistinct(_message.Message):
    __slots__ = ("input",)
    INPUT_FIELD_NUMBER: _ClassVar[int]
    input: int
    def __init__(self, input: _Optional[int] = ...) -> None: ...

class ProtoThreshold(_message.Message):
    __slots__ = ("input",)
    INPUT_FIELD_NUMBER: _ClassVar[int]
    input: int
    def __init__(self, input: _Optional[int] = ...) -> None: ...

class ProtoTopK(_message.Message):
    __slots__ = ("input", "group_key", "order_by", "limit", "offset")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    GROUP_KEY_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    input: int
    group_key: _containers.RepeatedScalarFieldContainer[int]
    order_by: _containers.RepeatedCompositeFieldContainer[ProtoColumnOrder]
    limit: int
    offset: int
    def __init__(self, input: _Optional[int] = ..., group_key: _Optional[_Iterable[int]] = ..., order_by: _Optional[_Iterable[_Union[ProtoColumnOrder, _Mapping]]] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class ProtoWindowBound(_message.Message):
    __slots__ = ("kind", "rows", "value")
    KIND_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    kind: ProtoWindowBoundKind
    rows: int
    value: float
    def __init__(self, kind: _Optional[_Union[ProtoWindowBoundKind, str]] = ..., rows: _Optional[int] = ..., value: _Optional[float] = ...) -> None: ...

class ProtoWindowFrame(_message.Message):
    __slots__ = ("range", "start", "end")
    RANGE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    range: bool
    start: ProtoWindowBound
    end: ProtoWindowBound
    def __init__(self, range: _Optional[bool] = ..., start: _Optional[_Union[ProtoWindowBound, _Mapping]] = ..., end: _Optional[_Union[ProtoWindowBound, _Mapping]] = ...) -> None: ...

class ProtoWindowFunc(_message.Message):
    __slots__ = ("kind", "column", "offset", "default", "aggregate", "frame")
    KIND_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    AGGREGATE_FIELD_NUMBER: _ClassVar[int]
    FRAME_FIELD_NUMBER: _ClassVar[int]
    kind: ProtoWindowFuncKind
    column: int
    offset: int
    default: int
    aggregate: ProtoAggregate
    frame: ProtoWindowFrame
    def __init__(self, kind: _Optional[_Union[ProtoWindowFuncKind, str]] = ..., column: _Optional[int] = ..., offset: _Optional[int] = ..., default: _Optional[int] = ..., aggregate: _Optional[_Union[ProtoAggregate, _Mapping]] = ..., frame: _Optional[_Union[ProtoWindowFrame, _Mapping]] = ...) -> None: ...

class ProtoWindow(_message.Message):
    __slots__ = ("input", "partition_key", "order_by", "funcs")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    FUNCS_FIELD_NUMBER: _ClassVar[int]
    input: int
    partition_key: _containers.RepeatedScalarFieldContainer[int]
    order_by: _containers.RepeatedCompositeFieldContainer[ProtoColumnOrder]
    funcs: _containers.RepeatedCompositeFieldContainer[ProtoWindowFunc]
    def __init__(self, input: _Optional[int] = ..., partition_key: _Optional[_Iterable[int]] = ..., order_by: _Optional[_Iterable[_Union[ProtoColumnOrder, _Mapping]]] = ..., funcs: _Optional[_Iterable[_Union[ProtoWindowFunc, _Mapping]]] = ...) -> None: ...

class ProtoArrangeKey(_message.Message):
    __slots__ = ("columns",)
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, columns: _Optional[_Iterable[int]] = ...) -> None: ...

class ProtoArrangeBy(_message.Message):
    __slots__ = ("input", "keys")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    input: int
    keys: _containers.RepeatedCompositeFieldContainer[ProtoArrangeKey]
    def __init__(self, input: _Optional[int] = ..., keys: _Optional[_Iterable[_Union[ProtoArrangeKey, _Mapping]]] = ...) -> None: ...

class ProtoLet(_message.Message):
    __slots__ = ("name", "value", "body")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: int
    body: int
    def __init__(self, name: _Optional[str] = ..., value: _Optional[int] = ..., body: _Optional[int] = ...) -> None: ...

class ProtoLetRef(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ProtoPlanNode(_message.Message):
    __slots__ = ("get", "constant", "map", "filter", "project", "union", "negate", "join", "reduce", "distinct", "threshold", "top_k", "arrange_by", "let", "let_ref", "window", "temporal_filter")
    GET_FIELD_NUMBER: _ClassVar[int]
    CONSTANT_FIELD_NUMBER: _ClassVar[int]
    MAP_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    UNION_FIELD_NUMBER: _ClassVar[int]
    NEGATE_FIELD_NUMBER: _ClassVar[int]
    JOIN_FIELD_NUMBER: _ClassVar[int]
    REDUCE_FIELD_NUMBER: _ClassVar[int]
    DISTINCT_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    ARRANGE_BY_FIELD_NUMBER: _ClassVar[int]
    LET_FIELD_NUMBER: _ClassVar[int]
    LET_REF_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    TEMPORAL_FILTER_FIELD_NUMBER: _ClassVar[int]
    get: ProtoGet
    constant: ProtoConstant
    map: ProtoMap
    filter: ProtoFilter
    project: ProtoProject
    union: ProtoUnion
    negate: ProtoNegate
    join: ProtoJoin
    reduce: ProtoReduce
    distinct: ProtoDistinct
    threshold: ProtoThreshold
    top_k: ProtoTopK
    arrange_by: ProtoArrangeBy
    let: ProtoLet
    let_ref: ProtoLetRef
    window: ProtoWindow
    temporal_filter: ProtoTemporalFilter
    def __init__(self, get: _Optional[_Union[ProtoGet, _Mapping]] = ..., constant: _Optional[_Union[ProtoConstant, _Mapping]] = ..., map: _Optional[_Union[ProtoMap, _Mapping]] = ..., filter: _Optional[_Union[ProtoFilter, _Mapping]] = ..., project: _Optional[_Union[ProtoProject, _Mapping]] = ..., union: _Optional[_Union[ProtoUnion, _Mapping]] = ..., negate: _Optional[_Union[ProtoNegate, _Mapping]] = ..., join: _Optional[_Union[ProtoJoin, _Mapping]] = ..., reduce: _Optional[_Union[ProtoReduce, _Mapping]] = ..., distinct: _Optional[_Union[ProtoDistinct, _Mapping]] = ..., threshold: _Optional[_Union[ProtoThreshold, _Mapping]] = ..., top_k: _Optional[_Union[ProtoTopK, _Mapping]] = ..., arrange_by: _Optional[_Union[ProtoArrangeBy, _Mapping]] = ..., let: _Optional[_Union[ProtoLet, _Mapping]] = ..., let_ref: _Optional[_Union[ProtoLetRef, _Mapping]] = ..., window: _Optional[_Union[ProtoWindow, _Mapping]] = ..., temporal_filter: _Optional[_Union[ProtoTemporalFilter, _Mapping]] = ...) -> None: ...

class ProtoPlan(_message.Message):
    __slots__ = ("exprs", "nodes")
    EXPRS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    exprs: _containers.RepeatedCompositeFieldContainer[ProtoScalarExpr]
    nodes: _containers.RepeatedCompositeFieldContainer[ProtoPlanNode]
    def __init__(self, exprs: _Optional[_Iterable[_Union[ProtoScalarExpr, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[ProtoPlanNode, _Mapping]]] = ...) -> None: ...

class ProtoBuildDesc(_message.Message):
    __slots__ = ("id", "plan")
    ID_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    id: str
    plan: ProtoPlan
    def __init__(self, id: _Optional[str] = ..., plan: _Optional[_Union[ProtoPlan, _Mapping]] = ...) -> None: ...

class ProtoIndexExport(_message.Message):
    __slots__ = ("id", "on_id", "key")
    ID_FIELD_NUMBER: _ClassVar[int]
    ON_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    id: str
    on_id: str
    key: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, id: _Optional[str] = ..., on_id: _Optional[str] = ..., key: _Optional[_Iterable[int]] = ...) -> None: ...

class ProtoSinkExport(_message.Message):
    __slots__ = ("id", "from_id", "subscribe", "materialized_view", "copy_to", "with_snapshot", "up_to")
    ID_FIELD_NUMBER: _ClassVar[int]
    FROM_ID_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    MATERIALIZED_VIEW_FIELD_NUMBER: _ClassVar[int]
    COPY_TO_FIELD_NUMBER: _ClassVar[int]
    WITH_SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    UP_TO_FIELD_NUMBER: _ClassVar[int]
    id: str
    from_id: str
    subscribe: ProtoEmpty
    materialized_view: ProtoEmpty
    copy_to: ProtoCopyToConnection
    with_snapshot: bool
    up_to: ProtoAntichain
    def __init__(self, id: _Optional[str] = ..., from_id: _Optional[str] = ..., subscribe: _Optional[_Union[ProtoEmpty, _Mapping]] = ..., materialized_view: _Optional[_Union[ProtoEmpty, _Mapping]] = ..., copy_to: _Optional[_Union[ProtoCopyToConnection, _Mapping]] = ..., with_snapshot: _Optional[bool] = ..., up_to: _Optional[_Union[ProtoAntichain, _Mapping]] = ...) -> None: ...

class ProtoCopyToConnection(_message.Message):
    __slots__ = ("url",)
    URL_FIELD_NUMBER: _ClassVar[int]
    url: str
    def __init__(self, url: _Optional[str] = ...) -> None: ...

class ProtoDataflowDescription(_message.Message):
    __slots__ = ("debug_name", "source_imports", "index_imports", "objects_to_build", "index_exports", "sink_exports", "as_of", "until")
    DEBUG_NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_IMPORTS_FIELD_NUMBER: _ClassVar[int]
    INDEX_IMPORTS_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_TO_BUILD_FIELD_NUMBER: _ClassVar[int]
    INDEX_EXPORTS_FIELD_NUMBER: _ClassVar[int]
    SINK_EXPORTS_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    debug_name: str
    source_imports: _containers.RepeatedCompositeFieldContainer[ProtoSourceImport]
    index_imports: _containers.RepeatedCompositeFieldContainer[ProtoIndexImport]
    objects_to_build: _containers.RepeatedCompositeFieldContainer[ProtoBuildDesc]
    index_exports: _containers.RepeatedCompositeFieldContainer[ProtoIndexExport]
    sink_exports: _containers.RepeatedCompositeFieldContainer[ProtoSinkExport]
    as_of: ProtoAntichain
    until: ProtoAntichain
    def __init__(self, debug_name: _Optional[str] = ..., source_imports: _Optional[_Iterable[_Union[ProtoSourceImport, _Mapping]]] = ..., index_imports: _Optional[_Iterable[_Union[ProtoIndexImport, _Mapping]]] = ..., objects_to_build: _Optional[_Iterable[_Union[ProtoBuildDesc, _Mapping]]] = ..., index_exports: _Optional[_Iterable[_Union[ProtoIndexExport, _Mapping]]] = ..., sink_exports: _Optional[_Iterable[_Union[ProtoSinkExport, _Mapping]]] = ..., as_of: _Optional[_Union[ProtoAntichain, _Mapping]] = ..., until: _Optional[_Union[ProtoAntichain, _Mapping]] = ...) -> None: ...

class ProtoAllowCompaction(_message.Message):
    __slots__ = ("id", "frontier")
    ID_FIELD_NUMBER: _ClassVar[int]
    FRONTIER_FIELD_NUMBER: _ClassVar[int]
    id: str
    frontier: ProtoAntichain
    def __init__(self, id: _Optional[str] = ..., frontier: _Optional[_Union[ProtoAntichain, _Mapping]] = ...) -> None: ...

class ProtoComputeCommand(_message.Message):
    __slots__ = ("hello", "create_instance", "initialization_complete", "allow_writes", "update_configuration", "create_dataflow", "schedule", "allow_compaction", "peek", "cancel_peek", "fragment", "hello_epoch")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    CREATE_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    INITIALIZATION_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    ALLOW_WRITES_FIELD_NUMBER: _ClassVar[int]
    UPDATE_CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    CREATE_DATAFLOW_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    ALLOW_COMPACTION_FIELD_NUMBER: _ClassVar[int]
    PEEK_FIELD_NUMBER: _ClassVar[int]
    CANCEL_PEEK_FIELD_NUMBER: _ClassVar[int]
    FRAGMENT_FIELD_NUMBER: _ClassVar[int]
    HELLO_EPOCH_FIELD_NUMBER: _ClassVar[int]
    hello: bytes
    create_instance: ProtoInstanceConfig
    initialization_complete: ProtoEmpty
    allow_writes: str
    update_configuration: ProtoComputeParameters
    create_dataflow: ProtoDataflowDescription
    schedule: str
    allow_compaction: ProtoAllowCompaction
    peek: ProtoPeekDescription
    cancel_peek: bytes
    fragment: ProtoFragment
    hello_epoch: int
    def __init__(self, hello: _Optional[bytes] = ..., create_instance: _Optional[_Union[ProtoInstanceConfig, _Mapping]] = ..., initialization_complete: _Optional[_Union[ProtoEmpty, _Mapping]] = ..., allow_writes: _Optional[str] = ..., update_configuration: _Optional[_Union[ProtoComputeParameters, _Mapping]] = ..., create_dataflow: _Optional[_Union[ProtoDataflowDescription, _Mapping]] = ..., schedule: _Optional[str] = ..., allow_compaction: _Optional[_Union[ProtoAllowCompaction, _Mapping]] = ..., peek: _Optional[_Union[ProtoPeekDescription, _Mapping]] = ..., cancel_peek: _Optional[bytes] = ..., fragment: _Optional[_Union[ProtoFragment, _Mapping]] = ..., hello_epoch: _Optional[int] = ...) -> None: ...

class ProtoFragment(_message.Message):
    __slots__ = ("data", "more")
    DATA_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    more: bool
    def __init__(self, data: _Optional[bytes] = ..., more: _Optional[bool] = ...) -> None: ...

class ProtoFrontiers(_message.Message):
    __slots__ = ("id", "write", "input", "output")
    ID_FIELD_NUMBER: _ClassVar[int]
    WRITE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    id: str
    write: ProtoAntichain
    input: ProtoAntichain
    output: ProtoAntichain
    def __init__(self, id: _Optional[str] = ..., write: _Optional[_Union[ProtoAntichain, _Mapping]] = ..., input: _Optional[_Union[ProtoAntichain, _Mapping]] = ..., output: _Optional[_Union[ProtoAntichain, _Mapping]] = ...) -> None: ...

class ProtoPeekResponse(_message.Message):
    __slots__ = ("uuid", "rows", "error", "canceled")
    UUID_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CANCELED_FIELD_NUMBER: _ClassVar[int]
    uuid: bytes
    rows: ProtoRows
    error: str
    canceled: ProtoEmpty
    def __init__(self, uuid: _Optional[bytes] = ..., rows: _Optional[_Union[ProtoRows, _Mapping]] = ..., error: _Optional[str] = ..., canceled: _Optional[_Union[ProtoEmpty, _Mapping]] = ...) -> None: ...

class ProtoSubscribeBatch(_message.Message):
    __slots__ = ("lower", "upper", "updates", "error")
    LOWER_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    lower: ProtoAntichain
    upper: ProtoAntichain
    updates: ProtoRows
    error: str
    def __init__(self, lower: _Optional[_Union[ProtoAntichain, _Mapping]] = ..., upper: _Optional[_Union[ProtoAntichain, _Mapping]] = ..., updates: _Optional[_Union[ProtoRows, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class ProtoSubscribeResponse(_message.Message):
    __slots__ = ("id", "batch", "dropped_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    DROPPED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    batch: ProtoSubscribeBatch
    dropped_at: ProtoAntichain
    def __init__(self, id: _Optional[str] = ..., batch: _Optional[_Union[ProtoSubscribeBatch, _Mapping]] = ..., dropped_at: _Optional[_Union[ProtoAntichain, _Mapping]] = ...) -> None: ...

class ProtoStatus(_message.Message):
    __slots__ = ("id", "message")
    ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    id: str
    message: str
    def __init__(self, id: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ProtoCopyToResponse(_message.Message):
    __slots__ = ("id", "row_count", "error", "dropped")
    ID_FIELD_NUMBER: _ClassVar[int]
    ROW_COUNT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    id: str
    row_count: int
    error: str
    dropped: ProtoEmpty
    def __init__(self, id: _Optional[str] = ..., row_count: _Optional[int] = ..., error: _Optional[str] = ..., dropped: _Optional[_Union[ProtoEmpty, _Mapping]] = ...) -> None: ...

class ProtoComputeResponse(_message.Message):
    __slots__ = ("frontiers", "peek_response", "subscribe_response", "status", "fragment", "copy_to_response")
    FRONTIERS_FIELD_NUMBER: _ClassVar[int]
    PEEK_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBE_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FRAGMENT_FIELD_NUMBER: _ClassVar[int]
    COPY_TO_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    frontiers: ProtoFrontiers
    peek_response: ProtoPeekResponse
    subscribe_response: ProtoSubscribeResponse
    status: ProtoStatus
    fragment: ProtoFragment
    copy_to_response: ProtoCopyToResponse
    def __init__(self, frontiers: _Optional[_Union[ProtoFrontiers, _Mapping]] = ..., peek_response: _Optional[_Union[ProtoPeekResponse, _Mapping]] = ..., subscribe_response: _Optional[_Union[ProtoSubscribeResponse, _Mapping]] = ..., status: _Optional[_Union[ProtoStatus, _Mapping]] = ..., fragment: _Optional[_Union[ProtoFragment, _Mapping]] = ..., copy_to_response: _Optional[_Union[ProtoCopyToResponse, _Mapping]] = ...) -> None: ...

from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ScoreRequest(_message.Message):
    __slots__ = ("model", "version", "token_bytes", "token_offsets", "source", "span_start", "span_end", "target_offsets", "target_tokens", "align_offsets", "align_source", "align_target", "context_blocks")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOKEN_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SPAN_START_FIELD_NUMBER: _ClassVar[int]
    SPAN_END_FIELD_NUMBER: _ClassVar[int]
    TARGET_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    TARGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ALIGN_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    ALIGN_SOURCE_FIELD_NUMBER: _ClassVar[int]
    ALIGN_TARGET_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    model: str
    version: int
    token_bytes: bytes
    token_offsets: _containers.RepeatedScalarFieldContainer[int]
    source: _containers.RepeatedScalarFieldContainer[int]
    span_start: _containers.RepeatedScalarFieldContainer[int]
    span_end: _containers.RepeatedScalarFieldContainer[int]
    target_offsets: _containers.RepeatedScalarFieldContainer[int]
    target_tokens: _containers.RepeatedScalarFieldContainer[int]
    align_offsets: _containers.RepeatedScalarFieldContainer[int]
    align_source: _containers.RepeatedScalarFieldContainer[int]
    align_target: _containers.RepeatedScalarFieldContainer[int]
    context_blocks: bool
    def __init__(self, model: _Optional[str] = ..., version: _Optional[int] = ..., token_bytes: _Optional[bytes] = ..., token_offsets: _Optional[_Iterable[int]] = ..., source: _Optional[_Iterable[int]] = ..., span_start: _Optional[_Iterable[int]] = ..., span_end: _Optional[_Iterable[int]] = ..., target_offsets: _Optional[_Iterable[int]] = ..., target_tokens: _Optional[_Iterable[int]] = ..., align_offsets: _Optional[_Iterable[int]] = ..., align_source: _Optional[_Iterable[int]] = ..., align_target: _Optional[_Iterable[int]] = ..., context_blocks: _Optional[bool] = ...) -> None: ...

class ScoreResponse(_message.Message):
    __slots__ = ("model", "version", "outputs", "probabilities", "scores", "neighbour", "boundary")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    NEIGHBOUR_FIELD_NUMBER: _ClassVar[int]
    BOUNDARY_FIELD_NUMBER: _ClassVar[int]
    model: str
    version: int
    outputs: _containers.RepeatedScalarFieldContainer[str]
    probabilities: _containers.RepeatedScalarFieldContainer[float]
    scores: _containers.RepeatedScalarFieldContainer[float]
    neighbour: _containers.RepeatedScalarFieldContainer[float]
    boundary: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, model: _Optional[str] = ..., version: _Optional[int] = ..., outputs: _Optional[_Iterable[str]] = ..., probabilities: _Optional[_Iterable[float]] = ..., scores: _Optional[_Iterable[float]] = ..., neighbour: _Optional[_Iterable[float]] = ..., boundary: _Optional[_Iterable[float]] = ...) -> None: ...

class GetModelRequest(_message.Message):
    __slots__ = ("model", "version")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    model: str
    version: int
    def __init__(self, model: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class VersionStatus(_message.Message):
    __slots__ = ("version", "state", "message")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    version: int
    state: str
    message: str
    def __init__(self, version: _Optional[int] = ..., state: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("name", "moses_type", "classes", "directions", "outputs", "family", "version", "loaded_versions", "status", "metadata_json", "context")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MOSES_TYPE_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    DIRECTIONS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LOADED_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    name: str
    moses_type: str
    classes: _containers.RepeatedScalarFieldContainer[str]
    directions: _containers.RepeatedScalarFieldContainer[str]
    outputs: _containers.RepeatedScalarFieldContainer[str]
    family: str
    version: int
    loaded_versions: _containers.RepeatedScalarFieldContainer[int]
    status: _containers.RepeatedCompositeFieldContainer[VersionStatus]
    metadata_json: str
    context: bool
    def __init__(self, name: _Optional[str] = ..., moses_type: _Optional[str] = ..., classes: _Optional[_Iterable[str]] = ..., directions: _Optional[_Iterable[str]] = ..., outputs: _Optional[_Iterable[str]] = ..., family: _Optional[str] = ..., version: _Optional[int] = ..., loaded_versions: _Optional[_Iterable[int]] = ..., status: _Optional[_Iterable[_Union[VersionStatus, _Mapping]]] = ..., metadata_json: _Optional[str] = ..., context: _Optional[bool] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ...) -> None: ...

class ReloadRequest(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: str
    def __init__(self, model: _Optional[str] = ...) -> None: ...

class ReloadResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ...) -> None: ...

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ApprovalMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    APPROVAL_MODE_UNSPECIFIED: _ClassVar[ApprovalMode]
    REJECT_DANGEROUS_TOOLS: _ClassVar[ApprovalMode]
    AUTO_APPROVE: _ClassVar[ApprovalMode]
APPROVAL_MODE_UNSPECIFIED: ApprovalMode
REJECT_DANGEROUS_TOOLS: ApprovalMode
AUTO_APPROVE: ApprovalMode

class ClientRequest(_message.Message):
    __slots__ = ("start_request", "prompt")
    START_REQUEST_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    start_request: StartRequest
    prompt: str
    def __init__(self, start_request: _Optional[_Union[StartRequest, _Mapping]] = ..., prompt: _Optional[str] = ...) -> None: ...

class ServerResponse(_message.Message):
    __slots__ = ("session_info", "text_response", "thought_response", "tool_started", "tool_ended", "error", "agent_started", "agent_finished", "agent_text", "agent_thought")
    SESSION_INFO_FIELD_NUMBER: _ClassVar[int]
    TEXT_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    THOUGHT_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    TOOL_STARTED_FIELD_NUMBER: _ClassVar[int]
    TOOL_ENDED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    AGENT_STARTED_FIELD_NUMBER: _ClassVar[int]
    AGENT_FINISHED_FIELD_NUMBER: _ClassVar[int]
    AGENT_TEXT_FIELD_NUMBER: _ClassVar[int]
    AGENT_THOUGHT_FIELD_NUMBER: _ClassVar[int]
    session_info: SessionInfo
    text_response: TextResponse
    thought_response: ThoughtResponse
    tool_started: ToolStartedResponse
    tool_ended: ToolEndedResponse
    error: ErrorResponse
    agent_started: AgentStartedResponse
    agent_finished: AgentFinishedResponse
    agent_text: AgentTextResponse
    agent_thought: AgentThoughtResponse
    def __init__(self, session_info: _Optional[_Union[SessionInfo, _Mapping]] = ..., text_response: _Optional[_Union[TextResponse, _Mapping]] = ..., thought_response: _Optional[_Union[ThoughtResponse, _Mapping]] = ..., tool_started: _Optional[_Union[ToolStartedResponse, _Mapping]] = ..., tool_ended: _Optional[_Union[ToolEndedResponse, _Mapping]] = ..., error: _Optional[_Union[ErrorResponse, _Mapping]] = ..., agent_started: _Optional[_Union[AgentStartedResponse, _Mapping]] = ..., agent_finished: _Optional[_Union[AgentFinishedResponse, _Mapping]] = ..., agent_text: _Optional[_Union[AgentTextResponse, _Mapping]] = ..., agent_thought: _Optional[_Union[AgentThoughtResponse, _Mapping]] = ...) -> None: ...

class StartRequest(_message.Message):
    __slots__ = ("session_id", "prompt", "model", "approval_mode", "core_tools", "exclude_tools", "advanced_config")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_MODE_FIELD_NUMBER: _ClassVar[int]
    CORE_TOOLS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_TOOLS_FIELD_NUMBER: _ClassVar[int]
    ADVANCED_CONFIG_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    prompt: str
    model: str
    approval_mode: ApprovalMode
    core_tools: _containers.RepeatedScalarFieldContainer[str]
    exclude_tools: _containers.RepeatedScalarFieldContainer[str]
    advanced_config: _struct_pb2.Struct
    def __init__(self, session_id: _Optional[str] = ..., prompt: _Optional[str] = ..., model: _Optional[str] = ..., approval_mode: _Optional[_Union[ApprovalMode, str]] = ..., core_tools: _Optional[_Iterable[str]] = ..., exclude_tools: _Optional[_Iterable[str]] = ..., advanced_config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SessionInfo(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class TextResponse(_message.Message):
    __slots__ = ("content",)
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    content: str
    def __init__(self, content: _Optional[str] = ...) -> None: ...

class ThoughtResponse(_message.Message):
    __slots__ = ("thought",)
    THOUGHT_FIELD_NUMBER: _ClassVar[int]
    thought: str
    def __init__(self, thought: _Optional[str] = ...) -> None: ...

class ToolStartedResponse(_message.Message):
    __slots__ = ("name", "args", "agent_id", "call_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    args: _struct_pb2.Struct
    agent_id: int
    call_id: str
    def __init__(self, name: _Optional[str] = ..., args: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., agent_id: _Optional[int] = ..., call_id: _Optional[str] = ...) -> None: ...

class ToolEndedResponse(_message.Message):
    __slots__ = ("name", "result_summary", "agent_id", "call_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESULT_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    result_summary: str
    agent_id: int
    call_id: str
    def __init__(self, name: _Optional[str] = ..., result_summary: _Optional[str] = ..., agent_id: _Optional[int] = ..., call_id: _Optional[str] = ...) -> None: ...

class ErrorResponse(_message.Message):
    __slots__ = ("message", "code")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    message: str
    code: int
    def __init__(self, message: _Optional[str] = ..., code: _Optional[int] = ...) -> None: ...

class AgentStartedResponse(_message.Message):
    __slots__ = ("agent_id", "name", "parent_call_id", "model", "task", "tools", "refused_tools")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARENT_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    agent_id: int
    name: str
    parent_call_id: str
    model: str
    task: str
    tools: _containers.RepeatedScalarFieldContainer[str]
    refused_tools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, agent_id: _Optional[int] = ..., name: _Optional[str] = ..., parent_call_id: _Optional[str] = ..., model: _Optional[str] = ..., task: _Optional[str] = ..., tools: _Optional[_Iterable[str]] = ..., refused_tools: _Optional[_Iterable[str]] = ...) -> None: ...

class AgentFinishedResponse(_message.Message):
    __slots__ = ("agent_id", "name", "parent_call_id", "outcome", "turns", "tool_calls", "summary", "usage")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARENT_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    agent_id: int
    name: str
    parent_call_id: str
    outcome: str
    turns: int
    tool_calls: int
    summary: str
    usage: TokenUsage
    def __init__(self, agent_id: _Optional[int] = ..., name: _Optional[str] = ..., parent_call_id: _Optional[str] = ..., outcome: _Optional[str] = ..., turns: _Optional[int] = ..., tool_calls: _Optional[int] = ..., summary: _Optional[str] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ...) -> None: ...

class AgentTextResponse(_message.Message):
    __slots__ = ("agent_id", "content")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    agent_id: int
    content: str
    def __init__(self, agent_id: _Optional[int] = ..., content: _Optional[str] = ...) -> None: ...

class AgentThoughtResponse(_message.Message):
    __slots__ = ("agent_id", "thought")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    THOUGHT_FIELD_NUMBER: _ClassVar[int]
    agent_id: int
    thought: str
    def __init__(self, agent_id: _Optional[int] = ..., thought: _Optional[str] = ...) -> None: ...

class TokenUsage(_message.Message):
    __slots__ = ("prompt_tokens", "output_tokens", "thinking_tokens", "cached_tokens", "total_tokens", "tool_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    THINKING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOOL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    output_tokens: int
    thinking_tokens: int
    cached_tokens: int
    total_tokens: int
    tool_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., thinking_tokens: _Optional[int] = ..., cached_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., tool_tokens: _Optional[int] = ...) -> None: ...

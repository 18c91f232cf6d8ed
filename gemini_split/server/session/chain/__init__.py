"""The agent chain (model turn → tool calls → model …), public: a request
runs it for its main agent, a sub-agent for its own. It knows no feature:
what a request plugs in (steps around a tool call, observers around a
model turn) is handed to :func:`run_chain`."""

from .chain import TurnLimitExceeded, answer_calls, function_response, run_chain, run_tools, spend_turn
from .model_turn import merge_text_parts, model_turn
from .state import AfterTurn, AgentRun, ApiTally, BeforeTurn, CallTool, Emit, Step, TurnBudget, api_error_type

__all__ = ["AfterTurn", "AgentRun", "ApiTally", "BeforeTurn", "CallTool", "Emit", "Step", "TurnBudget",
           "TurnLimitExceeded", "answer_calls", "api_error_type", "function_response", "merge_text_parts", "model_turn",
           "run_chain", "run_tools", "spend_turn"]

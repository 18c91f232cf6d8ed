"""The names of the one-shot output formats (``--output-format``).

A leaf module, so the command-line parser can offer them without loading the
renderers (and the protocol) in :mod:`gemini_split.ui.oneshot`.
"""

OUTPUT_FORMATS = ("text", "json", "stream-json")


# gemini-cli's names for a failed tool call (its ToolErrorType), by
# gemini-split's ToolFailure.code; stream-json shows these so a script
# written against gemini-cli reads the same words. The wire keeps its codes.
_GEMINI_CLI_ERROR_TYPES = {
    "unknown_tool": "tool_not_registered",
    "invalid_arguments": "invalid_tool_params",
    "invalid_path": "invalid_tool_params",
    "invalid_pattern": "invalid_tool_params",
    "invalid_url": "invalid_tool_params",
    "refused": "policy_violation",
    "not_approved": "policy_violation",
    "outside_workspace": "path_not_in_workspace",
    "address_refused": "policy_violation",
    "not_found": "file_not_found",
    "not_a_directory": "path_is_not_a_directory",
    "is_a_directory": "target_is_directory",
    "permission_denied": "permission_denied",
    "too_large": "file_too_large",
    "file_too_large": "file_too_large",
    "file_exists": "attempt_to_create_existing_file",
    "no_match": "edit_no_occurrence_found",
    "multiple_matches": "edit_expected_occurrence_mismatch",
    "no_change": "edit_no_change",
    "write_failed": "file_write_failure",
    "read_failed": "read_content_failure",
    "binary_file": "read_content_failure",
    "not_a_regular_file": "read_content_failure",
    "mcp_error": "mcp_tool_error",
    "no_url": "web_fetch_no_url_in_prompt",
    "fetch_failed": "web_fetch_processing_error",
    "web_search_failed": "web_search_failed",
}
_SEARCH_TOOLS = {"glob", "grep_search", "search_file_content", "list_directory"}


def gemini_cli_error_type(code: str, tool_name: str) -> str:
    """gemini-cli's ``ToolErrorType`` for a tool failure ``code`` of tool
    ``tool_name``: ``file_not_found`` for ``not_found``,
    ``search_path_not_found`` when a search tool's path is missing, the
    shell's own failures as ``shell_execute_error``, anything else
    ``execution_failed``."""
    if tool_name in _SEARCH_TOOLS and code in ("not_found", "not_a_directory"):
        return "search_path_not_found" if code == "not_found" else "search_path_not_a_directory"
    if tool_name == "run_shell_command" and code in ("timeout", "spawn_failed", "unavailable"):
        return "shell_execute_error"
    return _GEMINI_CLI_ERROR_TYPES.get(code, "execution_failed")

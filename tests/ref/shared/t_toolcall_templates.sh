#!/bin/sh
# The tool calls each real chat template of ../shared/chat-templates writes
# into an assistant turn (rendered by Python's Jinja2) are parsed back by
# pocket's parser, in the format detected from the template's text:
# the same names and arguments, no content (tests/lib/toolcall_templates.py).
set -u
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
. tests/lib/shared.sh
need_shared chat-templates/Qwen3.5-4B.jinja chat-templates/openai-gpt-oss-120b.jinja
[ -x "$BUILD/tests/tool_toolcall" ] || { echo "FAIL: $BUILD/tests/tool_toolcall not built (make)"; exit 1; }
"$PYTHON" -c 'import jinja2' 2>/dev/null || { echo "FAIL: Python's jinja2 is missing (Debian: python3-jinja2)"; exit 1; }
"$PYTHON" tests/lib/toolcall_templates.py "$POCKET_SHARED/chat-templates" "$BUILD/tests/tool_toolcall"

"""toolcall_templates.py TEMPLATE_DIR TOOL - the tool calls each real chat
template writes into an assistant turn, parsed back by pocket.

For every template of TEMPLATE_DIR (../shared/chat-templates) that
renders tool calls, the format is detected from the template's text
(TOOL detect) and each conversation below is rendered with Python's
Jinja2 twice: up to the user's turn with the generation prompt, and with
the assistant's turn that makes the calls. What the second adds to the
first is what the model is trained to generate; less its end-of-turn
marker and a leading reasoning block (pk_chat_reasoning's part), it is
fed to TOOL parse with the tools' schema, which must give back the calls
(names, arguments equal as JSON) and no content. Every template must be
detected. Gemma-4's (format gemma4: its own argument syntax, strings
between <|"|> markers, None for null) also gets FORMAT_CONVERSATIONS:
awkward strings (quotes, braces, newlines, Unicode, look-alikes of its
markers), numbers Python prints in its own way (1e-05, 1e+20, big
integers), nested values, keys dictsort reorders.
Prints one line per template and conversation; exit status 1 on any
failure."""
import datetime
import json
import os
import subprocess
import sys
import tempfile

import jinja2

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather.", "parameters": {
        "type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["location"]}}},
    {"type": "function", "function": {"name": "write_file", "description": "Write a file.", "parameters": {
        "type": "object", "properties": {
            "path": {"type": "string"}, "content": {"type": "string"}, "overwrite": {"type": "boolean"},
            "mode": {"type": "string"}, "options": {"type": "object"}, "ratio": {"type": "number"}}}}},
    {"type": "function", "function": {"name": "get_time", "description": "The time.", "parameters": {
        "type": "object", "properties": {}}}},
]

CONVERSATIONS = [
    ("one call", [("get_weather", {"location": "Paris", "days": 3})]),
    ("awkward values", [("write_file", {
        "path": "notes/naïve 日本.txt", "content": "line 1\n\"quoted\" \\ back\tslash\n<b>bold</b>\n",
        "overwrite": True, "mode": "644", "options": {"tags": ["a", "b"], "depth": None}, "ratio": 2.5})]),
    ("two calls", [("get_weather", {"location": "Oslo"}), ("get_time", {})]),
]

# values a format writes in a syntax of its own: they must come back the same
FORMAT_CONVERSATIONS = {
    "gemma4": [
        ("strings", [("write_file", {
            "path": 'quotes " and \' and \\ back', "content": "{braces} [brackets] a:b, c=d\n\tnew line\r\n",
            "mode": "<|'|> <|\" \"|> \"|> <| <tool_call|> <|tool_call>call:x{} <|tool_response> </tool_call>"}),
            ("get_weather", {"location": "naïve 日本 😀 Ω", "days": 0})]),
        ("look-alikes of values", [("write_file", {
            "path": "None", "content": "true", "mode": "123", "overwrite": False, "ratio": -0.5,
            "options": {"empty": "", "space": " ", "null-ish": "null", "nested": "{a:1}"}})]),
        ("numbers and nesting", [("write_file", {
            "ratio": 1e-05, "options": {
                "big": 12345678901234567890, "tiny": 2.5e-07, "huge": 1e+20, "neg": -7, "zero": 0, "float": 3.25,
                "Zed": [1, [2, [3, {"deep": None, "flag": True}]], [], {}], "alpha": {"B": {"a": [None, False, "x"]}},
                "key with spaces": 1, "ключ": "значение"}})]),
        ("three calls", [("get_time", {}), ("get_weather", {"location": "Lima", "days": 14}),
                         ("write_file", {"path": "a", "content": "", "options": {"list": [["x"], ["y", {"z": []}]]}})]),
    ],
}

# templates that render only one call per assistant turn
ONE_CALL = ("meta-llama-Llama-3.1-8B-Instruct.jinja", "openai-gpt-oss-120b.jinja")
END_MARKERS = ("<|im_end|>\n", "<|eot_id|>", "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>", "<|end|>", "<|tool_response>")
# what a generation prompt may end with that the rendered turn does not
# repeat: Gemma-4's empty thought channel (thinking off)
PROMPT_TAILS = ("<|channel>thought\n<channel|>",)


def environment():
    env = jinja2.Environment(trim_blocks=False, lstrip_blocks=False, extensions=["jinja2.ext.loopcontrols"])

    def tojson(x, indent=None, ensure_ascii=False, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(msg):
        raise jinja2.TemplateError(msg)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.date(2026, 1, 2).strftime(fmt)
    return env


def generated(template, calls):
    """The text the assistant's turn adds after the generation prompt."""
    base = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Please do it."}]
    turn = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_%d" % i, "type": "function", "function": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate(calls)]}
    kw = dict(tools=TOOLS, bos_token="<s>", eos_token="</s>")
    prompt = template.render(messages=base, add_generation_prompt=True, **kw)
    full = template.render(messages=base + [turn], add_generation_prompt=False, **kw)
    for tail in PROMPT_TAILS:
        if not full.startswith(prompt) and prompt.endswith(tail):
            prompt = prompt[:-len(tail)]
    if not full.startswith(prompt):
        raise ValueError("the rendered turn does not start with the generation prompt")
    text = full[len(prompt):]
    if "</think>" in text:
        text = text.split("</think>", 1)[1]
    for m in END_MARKERS:
        if text.endswith(m):
            text = text[:-len(m)]
    return text


def main():
    tdir, tool = sys.argv[1], sys.argv[2]
    fails = runs = 0
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(TOOLS, f)
        tools_path = f.name
    for name in sorted(os.listdir(tdir)):
        if not name.endswith(".jinja"):
            continue
        path = os.path.join(tdir, name)
        fmt = subprocess.run([tool, "detect", path], capture_output=True, text=True, check=True).stdout.strip()
        if fmt == "none":
            print("FAIL %s: no tool-call format detected" % name)
            fails += 1
            continue
        template = environment().from_string(open(path, encoding="utf-8").read())
        for label, calls in CONVERSATIONS + FORMAT_CONVERSATIONS.get(fmt, []):
            if len(calls) > 1 and name in ONE_CALL:
                continue
            runs += 1
            text = generated(template, calls)
            out = subprocess.run([tool, "parse", fmt, tools_path], input=text.encode(), capture_output=True,
                                 check=True).stdout
            got = json.loads(out)
            parsed = []
            for c in got["tool_calls"]:
                try:
                    parsed.append((c["name"], json.loads(c["arguments"])))
                except ValueError:
                    parsed.append((c["name"], "not JSON: " + c["arguments"]))
            ok = parsed == calls and got["content"] == "" and all(c["closed"] for c in got["tool_calls"])
            print("%s %s (%s): %s" % ("ok  " if ok else "FAIL", name, fmt, label))
            if not ok:
                fails += 1
                print("    generated: %r" % text)
                print("    parsed:    %s" % out.decode().strip())
    os.unlink(tools_path)
    if runs < 20:
        print("FAIL only %d template conversations ran" % runs)
        fails += 1
    print("toolcall_templates: %d conversations, %d failures" % (runs, fails))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""jinja_ref.py - the reference for pocket's Jinja engine: render chat
templates with Python's Jinja2 (Debian python3-jinja2) as Hugging Face's
apply_chat_template does - trim_blocks and lstrip_blocks on (off with
--plain-blocks), jinja2.ext.loopcontrols, tojson as
json.dumps(x, ensure_ascii=False, indent=None, separators=None,
sort_keys=False), raise_exception raising, strftime_now at a fixed time
(--now, seconds since 1970, UTC) - with a plain Environment, as
../shared/chat-templates/README.md says.

  jinja_ref.py [options] TEMPLATE CONVERSATION.json OUT
  jinja_ref.py --batch LIST

The variables are the conversation's keys (a bare array is the messages),
then bos_token / eos_token (--bos-token, --eos-token) unless the
conversation has them, and add_generation_prompt (--add-generation-prompt /
--no-generation-prompt, else the conversation's, else false): what
`pocket template` passes. The text goes to OUT as UTF-8; if Jinja2 raises,
OUT.err gets "ERROR Type: message" and OUT is not written. --batch LIST
reads one job per line: "TEMPLATE CONVERSATION OUT [options]" (one Python
start for many renders)."""
import datetime
import json
import os
import shlex
import sys

import jinja2
import jinja2.ext


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


_envs = {}


def environment(plain):
    if plain not in _envs:
        env = jinja2.Environment(trim_blocks=not plain, lstrip_blocks=not plain,
                                 extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        _envs[plain] = env
    return _envs[plain]


def render(args):
    opts = {"plain": False, "bos": None, "eos": None, "now": None, "agp": None}
    files = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--plain-blocks":
            opts["plain"] = True
        elif a in ("--bos-token", "--eos-token", "--now"):
            i += 1
            opts[{"--bos-token": "bos", "--eos-token": "eos", "--now": "now"}[a]] = args[i]
        elif a == "--add-generation-prompt":
            opts["agp"] = True
        elif a == "--no-generation-prompt":
            opts["agp"] = False
        else:
            files.append(a)
        i += 1
    if len(files) != 3:
        sys.exit("jinja_ref.py: want TEMPLATE CONVERSATION OUT, got %r" % files)
    tmpl_path, conv_path, out = files
    for p in (out, out + ".err"):
        if os.path.exists(p):
            os.remove(p)
    try:
        with open(tmpl_path, encoding="utf-8", newline="") as f:
            source = f.read()
        with open(conv_path, encoding="utf-8") as f:
            conv = json.load(f)
        variables = {"messages": conv} if isinstance(conv, list) else dict(conv)
        if opts["bos"] is not None:
            variables.setdefault("bos_token", opts["bos"])
        if opts["eos"] is not None:
            variables.setdefault("eos_token", opts["eos"])
        if opts["agp"] is not None:
            variables["add_generation_prompt"] = opts["agp"]
        else:
            variables.setdefault("add_generation_prompt", False)
        env = environment(opts["plain"])
        now = opts["now"]

        def strftime_now(fmt):
            if now:
                t = datetime.datetime.fromtimestamp(int(now), datetime.timezone.utc)
            else:
                t = datetime.datetime.now()
            return t.strftime(fmt)

        env.globals["strftime_now"] = strftime_now
        text = env.from_string(source).render(**variables)
    except Exception as e:                           # every failure is a result to compare
        with open(out + ".err", "w", encoding="utf-8") as f:
            f.write("ERROR %s: %s\n" % (type(e).__name__, str(e).replace("\n", " ")))
        return
    with open(out, "wb") as f:
        f.write(text.encode("utf-8", "surrogateescape"))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--batch":
        with open(sys.argv[2], encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    render(shlex.split(line))
    else:
        render(sys.argv[1:])


if __name__ == "__main__":
    main()

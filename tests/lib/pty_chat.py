#!/usr/bin/python3
"""pty_chat.py - drive `pocket chat` in a pseudo-terminal, as a person would.

usage: pty_chat.py POCKET MODEL TMPDIR

Two sessions on MODEL (--chat-template chatml, greedy, --show-prompt so
that stderr, a file, shows each prompt sent):
  1. editing: a line typed and sent; Up recalls it, Ctrl-A and the left
     arrow move in it, text is inserted, and the edited line is what the
     prompt carries; a typed line cleared by Ctrl-C is not sent and the
     program goes on; UTF-8 text is sent as typed; Ctrl-C at an empty
     prompt quits with status 0.
  2. a long answer (-c 8192 -n -1: tens of seconds) stopped by Ctrl-C once
     it streams: "[answer stopped]", the prompt comes back and takes a new
     message; then Ctrl-D at the empty prompt quits with status 0.
Prints one "ok   ..." or "FAIL ..." line per check (t_chat.sh counts them);
the exit status is the number of failures. Deadlines (60 s a wait) only
guard against a hang; nothing is timed.
"""

import fcntl
import os
import pty
import re
import select
import struct
import sys
import termios
import time

POCKET, MODEL, TMP = sys.argv[1:4]
UP, LEFT, CTRL_A, CTRL_C, CTRL_D = b"\x1b[A", b"\x1b[D", b"\x01", b"\x03", b"\x04"
fails = 0


def check(cond, what, detail=""):
    global fails
    if cond:
        print("ok   " + what)
    else:
        fails += 1
        print("FAIL " + what + (": " + detail if detail else ""))
    sys.stdout.flush()
    return cond


class Session:
    """pocket chat with its stdin and stdout on a pty, stderr in a file."""

    def __init__(self, name, args):
        self.err = os.path.join(TMP, name + ".err")
        self.out = b""          # everything the terminal showed
        self.seen = 0           # how much of it expect() has consumed
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            e = os.open(self.err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(e, 2)
            # no ~/.editrc of the tester; a UTF-8 terminal
            env = dict(os.environ, TERM="xterm", HOME=TMP, LC_ALL="C.UTF-8")
            os.execve(POCKET, [POCKET, "chat", "-m", MODEL, "--chat-template", "chatml", "--temp", "0",
                               "-t", "2", "--show-prompt"] + args, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
        self.status = None

    def read(self, wait):
        r, _, _ = select.select([self.fd], [], [], wait)
        if not r:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:         # EIO: the child closed the terminal
            data = b""
        if not data:
            return None
        self.out += data
        return True

    def expect(self, pattern, deadline=60):
        """Wait for PATTERN (bytes regex) in the output after what was seen."""
        end = time.monotonic() + deadline
        rx = re.compile(pattern)
        while True:
            m = rx.search(self.out, self.seen)
            if m:
                self.seen = m.end()
                return True
            left = end - time.monotonic()
            if left <= 0 or self.read(left) is None:
                return False

    def prompt(self):
        """The prompt "> " at the end of the output, nothing after it."""
        end = time.monotonic() + 60
        while time.monotonic() < end:
            tail = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]|\r", b"", self.out[self.seen:])
            if tail.endswith(b"> ") and self.read(0.3) is False:   # and quiet for a moment
                self.seen = len(self.out)
                return True
            if self.read(1) is None:
                return False
        return False

    def type(self, data):
        os.write(self.fd, data)

    def wait(self):
        end = time.monotonic() + 60
        while time.monotonic() < end:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(st)
                return self.status
            self.read(0.2)
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        return None

    def alive(self):
        return os.waitpid(self.pid, os.WNOHANG)[0] == 0

    def stderr(self):
        with open(self.err, encoding="utf-8", errors="replace") as f:
            return f.read()


def sent(s):
    """The message each prompt a session sent ends with (its last user message), in order."""
    return [re.findall(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", p)[-1]
            for p in s.stderr().split("[prompt: ")[1:]]


# ---- 1. editing, history, Ctrl-C on a typed line and at an empty prompt ----------------
s = Session("edit", ["-n", "6"])
check(s.prompt(), "pty: the prompt is shown")
s.type(b"In the beginning\r")
check(s.prompt(), "pty: an answer, then the prompt again")
s.type(UP)
check(s.expect(rb"In the beginning"), "pty: Up recalls the last line")
s.type(CTRL_A + b"Then " + b"\x05" + LEFT * 3 + b"-" + b"\r")   # Ctrl-A, insert; Ctrl-E, 3 x left, insert
check(s.prompt(), "pty: the edited line is answered")
got = sent(s)
check(got[-1:] == ["Then In the beginn-ing"], "pty: the edited line is what was sent", repr(got))
s.type(b"never sent")
s.expect(rb"never sent")
s.type(CTRL_C)
check(s.prompt(), "pty: Ctrl-C on a typed line gives a new prompt", repr(s.out[-300:]))
check(s.alive(), "pty: ... and the program goes on")
s.type(b"And God said\r")
check(s.prompt(), "pty: a message after the cleared line")
got = sent(s)
check(got == ["In the beginning", "Then In the beginn-ing", "And God said"],
      "pty: the cleared line was not sent; three messages in order", repr(got))
s.type("Höre, Erde\r".encode())
check(s.prompt(), "pty: a line with UTF-8 characters is answered")
check(sent(s)[-1:] == ["Höre, Erde"], "pty: ... and sent as typed", repr(sent(s)[-1:]))
s.type(UP + UP + UP)
check(s.expect(rb"Then In the beginn-ing"), "pty: Up three times recalls the line before")
s.type(CTRL_A + b"\x0b")                 # Ctrl-A, Ctrl-K: the line emptied again
s.type(CTRL_C)
check(s.wait() == 0, "pty: Ctrl-C at an empty prompt quits with status 0", "status %r" % s.status)

# ---- 2. Ctrl-C during a long answer ---------------------------------------------------
s = Session("stop", ["-c", "8192", "-n", "-1"])
check(s.prompt(), "pty (long answer): the prompt")
s.type(b"And God said\r")
started = s.expect(rb"\r\n[^\r\n>]{40}")       # the answer streams: 40 characters of it
check(started, "pty: the long answer streams")
s.type(CTRL_C)
check(s.prompt(), "pty: after Ctrl-C during the answer the prompt comes back")
err = s.stderr()
check("[answer stopped]" in err, "pty: the answer was stopped, not finished",
      err[-200:] if "[answer stopped]" not in err else "")
check("[answer cut" not in err, "pty: ... before the context was full")
s.type(b"In the beginning\r")
check(s.expect(rb"\r\n[^\r\n>]{40}"), "pty: a new message after the stopped answer is answered")
check(sent(s)[-1:] == ["In the beginning"], "pty: ... and was sent", repr(sent(s)))
s.type(CTRL_C)
check(s.prompt(), "pty: Ctrl-C stops that one too")
s.type(CTRL_D)
check(s.wait() == 0, "pty: Ctrl-D at an empty prompt quits with status 0", "status %r" % s.status)

sys.exit(min(fails, 100))

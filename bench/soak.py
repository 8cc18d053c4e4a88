#!/usr/bin/env python3
"""soak.py - hold `pocket serve` under a mixed, hostile load for a bounded time.

Not a test: a benchmark of robustness. It starts the server on loopback
(--port 0, the port read from its log) and runs --conns client tasks at once
(more than the server's sequences plus its queue), each picking a scenario
at random, for --minutes:

  chat, chat_stream, completion, completion_stream   valid requests with
      random messages, max_tokens, temperature, top_p, top_k, seed, stop;
      answered 200 (a result with one choice; a stream of chunks ending in
      [DONE]) or 503 (queue full, an OpenAI error object)
  keepalive        several GET and short generation requests on one connection
  bad_json         a valid body cut short or with bytes overwritten: 400
  bad_field        wrong types and out-of-range values: 400
  unsupported      tools, response_format, logprobs, n > 1, ...: 400 naming it
  bad_key          no or a wrong API key: 401
  big_body         a body over --max-body: 413
  big_header       a header over the server's header memory: 431
  long_url         a request line over it: 414
  not_found, bad_method, get_misc   404 / 405 / 200 (health, models, metrics, page)
  trickle          a valid request sent a few bytes at a time, well within
                   --timeout: answered as usual
  stall            half a request, then silence past --timeout: the server
                   must close the connection
  drop_stream      a streamed generation the client abandons after its first
                   chunk (the server must cancel it and free the sequence)

Every answer is checked: the status must be one the scenario allows, JSON
bodies must parse and errors must be OpenAI-style objects. "lost" counts
requests that needed an answer and got none (closed, reset, or no answer
within --answer-timeout); "malformed" counts answers that broke a rule.
Every second the server's RSS, threads and open descriptors are sampled
from /proc. At the end the server gets SIGTERM and must exit 0.

Exit status 0 only if the server never died, lost = malformed = 0, and it
exited cleanly. Usage:

  python3 bench/soak.py [--pocket build/pocket] [--model models/kjv-moe-f16.gguf]
                        [--minutes 30] [--conns 48] [--think-ms 0] [--seed 1] [--json FILE]
"""
import argparse
import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

KEY = "soak-key-%d" % os.getpid()
WORDS = ("and god said unto moses let there be light in the beginning was the word "
         "of heaven earth water day night king israel people land lord spirit").split()


def sample_proc(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            st = f.read()
        rss = int(re.search(r"VmRSS:\s+(\d+)", st).group(1)) * 1024
        thr = int(re.search(r"Threads:\s+(\d+)", st).group(1))
        fds = len(os.listdir("/proc/%d/fd" % pid))
        return rss, thr, fds
    except (OSError, AttributeError):
        return None


class Stats:
    def __init__(self):
        self.sent = 0
        self.by_scenario = {}   # name -> {status or outcome: count}
        self.lost = 0
        self.malformed = 0
        self.problems = []      # first few descriptions

    def count(self, scen, outcome):
        d = self.by_scenario.setdefault(scen, {})
        d[outcome] = d.get(outcome, 0) + 1

    def bad(self, kind, scen, what):
        if kind == "lost":
            self.lost += 1
        else:
            self.malformed += 1
        self.count(scen, kind)
        if len(self.problems) < 40:
            self.problems.append("%s %s: %s" % (kind, scen, what[:300]))


class Lost(Exception):
    pass


class Malformed(Exception):
    pass


async def read_response(reader, timeout, head_only=False):
    """One HTTP/1.1 response: (status, headers dict, body bytes)."""
    async def inner():
        line = await reader.readline()
        if not line:
            raise Lost("connection closed before a status line")
        m = re.match(rb"HTTP/1\.[01] (\d{3}) ", line)
        if not m:
            raise Malformed("bad status line %r" % line[:80])
        status = int(m.group(1))
        headers = {}
        while True:
            h = await reader.readline()
            if not h:
                raise Lost("closed inside the headers")
            if h in (b"\r\n", b"\n"):
                break
            k, _, v = h.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        if head_only:
            return status, headers, b""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = bytearray()
            while True:
                sz = await reader.readline()
                if not sz:
                    raise Lost("closed inside a chunked body")
                try:
                    n = int(sz.split(b";")[0].strip(), 16)
                except ValueError:
                    raise Malformed("bad chunk size %r" % sz[:40])
                if n == 0:
                    while True:   # trailers
                        t = await reader.readline()
                        if not t or t in (b"\r\n", b"\n"):
                            break
                    break
                body += await reader.readexactly(n)
                await reader.readexactly(2)
            return status, headers, bytes(body)
        if "content-length" in headers:
            n = int(headers["content-length"])
            return status, headers, await reader.readexactly(n)
        return status, headers, await reader.read()
    try:
        return await asyncio.wait_for(inner(), timeout)
    except asyncio.IncompleteReadError:
        raise Lost("closed inside the body")
    except (ConnectionResetError, BrokenPipeError) as e:
        raise Lost("connection error %s" % e)
    except asyncio.TimeoutError:
        raise Lost("no answer within %.0f s" % timeout)


def request_bytes(method, path, body=None, key=KEY, extra=(), keepalive=False):
    h = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1",
         "Connection: %s" % ("keep-alive" if keepalive else "close")]
    if key is not None:
        h.append("Authorization: Bearer %s" % key)
    if body is not None:
        h.append("Content-Type: application/json")
        h.append("Content-Length: %d" % len(body))
    h.extend(extra)
    return ("\r\n".join(h) + "\r\n\r\n").encode() + (body or b"")


def check_error(body, status):
    try:
        v = json.loads(body)
    except ValueError:
        raise Malformed("status %d: body is not JSON: %r" % (status, body[:120]))
    e = v.get("error") if isinstance(v, dict) else None
    if not (isinstance(e, dict) and isinstance(e.get("message"), str) and e["message"] and
            isinstance(e.get("type"), str) and "code" in e):
        raise Malformed("status %d: not an OpenAI error object: %r" % (status, body[:200]))
    return e


def check_result(body, chat):
    try:
        v = json.loads(body)
    except ValueError:
        raise Malformed("200: body is not JSON: %r" % body[:120])
    ch = v.get("choices")
    if not (isinstance(ch, list) and len(ch) == 1):
        raise Malformed("200: not one choice: %r" % body[:200])
    c = ch[0]
    text = c.get("message", {}).get("content") if chat else c.get("text")
    if not isinstance(text, str) or c.get("finish_reason") not in ("stop", "length"):
        raise Malformed("200: bad choice %r" % body[:200])
    u = v.get("usage", {})
    if not (isinstance(u.get("prompt_tokens"), int) and isinstance(u.get("completion_tokens"), int)):
        raise Malformed("200: bad usage %r" % body[:200])


def check_stream(body, chat):
    events = [l[6:] for l in body.decode("utf-8", "replace").split("\n") if l.startswith("data: ")]
    if not events or events[-1].strip() != "[DONE]":
        raise Malformed("stream does not end with [DONE]: %r" % body[-200:])
    finished = False
    for e in events[:-1]:
        try:
            v = json.loads(e)
        except ValueError:
            raise Malformed("stream chunk is not JSON: %r" % e[:120])
        if "error" in v:
            check_error(e.encode(), 200)
            return
        ch = v.get("choices")
        if not (isinstance(ch, list) and len(ch) == 1):
            raise Malformed("stream chunk without one choice: %r" % e[:200])
        finished |= ch[0].get("finish_reason") in ("stop", "length")
    if not finished:
        raise Malformed("stream without a finish_reason")


class Soak:
    def __init__(self, args, port, model_id):
        self.a = args
        self.port = port
        self.model_id = model_id
        self.st = Stats()
        self.rng = random.Random(args.seed)
        self.deadline = time.monotonic() + args.minutes * 60

    async def connect(self):
        try:
            return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port), 10)
        except (OSError, asyncio.TimeoutError) as e:
            raise Lost("connect: %s" % e)

    def words(self, n):
        return " ".join(self.rng.choice(WORDS) for _ in range(n))

    def gen_body(self, chat, stream):
        r = self.rng
        b = {"max_tokens": r.randint(1, 12), "stream": stream}
        if r.random() < 0.5:
            b["model"] = self.model_id
        if chat:
            msgs = []
            if r.random() < 0.3:
                msgs.append({"role": "system", "content": self.words(r.randint(1, 8))})
            for i in range(r.choice((1, 1, 1, 3))):
                msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": self.words(r.randint(0, 20))})
            b["messages"] = msgs
        else:
            b["prompt"] = self.words(r.randint(1, 30))
        if r.random() < 0.5:
            b["temperature"] = round(r.uniform(0, 1.5), 2)
        if r.random() < 0.3:
            b["top_p"] = round(r.uniform(0.1, 1), 2)
        if r.random() < 0.3:
            b["top_k"] = r.randint(0, 50)
        if r.random() < 0.5:
            b["seed"] = r.randint(0, 2**31)
        if r.random() < 0.2:
            b["stop"] = [r.choice(WORDS) for _ in range(r.randint(1, 3))]
        return b

    async def exchange(self, scen, data, expect, timeout=None, kind="json", chat=True, head_only=False):
        """Send data on a new connection, read one answer, check it."""
        reader, writer = await self.connect()
        try:
            writer.write(data)
            await writer.drain()
        except (ConnectionResetError, BrokenPipeError):
            pass   # the server may answer and close before reading everything
        try:
            st, hd, body = await read_response(reader, timeout or self.a.answer_timeout, head_only)
        finally:
            writer.close()
        self.check(scen, st, hd, body, expect, kind, chat)

    def check(self, scen, st, hd, body, expect, kind, chat):
        if st not in expect:
            raise Malformed("status %d, expected %s: %r" % (st, sorted(expect), body[:200]))
        if kind == "json" or (kind in ("result", "stream") and st != 200):
            if st >= 400:
                check_error(body, st)
            else:
                try:
                    json.loads(body)
                except ValueError:
                    raise Malformed("status %d: not JSON %r" % (st, body[:120]))
        elif kind == "result":
            check_result(body, chat)
        elif kind == "stream":
            check_stream(body, chat)
        self.st.count(scen, st)

    async def s_generate(self, scen):
        chat = scen.startswith("chat")
        stream = scen.endswith("stream")
        body = json.dumps(self.gen_body(chat, stream)).encode()
        path = "/v1/chat/completions" if chat else "/v1/completions"
        await self.exchange(scen, request_bytes("POST", path, body), {200, 503},
                            kind="stream" if stream else "result", chat=chat)

    async def s_keepalive(self, scen):
        reader, writer = await self.connect()
        try:
            for _ in range(self.rng.randint(2, 6)):
                if self.rng.random() < 0.5:
                    path = self.rng.choice(("/health", "/v1/models"))
                    writer.write(request_bytes("GET", path, keepalive=True))
                    await writer.drain()
                    st, hd, body = await read_response(reader, self.a.answer_timeout)
                    self.check(scen, st, hd, body, {200}, "json", True)
                else:
                    body = json.dumps(self.gen_body(True, False)).encode()
                    writer.write(request_bytes("POST", "/v1/chat/completions", body, keepalive=True))
                    await writer.drain()
                    st, hd, rb = await read_response(reader, self.a.answer_timeout)
                    self.check(scen, st, hd, rb, {200, 503}, "result", True)
                self.st.sent += 1
                if hd.get("connection", "").lower() == "close":
                    break
        finally:
            writer.close()
        self.st.sent -= 1   # the caller counts one

    async def s_bad_json(self, scen):
        b = json.dumps(self.gen_body(self.rng.random() < 0.5, False)).encode()
        r = self.rng
        if r.random() < 0.5:
            b = b[:r.randint(0, len(b) - 1)]
        else:
            b = bytearray(b)
            for _ in range(r.randint(1, 4)):
                b[r.randrange(len(b))] = r.choice(b"{}[]\",:\x00\xff")
            b = bytes(b)
            try:   # overwritten bytes may still spell valid JSON (then it is bad_field's case)
                json.loads(b)
                b = b + b"}"
            except ValueError:
                pass
        await self.exchange(scen, request_bytes("POST", "/v1/chat/completions", b), {400})

    async def s_bad_field(self, scen):
        r = self.rng
        b = self.gen_body(True, False)
        bad = r.choice([("max_tokens", "ten"), ("max_tokens", -5), ("temperature", "hot"), ("temperature", -1),
                        ("top_p", 7), ("messages", "hello"), ("messages", []), ("messages", [{"role": "x"}]),
                        ("messages", [{"role": "user", "content": 5}]), ("stop", 3), ("stream", "yes"),
                        ("seed", "s"), ("model", "no-such-model"), ("top_k", -2), ("max_tokens", 10**12)])
        b[bad[0]] = bad[1]
        await self.exchange(scen, request_bytes("POST", "/v1/chat/completions", json.dumps(b).encode()),
                            {400, 404})

    async def s_unsupported(self, scen):
        b = self.gen_body(True, False)
        k, v = self.rng.choice([("tools", [{"type": "function", "function": {"name": "f"}}]),
                                ("response_format", {"type": "json_object"}), ("logprobs", True), ("n", 2),
                                ("tool_choice", "required"), ("functions", [{"name": "f"}]),
                                ("logit_bias", {"5": 1}), ("presence_penalty", 0.5), ("echo", True)])
        b[k] = v
        reader, writer = await self.connect()
        writer.write(request_bytes("POST", "/v1/chat/completions", json.dumps(b).encode()))
        await writer.drain()
        try:
            st, hd, body = await read_response(reader, self.a.answer_timeout)
        finally:
            writer.close()
        self.check(scen, st, hd, body, {400}, "json", True)
        if k not in json.loads(body)["error"]["message"]:
            raise Malformed("400 does not name %s: %r" % (k, body[:200]))

    async def s_bad_key(self, scen):
        key = self.rng.choice((None, KEY + "x", KEY[:-1], "", KEY.upper()))
        path = self.rng.choice(("/v1/models", "/v1/chat/completions", "/metrics"))
        body = json.dumps(self.gen_body(True, False)).encode() if path == "/v1/chat/completions" else None
        await self.exchange(scen, request_bytes("POST" if body else "GET", path, body, key=key), {401})

    async def s_big_body(self, scen):
        n = self.a.max_body + self.rng.randint(1, 3 * self.a.max_body)
        body = b'{"messages":[{"role":"user","content":"' + b"a" * n + b'"}]}'
        await self.exchange(scen, request_bytes("POST", "/v1/chat/completions", body), {413})

    async def s_big_header(self, scen):
        extra = ["X-Filler: " + "b" * self.rng.randint(33000, 70000)]
        await self.exchange(scen, request_bytes("GET", "/health", extra=extra), {431}, kind="any")

    async def s_long_url(self, scen):
        path = "/v1/models?" + "c" * self.rng.randint(33000, 70000)
        await self.exchange(scen, request_bytes("GET", path), {414}, kind="any")

    async def s_not_found(self, scen):
        path = self.rng.choice(("/v1/nope", "/<script>alert(1)</script>", "/v1/chat/completions/x", "/%00", "/v2"))
        await self.exchange(scen, request_bytes("GET", path), {404})

    async def s_bad_method(self, scen):
        m, path = self.rng.choice((("GET", "/v1/chat/completions"), ("DELETE", "/v1/models"),
                                   ("PUT", "/v1/completions"), ("POST", "/health")))
        await self.exchange(scen, request_bytes(m, path, b"{}" if m in ("PUT", "POST") else None), {405})

    async def s_get_misc(self, scen):
        path = self.rng.choice(("/health", "/v1/models", "/metrics", "/"))
        await self.exchange(scen, request_bytes("GET", path), {200},
                            kind="json" if path in ("/health", "/v1/models") else "any")

    async def s_trickle(self, scen):
        body = json.dumps(self.gen_body(False, False)).encode()
        data = request_bytes("POST", "/v1/completions", body)
        reader, writer = await self.connect()
        try:
            # the whole request within a third of the server's timeout
            step = max(1, len(data) // 20)
            pause = self.a.timeout / 3 / 20
            for i in range(0, len(data), step):
                writer.write(data[i:i + step])
                await writer.drain()
                await asyncio.sleep(pause)
            st, hd, rb = await read_response(reader, self.a.answer_timeout)
        except (ConnectionResetError, BrokenPipeError) as e:
            raise Lost("trickle: %s" % e)
        finally:
            writer.close()
        self.check(scen, st, hd, rb, {200, 503}, "result", False)

    async def s_stall(self, scen):
        body = json.dumps(self.gen_body(True, False)).encode()
        data = request_bytes("POST", "/v1/chat/completions", body)
        reader, writer = await self.connect()
        t0 = time.monotonic()
        try:
            writer.write(data[:self.rng.randint(1, len(data) - 1)])
            await writer.drain()
            got = await asyncio.wait_for(reader.read(), self.a.timeout + 15)
        except (ConnectionResetError, BrokenPipeError):
            got = b""
        except asyncio.TimeoutError:
            raise Malformed("a stalled connection was still open after %.0f s" % (time.monotonic() - t0))
        finally:
            writer.close()
        if got and not got.startswith(b"HTTP/1.1 408") and not got.startswith(b"HTTP/1.1 400"):
            raise Malformed("a stalled connection got %r" % got[:100])
        self.st.count(scen, "closed")

    async def s_drop_stream(self, scen):
        b = self.gen_body(self.rng.random() < 0.5, True)
        b["max_tokens"] = self.rng.randint(16, 64)
        path = "/v1/chat/completions" if "messages" in b else "/v1/completions"
        reader, writer = await self.connect()
        try:
            writer.write(request_bytes("POST", path, json.dumps(b).encode()))
            await writer.drain()
            st, hd, _ = await read_response(reader, self.a.answer_timeout, head_only=True)
            if st == 200:
                await asyncio.wait_for(reader.readline(), self.a.answer_timeout)   # first chunk
        finally:
            writer.transport.abort()
        if st not in (200, 503):
            raise Malformed("drop_stream: status %d" % st)
        self.st.count(scen, st)

    SCENARIOS = [  # name, weight
        ("chat", 14), ("chat_stream", 10), ("completion", 8), ("completion_stream", 6), ("keepalive", 6),
        ("bad_json", 8), ("bad_field", 8), ("unsupported", 5), ("bad_key", 5), ("big_body", 3),
        ("big_header", 2), ("long_url", 2), ("not_found", 4), ("bad_method", 3), ("get_misc", 10),
        ("trickle", 2), ("stall", 1), ("drop_stream", 4),
    ]

    async def client(self):
        names = [n for n, w in self.SCENARIOS]
        weights = [w for n, w in self.SCENARIOS]
        while time.monotonic() < self.deadline and not self.server_dead:
            scen = self.rng.choices(names, weights)[0]
            fn = getattr(self, "s_" + ("generate" if scen in ("chat", "chat_stream", "completion",
                                                              "completion_stream") else scen))
            self.st.sent += 1
            try:
                await fn(scen)
            except Lost as e:
                if not self.server_dead:
                    self.st.bad("lost", scen, str(e))
            except Malformed as e:
                self.st.bad("malformed", scen, str(e))
            except OSError as e:
                self.st.bad("lost", scen, "socket: %s" % e)
            if self.a.think_ms:
                await asyncio.sleep(self.rng.uniform(0, 2 * self.a.think_ms) / 1000)

    async def sampler(self, proc):
        self.samples = []
        t0 = time.monotonic()
        while time.monotonic() < self.deadline + 1:
            if proc.poll() is not None:
                self.server_dead = True
                return
            s = sample_proc(proc.pid)
            if s:
                self.samples.append((time.monotonic() - t0, s[0], s[1], s[2], self.st.sent))
            if self.a.progress and len(self.samples) % 60 == 0 and s:
                print("  %5.0f s  sent %7d  rss %6.1f MiB  threads %3d  fds %3d  lost %d  malformed %d" %
                      (time.monotonic() - t0, self.st.sent, s[0] / 2**20, s[1], s[2], self.st.lost,
                       self.st.malformed), flush=True)
            await asyncio.sleep(1)

    async def run(self, proc):
        self.server_dead = False
        tasks = [asyncio.create_task(self.client()) for _ in range(self.a.conns)]
        samp = asyncio.create_task(self.sampler(proc))
        await asyncio.gather(*tasks)
        await samp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pocket", default="build/pocket")
    ap.add_argument("--model", default="models/kjv-moe-f16.gguf")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--conns", type=int, default=48)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--queue", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--max-body", type=int, default=65536)
    ap.add_argument("--timeout", type=int, default=6, help="the server's --timeout (s)")
    ap.add_argument("--answer-timeout", type=float, default=120)
    ap.add_argument("--think-ms", type=float, default=0,
                    help="mean pause of a client between requests (0: none, as fast as answered)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--progress", action="store_true", help="a line a minute")
    a = ap.parse_args()

    log = open("soak-server.log" if not a.json else a.json + ".server.log", "w")
    cmd = [a.pocket, "serve", "-m", a.model, "--host", "127.0.0.1", "--port", "0", "--parallel", str(a.parallel),
           "--queue", str(a.queue), "-t", str(a.threads), "-c", str(a.ctx), "--max-body", str(a.max_body),
           "--timeout", str(a.timeout), "--api-key", KEY, "--quiet"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    port = None
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit("soak: the server exited at start (see %s)" % log.name)
        with open(log.name) as f:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", f.read())
        if m:
            port = int(m.group(1))
            break
        time.sleep(0.1)
    if not port:
        proc.kill()
        sys.exit("soak: the server did not start listening")
    model_id = os.path.basename(a.model)[:-5] if a.model.endswith(".gguf") else os.path.basename(a.model)
    print("soak: %s, %d connections, %.0f min, server %s" % (a.model, a.conns, a.minutes, " ".join(cmd[1:])),
          flush=True)
    s = Soak(a, port, model_id)
    t0 = time.monotonic()
    asyncio.run(s.run(proc))
    wall = time.monotonic() - t0
    died = proc.poll() is not None
    rc = None
    if not died:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "hung on SIGTERM"
    else:
        rc = proc.returncode

    st = s.st
    smp = s.samples
    warm = [x for x in smp if x[0] >= min(300, a.minutes * 60 / 6)] or smp
    half = len(warm) // 2
    first, second = warm[:half] or warm, warm[half:] or warm
    res = {
        "minutes": wall / 60, "connections": a.conns, "requests": st.sent, "lost": st.lost,
        "malformed": st.malformed, "server_died": died, "server_exit": rc,
        "answers": st.by_scenario,
        "rss_peak_mib": max(x[1] for x in smp) / 2**20 if smp else None,
        "rss_after_warmup_first_half_max_mib": max(x[1] for x in first) / 2**20 if smp else None,
        "rss_after_warmup_second_half_max_mib": max(x[1] for x in second) / 2**20 if smp else None,
        "rss_final_mib": smp[-1][1] / 2**20 if smp else None,
        "fds_peak": max(x[3] for x in smp) if smp else None,
        "fds_first_half_max": max(x[3] for x in first) if smp else None,
        "fds_second_half_max": max(x[3] for x in second) if smp else None,
        "threads_peak": max(x[2] for x in smp) if smp else None,
        "problems": st.problems,
        "samples": [{"t": round(x[0], 1), "rss": x[1], "threads": x[2], "fds": x[3], "sent": x[4]} for x in smp],
    }
    print("soak: %.1f min, %d requests (%.1f/s), lost %d, malformed %d, server %s, exit %s" %
          (res["minutes"], st.sent, st.sent / wall, st.lost, st.malformed, "died" if died else "alive", rc))
    for scen, d in sorted(st.by_scenario.items()):
        print("  %-18s %s" % (scen, "  ".join("%s: %d" % (k, v) for k, v in sorted(d.items(), key=str))))
    if smp:
        print("  rss MiB: peak %.1f; after warm-up, first half max %.1f, second half max %.1f; final %.1f" %
              (res["rss_peak_mib"], res["rss_after_warmup_first_half_max_mib"],
               res["rss_after_warmup_second_half_max_mib"], res["rss_final_mib"]))
        print("  fds: peak %d (first half max %d, second half max %d); threads peak %d" %
              (res["fds_peak"], res["fds_first_half_max"], res["fds_second_half_max"], res["threads_peak"]))
    for p in st.problems[:20]:
        print("  " + p)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    ok = not died and st.lost == 0 and st.malformed == 0 and rc == 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

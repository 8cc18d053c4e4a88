/* serve_completion.c - a completion endpoint of `pocket serve` (tools/serve.h):
 * the body translated by its API into an OpenAI request, its jobs queued
 * (handle_api), the connection's thread waiting on them while it watches
 * the socket, and the answer built from what they generated: the OpenAI
 * chat.completion (text_completion) with usage, timings and logprobs, the
 * text split into reasoning, content and tool calls (outsplit), or, when
 * streamed, chat.completion.chunk objects as the text grows; each goes
 * through the API's translation (api->response, api->stream_chunk), a
 * refusal through api->error. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define WAIT_MS 50              /* how often a waiting connection polls its socket */

/* A valid UTF-8 copy of s[0..n) (tools/serve_api.c). */
static char *utf8_sanitize(const char *s, size_t n, size_t *out_len) {
    return api_utf8_sanitize(s, n, out_len);
}

/* ---- response bodies ------------------------------------------------------------------ */

/* A refusal in the API's own error shape (its message made valid UTF-8). */
json_t *api_error_json(const serve_api *api, api_error *e) {
    size_t n;
    char *clean = utf8_sanitize(e->msg, strlen(e->msg), &n);
    if (clean) {
        size_t k = n < sizeof e->msg ? n : utf8_complete_len(clean, sizeof e->msg - 1);
        memcpy(e->msg, clean, k);
        e->msg[k] = 0;
        free(clean);
    }
    if (!e->msg[0]) snprintf(e->msg, sizeof e->msg, "error");
    return api->error(e);
}

mhd_result send_api_error(struct MHD_Connection *c, const serve_api *api, api_error *e) {
    return send_json(c, (unsigned)(e->status >= 400 && e->status < 600 ? e->status : 500), api_error_json(api, e));
}

static json_t *usage_json(job *const *jobs, int n) {
    int gen = 0;
    for (int i = 0; i < n; i++) gen += jobs[i]->n_gen;
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", jobs[0]->n_prompt, "completion_tokens", gen,
                     "total_tokens", jobs[0]->n_prompt + gen, "prompt_tokens_details", "cached_tokens", jobs[0]->n_cached);
}

/* llama-server's "timings" of n done jobs (mu held or the jobs done):
 * prompt_n the prompt tokens processed (cache_n those a slot held),
 * predicted_n the tokens generated (every choice's), their milliseconds
 * and speeds. */
static json_t *timings_json(job *const *jobs, int n) {
    int gen = 0;
    double gen_ms = 0;
    for (int i = 0; i < n; i++) {
        gen += jobs[i]->n_gen;
        gen_ms += jobs[i]->gen_ms;
    }
    int pn = jobs[0]->n_prompt - jobs[0]->n_cached;
    double pms = jobs[0]->prompt_ms;
    return json_pack("{s:i, s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:f}", "cache_n", jobs[0]->n_cached, "prompt_n", pn,
                     "prompt_ms", pms, "prompt_per_token_ms", pn > 0 ? pms / pn : 0.0, "prompt_per_second",
                     pms > 0 ? pn * 1e3 / pms : 0.0, "predicted_n", gen, "predicted_ms", gen_ms,
                     "predicted_per_token_ms", gen > 0 ? gen_ms / gen : 0.0, "predicted_per_second",
                     gen_ms > 0 ? gen * 1e3 / gen_ms : 0.0);
}

/* A token's text: t (valid UTF-8, for "token") and its bytes. */
static json_t *token_json(int32_t id, const char *key_lp, float lp, json_t *extra) {
    char buf[256];
    int n = pk_model_token_piece(S.model, id, buf, sizeof buf);
    if (n < 0 || n > (int)sizeof buf) n = 0;
    size_t k;
    char *t = utf8_sanitize(buf, (size_t)n, &k);
    json_t *bytes = json_array();
    for (int i = 0; i < n && bytes; i++) json_array_append_new(bytes, json_integer((unsigned char)buf[i]));
    /* -inf (a token the grammar forbids) is not JSON: OpenAI's -9999 */
    json_t *o = json_pack("{s:s%, s:f, s:o}", "token", t ? t : "", t ? k : 0, key_lp, isfinite(lp) ? lp : -9999.0,
                          "bytes", bytes);
    free(t);
    if (o && extra) json_object_update(o, extra);
    json_decref(extra);
    return o;
}

/* The log-probabilities of lp[0..n): chat's {"content": [{token, logprob,
 * bytes, top_logprobs}]}, or text completions' {tokens, token_logprobs,
 * top_logprobs: [{token: logprob}], text_offset} (off: the text's bytes
 * before lp[0]). */
static json_t *logprobs_json(const job *j, const tok_lp *lp, int n, size_t off) {
    if (j->chat) {
        json_t *content = json_array();
        for (int i = 0; i < n && content; i++) {
            json_t *top = json_array();
            for (int k = 0; k < lp[i].n_top && top; k++)
                json_array_append_new(top, token_json(lp[i].top_id[k], "logprob", lp[i].top_lp[k], NULL));
            json_array_append_new(content, token_json(lp[i].id, "logprob", lp[i].lp, json_pack("{s:o}", "top_logprobs", top)));
        }
        return json_pack("{s:o}", "content", content);
    }
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (int i = 0; i < n && toks && lps && tops && offs; i++) {
        char buf[256];
        int m = pk_model_token_piece(S.model, lp[i].id, buf, sizeof buf);
        if (m < 0 || m > (int)sizeof buf) m = 0;
        size_t k;
        char *t = utf8_sanitize(buf, (size_t)m, &k);
        json_array_append_new(toks, json_stringn(t ? t : "", t ? k : 0));
        free(t);
        json_array_append_new(lps, json_real(isfinite(lp[i].lp) ? lp[i].lp : -9999.0));
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += (size_t)m;
        json_t *top = json_object();
        for (int q = 0; q < lp[i].n_top && top; q++) {
            m = pk_model_token_piece(S.model, lp[i].top_id[q], buf, sizeof buf);
            if (m < 0 || m > (int)sizeof buf) m = 0;
            t = utf8_sanitize(buf, (size_t)m, &k);
            if (t) json_object_set_new(top, t, json_real(isfinite(lp[i].top_lp[q]) ? lp[i].top_lp[q] : -9999.0));
            free(t);
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

/* An OpenAI object around choice (stolen; NULL: no choices). */
static json_t *object_json(const job *j, const char *object, json_t *choice) {
    json_t *choices = json_array();
    if (choice) json_array_append_new(choices, choice);
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:o}", "id", j->id, "object", object, "created", (json_int_t)j->created,
                     "model", S.model_id, "system_fingerprint", "pocket", "choices", choices);
}

/* One streamed chunk: a chat delta (stolen) or a text piece, with finish
 * (NULL: null) and logprobs (stolen; NULL: null). */
static json_t *chunk_json(const job *j, json_t *delta, const char *text, size_t len, const char *finish, json_t *lp) {
    json_t *choice;
    if (j->chat)
        choice = json_pack("{s:i, s:o, s:o, s:s?}", "index", j->index, "delta", delta ? delta : json_object(),
                           "logprobs", lp ? lp : json_null(), "finish_reason", finish);
    else
        choice = json_pack("{s:i, s:s%, s:o, s:s?}", "index", j->index, "text", text ? text : "", text ? len : 0,
                           "logprobs", lp ? lp : json_null(), "finish_reason", finish);
    return object_json(j, j->chat ? "chat.completion.chunk" : "text_completion", choice);
}

void outsplit_free(outsplit *o) {
    pk_chat_reasoning_free(o->r);
    pk_toolcall_free(o->tc);
    memset(o, 0, sizeof *o);
}

int outsplit_init(outsplit *o, const job *j, pk_error *err) {
    memset(o, 0, sizeof *o);
    if (j->split) {
        if (pk_chat_reasoning_new(S.chat_template, &o->r, err)) return -1;
        /* the template opened <think>: the text starts inside it */
        if (j->think_open && pk_chat_reasoning_feed(o->r, "<think>", 7, 0)) goto fail;
    }
    if (j->toolfmt) {
        if (pk_toolcall_new(j->toolfmt, j->tc_seed, &o->tc, err) ||
            pk_toolcall_set_tools(o->tc, j->tools_json, strlen(j->tools_json), err))
            goto fail;
        o->harmony = !strcmp(j->toolfmt, "harmony");
        o->one_call = j->one_call;
    }
    return 0;
fail:
    outsplit_free(o);
    return -1;
}

static int out_emit(outsplit *o, int kind, int index, const char *id, const char *t, size_t n) {
    if (o->one_call && index > 0) return 0;
    return o->emit && (n || kind == OUT_CALL) ? o->emit(o->ctx, kind, index, id, t, n) : 0;
}

static int out_reason(outsplit *o, const char *t, size_t n, int final);

/* text for the call parser; its content goes on to the splitter (harmony)
 * or out */
static int out_calls(outsplit *o, const char *t, size_t n, int final) {
    if (pk_toolcall_feed(o->tc, t, n, final)) return -1;
    pk_toolcall_event ev;
    while (pk_toolcall_next(o->tc, &ev)) {
        int bad = 0;
        if (ev.kind == PK_TOOLCALL_CONTENT)
            bad = o->harmony ? out_reason(o, ev.text, ev.len, 0) : out_emit(o, OUT_CONTENT, -1, NULL, ev.text, ev.len);
        else if (ev.kind == PK_TOOLCALL_START)
            bad = out_emit(o, OUT_CALL, ev.index, ev.id, ev.text, ev.len);
        else if (ev.kind == PK_TOOLCALL_ARGS)
            bad = out_emit(o, OUT_ARGS, ev.index, NULL, ev.text, ev.len);
        if (bad) return -1;
    }
    return o->harmony && final ? out_reason(o, "", 0, 1) : 0;
}

static int out_content(outsplit *o, const char *t, size_t n, int final) {
    if (o->tc && !o->harmony) return out_calls(o, t, n, final);
    return out_emit(o, OUT_CONTENT, -1, NULL, t, n);
}

static int out_reason(outsplit *o, const char *t, size_t n, int final) {
    if (!o->r) return out_content(o, t, n, final);
    if (pk_chat_reasoning_feed(o->r, t, n, final)) return -1;
    size_t rl, cl;
    const char *r = pk_chat_reasoning_text(o->r, &rl), *c = pk_chat_reasoning_content(o->r, &cl);
    if (rl > o->sent_r && out_emit(o, OUT_REASONING, -1, NULL, r + o->sent_r, rl - o->sent_r)) return -1;
    o->sent_r = rl;
    size_t from = o->sent_c;
    o->sent_c = cl;
    return cl > from || final ? out_content(o, c + from, cl - from, final) : 0;
}

/* The next piece of the job's text (final: the last, may be empty). */
static int outsplit_feed(outsplit *o, const char *t, size_t n, int final) {
    return o->tc && o->harmony ? out_calls(o, t, n, final) : out_reason(o, t, n, final);
}

/* The answer's content (after the whole text was fed; text: the job's). */
static const char *outsplit_content(const outsplit *o, const char *text, size_t len, size_t *n) {
    if (o->tc && !o->harmony) return pk_toolcall_content(o->tc, n);
    if (o->r) return pk_chat_reasoning_content(o->r, n);
    if (o->tc) return pk_toolcall_content(o->tc, n);
    *n = len;
    return text;
}

/* Whether the calls made satisfy the request's tool_choice (after the whole
 * text): 0, or -1 with e filled. */
static int check_tool_choice(const job *j, const outsplit *o, api_error *e) {
    if (!o->tc || !strcmp(j->tool_choice, "auto") || !j->tool_choice[0]) return 0;
    pk_error err = {0};
    if (!pk_toolcall_check_choice(o->tc, j->tool_choice, &err)) return 0;
    api_fail(e, 500, "tool_choice", "the model did not follow tool_choice: %s", err.msg);
    return -1;
}

/* The request's stop string that ended the text (NULL: none, or the
   template's end of turn): choice.stop_sequence, pocket's addition to
   OpenAI's shape, which the Anthropic translator reports. */
static json_t *stop_sequence_json(const job *j) {
    return j->stop_hit >= 0 && j->stop_hit < j->stop_user ? json_string(j->stop[j->stop_hit]) : NULL;
}

static const char *finish_reason(const job *j, const outsplit *o) {
    return o->tc && pk_toolcall_count(o->tc) > 0 && !strcmp(j->finish, "stop") ? "tool_calls" : j->finish;
}

json_t *json_text(const char *s, size_t n) {
    size_t k;
    char *t = utf8_sanitize(s, n, &k);
    json_t *v = t ? json_stringn(t, k) : NULL;
    free(t);
    return v;
}

/* A done job's choice of the chat.completion (text_completion); NULL with
 * e filled. */
static json_t *choice_json(const job *j, api_error *e) {
    const char *text = j->text ? j->text : "";
    json_t *lp = j->logprobs ? logprobs_json(j, j->lp, j->n_lp, 0) : json_null();
    if (!j->chat)
        return json_pack("{s:i, s:o, s:o, s:s, s:o*}", "index", j->index, "text", json_text(text, j->len), "logprobs", lp,
                         "finish_reason", j->finish, "stop_sequence", stop_sequence_json(j));
    outsplit o;
    pk_error err = {0};
    if (outsplit_init(&o, j, &err) || outsplit_feed(&o, text, j->len, 1)) {
        api_fail(e, 500, NULL, "the answer could not be read: %s", err.msg[0] ? err.msg : "out of memory");
        outsplit_free(&o);
        json_decref(lp);
        return NULL;
    }
    if (check_tool_choice(j, &o, e)) { outsplit_free(&o); json_decref(lp); return NULL; }
    size_t cl, rl = 0;
    const char *c = outsplit_content(&o, text, j->len, &cl);
    const char *r = o.r ? pk_chat_reasoning_text(o.r, &rl) : NULL;
    int n_calls = o.tc ? pk_toolcall_count(o.tc) : 0;
    if (o.one_call && n_calls > 1) n_calls = 1;
    json_t *m = json_pack("{s:s, s:o}", "role", "assistant", "content", n_calls && !cl ? json_null() : json_text(c, cl));
    if (m && rl) json_object_set_new(m, "reasoning_content", json_text(r, rl));
    if (m && n_calls) {
        json_t *calls = json_array();
        for (int i = 0; i < n_calls; i++) {
            pk_toolcall_call tc;
            if (pk_toolcall_get(o.tc, i, &tc)) continue;
            json_array_append_new(calls, json_pack("{s:o, s:s, s:{s:o, s:o}}", "id", json_text(tc.id, strlen(tc.id)),
                                                   "type", "function", "function", "name", json_text(tc.name, strlen(tc.name)),
                                                   "arguments", json_text(tc.arguments, tc.arguments_len)));
        }
        json_object_set_new(m, "tool_calls", calls);
    }
    const char *fin = finish_reason(j, &o);
    outsplit_free(&o);
    json_t *choice = json_pack("{s:i, s:o, s:o, s:s, s:o*}", "index", j->index, "message", m, "logprobs", lp,
                               "finish_reason", fin, "stop_sequence", stop_sequence_json(j));
    if (!choice) api_fail(e, 500, NULL, "out of memory");
    return choice;
}

/* The chat.completion (text_completion) of n done jobs; NULL with e. */
json_t *completion_json(job *const *jobs, int n, api_error *e) {
    json_t *o = object_json(jobs[0], jobs[0]->chat ? "chat.completion" : "text_completion", NULL);
    json_t *choices = json_object_get(o, "choices");
    for (int i = 0; o && i < n; i++) {
        json_t *c = choice_json(jobs[i], e);
        if (!c) { json_decref(o); return NULL; }
        json_array_append_new(choices, c);
    }
    if (o) {
        json_object_set_new(o, "usage", usage_json(jobs, n));
        json_object_set_new(o, "timings", timings_json(jobs, n));
    } else {
        api_fail(e, 500, NULL, "out of memory");
    }
    return o;
}

/* ---- streaming ------------------------------------------------------------------------ */

/* An OpenAI chunk (stolen) through the API. */
static int out_chunk(stream *st, json_t *chunk) {
    if (!chunk) return -1;
    int r = st->api->stream_chunk(st->ast, chunk, NULL, &st->out);
    json_decref(chunk);
    return r || st->out.oom ? -1 : 0;
}

/* outsplit's emit: a delta of the choice being fed. */
int stream_emit(void *ctx, int kind, int index, const char *id, const char *t, size_t n) {
    stream *st = ctx;
    job *j = st->jobs[st->cur];
    json_t *delta = NULL, *lp = st->lp_pending;
    st->lp_pending = NULL;
    if (kind == OUT_CONTENT || kind == OUT_REASONING) {
        if (!j->chat) {
            size_t k;
            char *v = utf8_sanitize(t, n, &k);
            int bad = !v || out_chunk(st, chunk_json(j, NULL, v, k, NULL, lp));
            if (!v) json_decref(lp);
            free(v);
            return bad ? -1 : 0;
        }
        delta = json_pack("{s:o}", kind == OUT_CONTENT ? "content" : "reasoning_content", json_text(t, n));
    } else if (kind == OUT_CALL) {
        delta = json_pack("{s:[{s:i, s:o, s:s, s:{s:o, s:s}}]}", "tool_calls", "index", index, "id",
                          json_text(id, strlen(id)), "type", "function", "function", "name", json_text(t, n),
                          "arguments", "");
    } else {
        delta = json_pack("{s:[{s:i, s:{s:o}}]}", "tool_calls", "index", index, "function", "arguments", json_text(t, n));
    }
    if (!delta) { json_decref(lp); return -1; }
    return out_chunk(st, chunk_json(j, delta, NULL, 0, NULL, lp));
}

/* New text t[0..n) of choice i (final: the end of it), with its tokens'
 * log-probabilities lp[0..n_lp). */
int stream_piece(stream *st, int i, const char *t, size_t n, const tok_lp *lp, int n_lp, int final) {
    job *j = st->jobs[i];
    choice_stream *cs = &st->cs[i];
    st->cur = i;
    if (n_lp > 0) {
        st->lp_pending = logprobs_json(j, lp, n_lp, cs->lp_off);
        for (int k = 0; k < n_lp; k++) {
            char buf[256];
            int m = pk_model_token_piece(S.model, lp[k].id, buf, sizeof buf);
            if (m > 0) cs->lp_off += (size_t)m;
        }
    }
    int bad = outsplit_feed(&cs->os, t, n, final);
    if (!bad && st->lp_pending) {   /* no piece came out yet: the log-probabilities alone */
        json_t *lpj = st->lp_pending;
        st->lp_pending = NULL;
        bad = out_chunk(st, chunk_json(j, j->chat ? json_object() : NULL, j->chat ? NULL : "", 0, NULL, lpj));
    }
    json_decref(st->lp_pending);
    st->lp_pending = NULL;
    return bad ? -1 : 0;
}

/* The end of choice i (done): the rest of its text decided, its finish
 * chunk; -1 with *msg set when it failed (or broke tool_choice). */
int stream_end_choice(stream *st, int i, char *msg, size_t cap) {
    job *j = st->jobs[i];
    choice_stream *cs = &st->cs[i];
    cs->ended = 1;
    if (!j->finish) {
        snprintf(msg, cap, "generation failed: %s", j->err[0] ? j->err : "cancelled");
        return -1;
    }
    if (stream_piece(st, i, "", 0, NULL, 0, 1)) { snprintf(msg, cap, "out of memory"); return -1; }
    api_error e = {0};
    if (check_tool_choice(j, &cs->os, &e)) { snprintf(msg, cap, "%s", e.msg); return -1; }
    json_t *last = chunk_json(j, j->chat ? json_object() : NULL, NULL, 0, finish_reason(j, &cs->os), NULL);
    json_t *seq = stop_sequence_json(j);
    if (seq) json_object_set_new(json_array_get(json_object_get(last, "choices"), 0), "stop_sequence", seq);
    if (out_chunk(st, last)) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *st = cls;
    while (st->out_pos == st->out.n) {
        st->out_pos = st->out.n = 0;
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        if (!st->started) {
            st->started = 1;
            for (int i = 0; i < st->n; i++) {
                job *j = st->jobs[i];
                json_t *delta = j->chat ? json_pack("{s:s, s:s}", "role", "assistant", "content", "") : NULL;
                if (out_chunk(st, chunk_json(j, delta, j->chat ? NULL : "", 0, NULL, NULL)))
                    return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            continue;
        }
        pthread_mutex_lock(&S.mu);
        for (;;) {
            int i, n_ended = 0, progressed = 0;
            char msg[600];
            for (i = 0; i < st->n; i++) {
                job *j = st->jobs[i];
                choice_stream *cs = &st->cs[i];
                n_ended += cs->ended;
                if (cs->ended) continue;
                if (j->released > cs->sent || j->n_lp > cs->n_lp_sent) {
                    /* the bytes are the job's until it is done: copy them out of the lock */
                    size_t n = j->released - cs->sent;
                    int n_lp = j->n_lp - cs->n_lp_sent;
                    char *t = malloc(n + 1);
                    tok_lp *lp = n_lp ? malloc((size_t)n_lp * sizeof *lp) : NULL;
                    if (t) memcpy(t, j->text + cs->sent, n);
                    if (lp) memcpy(lp, j->lp + cs->n_lp_sent, (size_t)n_lp * sizeof *lp);
                    cs->sent = j->released;
                    cs->n_lp_sent = j->n_lp;
                    pthread_mutex_unlock(&S.mu);
                    int bad = !t || (n_lp && !lp) || stream_piece(st, i, t, n, lp, n_lp, 0);
                    free(t);
                    free(lp);
                    if (bad) return MHD_CONTENT_READER_END_WITH_ERROR;
                    pthread_mutex_lock(&S.mu);
                    progressed = 1;
                    break;
                }
                if (j->state == JOB_DONE) {
                    pthread_mutex_unlock(&S.mu);
                    int bad = stream_end_choice(st, i, msg, sizeof msg);
                    if (bad) {
                        if (st->api->stream_chunk(st->ast, NULL, msg, &st->out) || st->out.oom)
                            return MHD_CONTENT_READER_END_WITH_ERROR;
                        st->finished = 1;
                        goto next;
                    }
                    pthread_mutex_lock(&S.mu);
                    progressed = 1;
                    n_ended++;
                    break;
                }
            }
            if (n_ended == st->n) {
                json_t *u = object_json(st->jobs[0], st->jobs[0]->chat ? "chat.completion.chunk" : "text_completion", NULL);
                if (u) {
                    json_object_set_new(u, "usage", usage_json(st->jobs, st->n));
                    json_object_set_new(u, "timings", timings_json(st->jobs, st->n));
                }
                pthread_mutex_unlock(&S.mu);
                if (out_chunk(st, u) || st->api->stream_chunk(st->ast, NULL, NULL, &st->out) || st->out.oom)
                    return MHD_CONTENT_READER_END_WITH_ERROR;
                st->finished = 1;
                break;
            }
            if (progressed) {
                if (st->out.n) { pthread_mutex_unlock(&S.mu); break; }
                continue;   /* all held back */
            }
            timed_wait(st->jobs[0]->wake, WAIT_MS);
            pthread_mutex_unlock(&S.mu);
            int gone = client_gone(st->conn);
            pthread_mutex_lock(&S.mu);
            if (gone) {
                for (i = 0; i < st->n; i++) job_cancel_locked(st->jobs[i]);
                pthread_mutex_unlock(&S.mu);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            if (st->api->keepalive && S.keepalive_s > 0 && now() - st->last_out >= S.keepalive_s) {
                pthread_mutex_unlock(&S.mu);
                st->api->keepalive(st->ast, &st->out);
                if (st->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
                break;
            }
        }
    next:;
    }
    size_t n = st->out.n - st->out_pos < max ? st->out.n - st->out_pos : max;
    memcpy(buf, st->out.p + st->out_pos, n);
    st->out_pos += n;
    st->last_out = now();
    return (ssize_t)n;
}

static void jobs_release(job **jobs, int n) {
    pthread_mutex_lock(&S.mu);
    for (int i = n - 1; i >= 0; i--) {
        job_cancel_locked(jobs[i]);
        job_unref_locked(jobs[i]);
    }
    pthread_mutex_unlock(&S.mu);
}

static void stream_free(void *cls) {
    stream *st = cls;
    pthread_mutex_lock(&S.mu);
    access_jobs_locked(&st->acc, st->jobs, st->n);
    pthread_mutex_unlock(&S.mu);
    jobs_release(st->jobs, st->n);
    if (st->acc.status) access_write(&st->acc);
    for (int i = 0; i < st->n; i++) outsplit_free(&st->cs[i].os);
    if (st->ast) st->api->stream_free(st->ast);
    json_decref(st->body);
    free(st->out.p);
    free(st);
}

/* ---- the endpoint --------------------------------------------------------------------- */

/* Whether api is OpenAI's own (its "model" is checked). */
int api_is_openai(const serve_api *api) {
    return api == &serve_api_openai_chat || api == &serve_api_openai_completions;
}

/* A completion request in api's form: translated, run, answered. */
mhd_result handle_api(struct MHD_Connection *c, request *rq, const serve_api *api) {
    api_error e = {0};
    job *jobs[MAX_N];
    int chat = 1, n = 0;
    json_t *oreq = NULL, *body = parse_body(rq->body ? rq->body : "", rq->len, &e);
    if (body) oreq = api->request(body, &S.info, &chat, &e);
    if (oreq && api_is_openai(api) && check_model(oreq, &e)) { json_decref(oreq); oreq = NULL; }
    if (oreq) n = request_jobs(oreq, chat, jobs, &e);
    json_decref(oreq);
    if (!n) {
        json_decref(body);
        return send_api_error(c, api, &e);
    }
    if (submit(jobs, n)) {
        for (int i = 0; i < n; i++) { jobs[i]->refs = 1; job_unref(jobs[i]); }
        json_decref(body);
        api_fail(&e, 503, NULL, "the server is busy (%d generating, %d queued); retry later", S.n_parallel, S.n_queue);
        set_code(&e, "server_busy");
        return send_api_error(c, api, &e);
    }
    if (jobs[0]->stream) {
        stream *st = calloc(1, sizeof *st);
        int ok = st != NULL;
        pk_error serr = {0};
        if (st) {
            memcpy(st->jobs, jobs, (size_t)n * sizeof *jobs);
            st->n = n;
            st->api = api;
            st->body = body;
            st->conn = c;
            st->last_out = now();
            for (int i = 0; i < n && ok; i++) {
                ok = !outsplit_init(&st->cs[i].os, jobs[i], &serr);
                st->cs[i].os.emit = stream_emit;
                st->cs[i].os.ctx = st;
            }
            if (ok) ok = (st->ast = api->stream_new(body, &S.info)) != NULL;
        }
        struct MHD_Response *r = ok ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free) : NULL;
        if (!r) {
            if (st) stream_free(st);
            else { jobs_release(jobs, n); json_decref(body); }
            api_fail(&e, 500, NULL, "out of memory");
            return send_api_error(c, api, &e);
        }
        if (cur_rq) {
            st->acc = cur_rq->acc;
            st->acc.status = 200;
            cur_rq->streamed = 1;
        }
        MHD_add_response_header(r, "Content-Type", api->stream_type);
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
        return send_response(c, 200, r);
    }
    /* Not streamed: wait here (this connection's own thread), watching the socket. */
    pthread_mutex_lock(&S.mu);
    for (;;) {
        int done = 0;
        for (int i = 0; i < n; i++) done += jobs[i]->state == JOB_DONE;
        if (done == n) break;
        timed_wait(jobs[0]->wake, WAIT_MS);
        pthread_mutex_unlock(&S.mu);
        int gone = client_gone(c);
        pthread_mutex_lock(&S.mu);
        if (gone) {
            pthread_mutex_unlock(&S.mu);
            jobs_release(jobs, n);
            json_decref(body);
            return MHD_NO;
        }
    }
    pthread_mutex_unlock(&S.mu);
    mhd_result ret;
    int failed = -1;
    for (int i = 0; i < n && failed < 0; i++)
        if (!jobs[i]->finish) failed = i;
    if (failed >= 0) {
        api_fail(&e, S.shutdown ? 503 : 500, NULL, "generation failed: %s",
                 jobs[failed]->err[0] ? jobs[failed]->err : "cancelled");
        ret = send_api_error(c, api, &e);
    } else {
        json_t *comp = completion_json(jobs, n, &e), *resp = comp ? api->response(body, comp, &S.info) : NULL;
        json_decref(comp);
        if (comp && !resp) api_fail(&e, 500, NULL, "out of memory");
        ret = resp ? send_json(c, 200, resp) : send_api_error(c, api, &e);
    }
    pthread_mutex_lock(&S.mu);
    if (cur_rq) access_jobs_locked(&cur_rq->acc, jobs, n);
    pthread_mutex_unlock(&S.mu);
    jobs_release(jobs, n);
    json_decref(body);
    return ret;
}

/* serve_jobs.c - `pocket serve`'s state and the work on it (tools/serve.h):
 * a request's jobs, the compiled grammars they use, the text a job grows
 * (stop strings cut, UTF-8 held back), the queue, the slots and their prompt
 * cache (which idle slot takes a job, what it keeps, where checkpoints go,
 * when its contents are stored), and the worker threads that run the jobs
 * (run_job: the prompt's rest processed, tokens sampled into the job's
 * text). Everything shared is under S.mu. */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

#define PREFILL_CHUNK 256       /* prompt tokens per pk_decode (cancel granularity) */
#define MIN_LOAD_GAIN 16        /* a stored state is loaded when that costs this many tokens
                                   less than the best idle slot (choose_slot_locked) */
#define CKPT_EVERY 1024         /* and every this many tokens of a long prompt */

/* The one server (tools/serve.h). */
struct server S;

static void grammar_release_locked(grammar_entry *g);

void job_unref_locked(job *j) {
    if (--j->refs > 0) return;
    free(j->prompt);
    pk_sampler_free(j->sampler);
    if (j->grammar) grammar_release_locked(j->grammar);
    free(j->tools_json);
    free(j->lp);
    job *leader = j->leader;
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->text);
    pthread_cond_destroy(&j->cv);
    free(j);
    if (leader) job_unref_locked(leader);
}

void job_unref(job *j) {
    pthread_mutex_lock(&S.mu);
    job_unref_locked(j);
    pthread_mutex_unlock(&S.mu);
}

/* ---- compiled grammars ------------------------------------------------------------- */

/* The grammar of gbnf for a job: a kept one of the same text that no job
 * uses, else compiled now and kept (the least recently used idle one
 * leaves when all MAX_GRAMMARS places are taken; when all are in use, it is
 * the job's alone). NULL with e filled (400 naming param) when it does not
 * compile. */
grammar_entry *grammar_acquire(const char *gbnf, const char *param, api_error *e) {
    pthread_mutex_lock(&S.mu);
    for (int i = 0; i < MAX_GRAMMARS; i++) {
        grammar_entry *g = &S.grammars[i];
        if (g->text && !g->busy && !strcmp(g->text, gbnf)) {
            g->busy = 1;
            g->used = ++S.clock;
            pthread_mutex_unlock(&S.mu);
            return g;
        }
    }
    pthread_mutex_unlock(&S.mu);
    pk_grammar *pg = NULL;
    pk_error err = {0};
    if (pk_grammar_new(S.model, gbnf, NULL, &pg, &err)) {
        api_fail(e, err.code == PK_ERR_NOMEM ? 500 : 400, param, "'%s': %s", param, err.msg);
        snprintf(e->code, sizeof e->code, "%s", err.code == PK_ERR_NOMEM ? "" : "invalid_grammar");
        return NULL;
    }
    char *text = strdup(gbnf);
    if (!text) {
        pk_grammar_free(pg);
        api_fail(e, 500, NULL, "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&S.mu);
    grammar_entry *g = NULL;
    for (int i = 0; i < MAX_GRAMMARS; i++) {
        grammar_entry *c = &S.grammars[i];
        if (c->busy) continue;
        if (!c->text) { g = c; break; }
        if (!g || c->used < g->used) g = c;
    }
    if (g) {
        free(g->text);
        pk_grammar_free(g->g);
    } else if (!(g = calloc(1, sizeof *g))) {
        pthread_mutex_unlock(&S.mu);
        free(text);
        pk_grammar_free(pg);
        api_fail(e, 500, NULL, "out of memory");
        return NULL;
    }
    g->text = text;
    g->g = pg;
    g->busy = 1;
    g->used = ++S.clock;
    pthread_mutex_unlock(&S.mu);
    return g;
}

/* The job that used g is gone (mu held; the sampler that used it is freed). */
static void grammar_release_locked(grammar_entry *g) {
    if (g >= S.grammars && g < S.grammars + MAX_GRAMMARS) { g->busy = 0; return; }
    free(g->text);
    pk_grammar_free(g->g);
    free(g);
}

/* Wait on cv for at most ms milliseconds (mu held). */
void timed_wait(pthread_cond_t *cv, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cv, &S.mu, &ts);
}

/* ---- text: UTF-8 and stop strings ------------------------------------------------------ */

/* Length of the longest prefix of s[0..n) that does not end inside a UTF-8
 * sequence that could still be completed by more bytes. */
size_t utf8_complete_len(const char *s, size_t n) {
    size_t back = 0;
    while (back < 3 && back < n && ((unsigned char)s[n - 1 - back] & 0xC0) == 0x80) back++;
    if (back == n) return n;
    unsigned char lead = (unsigned char)s[n - 1 - back];
    size_t need = lead >= 0xF0 && lead <= 0xF4 ? 4 : lead >= 0xE0 && lead < 0xF0 ? 3 : lead >= 0xC2 && lead < 0xE0 ? 2 : 1;
    if (need > 1 && back + 1 < need) return n - back - 1;
    return n;
}

/* Append a piece to the job's text (mu held). Cuts at a completed stop string
 * (returns 1) and advances `released` to what can be shown without revealing
 * a stop string's beginning or half a UTF-8 character. Returns -1 when out of
 * memory. */
static int job_append(job *j, const char *piece, size_t n) {
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 256;
        while (cap < j->len + n + 1) cap *= 2;
        char *t = realloc(j->text, cap);
        if (!t) return -1;
        j->text = t;
        j->cap = cap;
    }
    memcpy(j->text + j->len, piece, n);
    j->len += n;
    j->text[j->len] = 0;
    /* A stop string can only start at or after `released` (held back below). */
    size_t from = j->released;
    size_t cut = SIZE_MAX;
    for (int i = 0; i < j->n_stop; i++) {
        size_t sl = strlen(j->stop[i]);
        const char *hit = memmem(j->text + from, j->len - from, j->stop[i], sl);
        if (hit && (size_t)(hit - j->text) < cut) { cut = (size_t)(hit - j->text); j->stop_hit = i; }
    }
    if (cut != SIZE_MAX) {
        j->len = cut;
        j->text[cut] = 0;
        j->released = cut;
        return 1;
    }
    size_t hold = 0;
    size_t maxk = j->stop_maxlen ? j->stop_maxlen - 1 : 0;
    if (maxk > j->len - from) maxk = j->len - from;
    for (size_t k = maxk; k >= 1 && !hold; k--)
        for (int i = 0; i < j->n_stop && !hold; i++)
            if (strlen(j->stop[i]) > k && !memcmp(j->text + j->len - k, j->stop[i], k)) hold = k;
    size_t rel = utf8_complete_len(j->text, j->len - hold);
    if (rel > j->released) j->released = rel;
    return 0;
}

/* ---- the prompt cache: slots, checkpoints, stored states ------------------------------- */

static void slot_stats_locked(slot *s) {
    pk_stats st;
    pk_context_stats(s->ctx, &st);
    s->st_tokens = st.tokens;
    s->st_bytes = st.weight_bytes;
    s->st_ckpts = pk_context_checkpoints(s->ctx, NULL, 0);
    s->held = pk_context_pos(s->ctx);
}

/* How many tokens of j's prompt s would spare: the common prefix of its
 * tokens and the prompt, at most all but the prompt's last token, as far as
 * the context can go back (s idle, or its own worker calling). */
static int slot_reach(const slot *s, const job *j) {
    int l = pcache_lcp(pk_context_tokens(s->ctx), pk_context_pos(s->ctx), j->prompt, j->n_prompt);
    return pk_context_reachable(s->ctx, l < j->n_prompt - 1 ? l : j->n_prompt - 1);
}

/* The idle slot for j (mu held; NULL when none is idle): the one that costs
 * least, counting the prompt tokens it must process and the tokens of
 * another conversation it would drop (what it holds beyond what it keeps:
 * to be processed again if that conversation comes back); ties go to the
 * least recently used. So a conversation's next turn goes back to its slot,
 * a new one to an empty slot or to the one it disturbs least, and one that
 * shares a long system prompt with a slot to it, unless that would drop a
 * longer conversation. *entry: a stored state to load first (0: none), when
 * that costs at least MIN_LOAD_GAIN tokens less (it goes to the idle slot
 * holding the fewest tokens). */
static slot *choose_slot_locked(const job *j, uint64_t *entry) {
    slot *best = NULL, *emptiest = NULL;
    int64_t best_cost = 0;
    *entry = 0;
    for (int i = 0; i < S.n_parallel; i++) {
        slot *s = &S.slots[i];
        if (s->job) continue;
        int held = pk_context_pos(s->ctx), kept = slot_reach(s, j);
        int64_t cost = (int64_t)(j->n_prompt - kept) + (held - kept);
        if (!best || cost < best_cost || (cost == best_cost && s->last_used < best->last_used)) {
            best = s;
            best_cost = cost;
        }
        if (!emptiest || held < pk_context_pos(emptiest->ctx) ||
            (held == pk_context_pos(emptiest->ctx) && s->last_used < emptiest->last_used))
            emptiest = s;
    }
    if (best && S.cache) {
        uint64_t id;
        int r = pcache_match(S.cache, j->prompt, j->n_prompt, j->n_prompt - 1, &id);
        int64_t cost = (int64_t)(j->n_prompt - r) + pk_context_pos(emptiest->ctx);
        if (id && cost + MIN_LOAD_GAIN <= best_cost) {
            *entry = id;
            best = emptiest;
        }
    }
    return best;
}

/* Give queued jobs to idle slots, oldest job first (mu held). */
static void dispatch_locked(void) {
    int given = 0;
    while (S.head && !S.shutdown) {
        job *j = S.head;
        uint64_t entry;
        slot *s = choose_slot_locked(j, &entry);
        if (!s) break;
        S.head = j->next;
        if (!S.head) S.tail = NULL;
        S.n_waiting--;
        S.n_running++;
        j->state = JOB_RUNNING;
        j->t_start = now();
        s->job = j;
        s->entry = entry;
        s->last_used = ++S.clock;
        given = 1;
    }
    if (given) pthread_cond_broadcast(&S.work_cv);
}

/* Whether s's contents, of which a new prompt keeps `kept` tokens out of
 * `held`, are another conversation's that a later request may want back:
 * the new prompt does not keep the slot's last prompt, nor half of what it
 * holds. (A conversation's next turn keeps its last prompt; a reasoning
 * model's next turn drops the reasoning but keeps the prompt; another
 * conversation sharing a long system prompt keeps most of it, and loses
 * little.) */
static int slot_leaving(const slot *s, int kept, int held) {
    return held > 0 && kept < s->last_prompt && 2 * kept < held;
}

/* Make s hold the longest prefix of j's prompt it can reach: a stored
 * state (entry, when given) loaded, or its own contents, cut back with
 * pk_context_truncate. Contents that leave the slot are stored first
 * (S.cache). Returns the position reached; where: "" or where the state came
 * from. Runs on s's worker, mu not held. */
static int restore_prefix(slot *s, const job *j, uint64_t entry, char *where, size_t cap) {
    pk_context *c = s->ctx;
    int held = pk_context_pos(c), own = slot_reach(s, j);
    where[0] = 0;
    if (S.cache && slot_leaving(s, entry ? 0 : own, held)) {
        int kept = pcache_save(S.cache, c, S.cache_ram);
        if (!S.quiet && kept)
            fprintf(stderr, "pocket serve: slot %d: its %d tokens (another conversation's) kept in%s%s\n", s->index,
                    held, kept & PCACHE_RAM ? " RAM" : "", kept & PCACHE_FILE ? " the directory" : "");
    }
    if (entry && !pcache_load(S.cache, entry, c, where, cap)) {
        own = slot_reach(s, j);
        pthread_mutex_lock(&S.mu);
        s->last_prompt = pk_context_pos(c);
        pthread_mutex_unlock(&S.mu);
    }
    return pk_context_truncate(c, own);
}

static int add_position(int *pos, int k, int p, int from, int n) {
    if (p <= from || p > n) return k;
    for (int i = 0; i < k; i++)
        if (pos[i] == p) return k;
    pos[k] = p;
    return k + 1;
}

static int ascending(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

/* Where to take checkpoints while processing j's prompt from position
 * `from` (models with recurrent layers; none otherwise): positions in
 * (from, n_prompt], ascending, at most --ctx-checkpoints of them (the ring's
 * size: more would replace each other), chosen in this order: the end of the
 * prompt (the next turn of a conversation continues there, or diverges
 * there when a reasoning model's reasoning is left out of the history), the
 * starts of the generation prompt, of the last message and of the one before
 * (a regenerated or edited last message), then every CKPT_EVERY tokens, the
 * latest first (a long prompt that diverges inside). Returns their count. */
static int plan_checkpoints(const job *j, int from, int *pos) {
    if (!S.recurrent || S.n_ckpt <= 0) return 0;
    int n = j->n_prompt, k = add_position(pos, 0, n, from, n);
    for (int i = 0; i < N_STARTS && k < S.n_ckpt; i++) k = add_position(pos, k, j->starts[i], from, n);
    for (int p = n / CKPT_EVERY * CKPT_EVERY; p > from && k < S.n_ckpt; p -= CKPT_EVERY) k = add_position(pos, k, p, from, n);
    qsort(pos, (size_t)k, sizeof *pos, ascending);
    return k;
}

/* ---- the workers ------------------------------------------------------------------- */

/* Run one job on a slot (mu not held); entry: a stored state to load first
 * (0: none). Sets j->finish ("stop"/"length"), or leaves it NULL when
 * cancelled or failed (then j->err says why, if it failed or the server is
 * shutting down). */
void run_job(slot *s, job *j, uint64_t entry) {
    pk_error err = {0};
    int n_ctx = pk_context_n_ctx(s->ctx);
    char buf[256], from[sizeof j->from];
    const char *finish = NULL;
    int n_gen = 0, cancel = 0, cached = 0;
    double t_gen = 0, t_prompt = 0;
    pthread_mutex_lock(&S.mu);
    cancel = j->cancel || S.shutdown;
    pthread_mutex_unlock(&S.mu);
    if (cancel) goto done;
    double t0 = now();
    cached = restore_prefix(s, j, entry, from, sizeof from);
    int ck[MAX_CKPT];
    int n_ck = plan_checkpoints(j, cached, ck);
    /* taken inside the batches that reach them: a batch is not cut there */
    if (pk_context_plan_checkpoints(s->ctx, ck, n_ck, &err))
        fprintf(stderr, "pocket serve: slot %d: no checkpoints for this prompt: %s\n", s->index, err.msg);
    for (int i = cached; i < j->n_prompt;) {
        pthread_mutex_lock(&S.mu);
        cancel = j->cancel || S.shutdown;
        pthread_mutex_unlock(&S.mu);
        if (cancel) break;
        int end = j->n_prompt - i < PREFILL_CHUNK ? j->n_prompt : i + PREFILL_CHUNK;
        if (pk_decode(s->ctx, j->prompt + i, end - i, &err)) {
            pthread_mutex_lock(&S.mu);
            snprintf(j->err, sizeof j->err, "%s", err.msg);
            pthread_mutex_unlock(&S.mu);
            cancel = 1;
            break;
        }
        i = end;
    }
    t_prompt = now() - t0;
    pthread_mutex_lock(&S.mu);
    S.prompt_seconds_total += t_prompt;
    if (!cancel) {
        S.prompt_tokens_total += (uint64_t)(j->n_prompt - cached);
        S.prompt_tokens_cached_total += (uint64_t)cached;
    }
    j->n_cached = cached;
    snprintf(j->from, sizeof j->from, "%s", from);
    s->last_prompt = j->n_prompt;
    slot_stats_locked(s);
    pthread_mutex_unlock(&S.mu);
    if (cancel) goto done;
    /* The prompt is the repetition penalty's history; OpenAI's presence and
       frequency penalties count the completion only. A grammar starts
       after the prompt (and after the reasoning, when the prompt opened a
       <think>), closing the output within the tokens left. */
    if (!j->penalties)
        for (int i = 0; i < j->n_prompt; i++) pk_sampler_accept(j->sampler, j->prompt[i]);

    int limit = j->max_tokens < 0 ? INT_MAX : j->max_tokens;
    /* the reasoning budget: inside <think> (opened by the prompt, or first
       in the text), after reasoning_budget tokens "\n</think>\n\n" is
       generated instead of what the model would */
    int in_think = j->reasoning_budget >= 0 && j->think_open, think_known = j->think_open, n_forced = 0, i_forced = 0;
    size_t think_from = 0;
    int32_t forced[16];
    int grammar_pending = j->grammar != NULL;
    finish = "length";
    t0 = now();
    while (n_gen < limit) {
        int32_t id;
        tok_lp lp = {0};
        if (in_think && n_forced == 0 && j->n_reasoning >= j->reasoning_budget) {
            n_forced = pk_model_tokenize(S.model, "\n</think>\n\n", 11, forced, 16, 0, 1);
            if (n_forced < 0 || n_forced > 16) n_forced = 0;
            in_think = 0;
        }
        if (i_forced < n_forced) {
            id = forced[i_forced++];
            lp.id = -1;
        } else {
            if (grammar_pending && !in_think) {
                grammar_pending = 0;
                if (pk_sampler_set_grammar(j->sampler, j->grammar->g, &err)) {
                    pthread_mutex_lock(&S.mu);
                    snprintf(j->err, sizeof j->err, "%s", err.msg);
                    pthread_mutex_unlock(&S.mu);
                    finish = NULL;
                    break;
                }
                if (limit != INT_MAX) pk_sampler_grammar_limit(j->sampler, limit - n_gen);
            }
            id = pk_sampler_sample(j->sampler, pk_context_logits(s->ctx));
            if (pk_model_is_eog(S.model, id)) { finish = "stop"; break; }
            if (j->logprobs) {
                lp.id = id;
                lp.lp = pk_sampler_logprob(j->sampler, id);
                lp.n_top = j->top_logprobs ? pk_sampler_top_logprobs(j->sampler, j->top_logprobs, lp.top_id, lp.top_lp) : 0;
            }
        }
        pk_sampler_accept(j->sampler, id);
        int n = pk_model_token_piece(S.model, id, buf, sizeof buf);
        char *big = NULL;
        if (n > (int)sizeof buf) {
            big = malloc((size_t)n);
            if (!big || pk_model_token_piece(S.model, id, big, n) != n) n = 0;
        }
        n_gen++;
        pthread_mutex_lock(&S.mu);
        int r = n > 0 ? job_append(j, big ? big : buf, (size_t)n) : 0;
        if (r >= 0 && j->logprobs && lp.id >= 0) {
            if (j->n_lp == j->cap_lp) {
                int cap = j->cap_lp ? 2 * j->cap_lp : 64;
                tok_lp *t = realloc(j->lp, (size_t)cap * sizeof *t);
                if (t) { j->lp = t; j->cap_lp = cap; }
            }
            if (j->n_lp < j->cap_lp) j->lp[j->n_lp++] = lp;
        }
        if (r >= 0 && j->reasoning_budget >= 0 && n_forced == 0) {
            if (!think_known) {
                size_t k = 0;
                while (k < j->len && (j->text[k] == ' ' || j->text[k] == '\n')) k++;
                size_t m = j->len - k < 7 ? j->len - k : 7;
                if (memcmp(j->text + k, "<think>", m)) think_known = 1;
                else if (m == 7) think_known = in_think = 1, think_from = k + 7;
            }
            if (in_think && memmem(j->text + think_from, j->len - think_from, "</think>", 8)) in_think = 0;
            else if (in_think) j->n_reasoning++;
        }
        j->n_gen = n_gen;
        S.gen_tokens_total++;
        if (n_gen == 1) j->t_first = now();
        cancel = j->cancel || S.shutdown;
        if (r < 0) snprintf(j->err, sizeof j->err, "out of memory");
        pthread_cond_broadcast(j->wake);
        pthread_mutex_unlock(&S.mu);
        free(big);
        if (r < 0 || cancel) { finish = NULL; break; }
        if (r == 1) { finish = "stop"; break; }
        /* a grammar that allows only the end has ended the output; one that is
           complete at max_tokens was closed in time by its limit: not cut */
        int gs = j->grammar && !grammar_pending ? pk_sampler_grammar_status(j->sampler, NULL) : PK_GRAMMAR_NONE;
        if (gs == PK_GRAMMAR_MUST_END || (n_gen >= limit && gs == PK_GRAMMAR_CAN_END)) {
            finish = "stop";
            break;
        }
        if (n_gen >= limit) break;
        /* prompt + completion stay within the context (the last token is not decoded) */
        if (pk_context_pos(s->ctx) + 1 >= n_ctx) break;
        if (pk_decode(s->ctx, &id, 1, &err)) {
            pthread_mutex_lock(&S.mu);
            snprintf(j->err, sizeof j->err, "%s", err.msg);
            pthread_mutex_unlock(&S.mu);
            finish = NULL;
            break;
        }
    }
    t_gen = now() - t0;
done:
    pthread_mutex_lock(&S.mu);
    S.gen_seconds_total += t_gen;
    j->prompt_ms = t_prompt * 1e3;
    j->gen_ms = t_gen * 1e3;
    slot_stats_locked(s);
    j->finish = finish;
    if (finish) j->released = j->len;   /* a partial stop string or character at the end is text */
    if (!finish && !j->err[0] && S.shutdown) snprintf(j->err, sizeof j->err, "the server is shutting down");
    const char *how = finish ? finish : j->err[0] ? "failed" : "cancelled";
    double queued = j->t_start - j->t_submit;
    pthread_mutex_unlock(&S.mu);
    if (!S.quiet)
        fprintf(stderr, "pocket serve: %s slot %d: prompt %d tokens (%d cached%s%s) %.0f ms, generated %d (%s) %.1f tok/s, "
                "queued %.0f ms\n", j->id, s->index, j->n_prompt, cached, j->from[0] ? " from " : "", j->from,
                t_prompt * 1e3, n_gen, how, t_gen > 0 ? n_gen / t_gen : 0.0, queued * 1e3);
}

/* The model file changed under the mapping (pk_model_check_file): fail the
 * job, and stop the server, since further reads of the mapping may fault or
 * see other bytes. The main thread (in sigwait) is woken by SIGTERM. */
static void model_changed(job *j, const char *msg) {
    pthread_mutex_lock(&S.mu);
    snprintf(j->err, sizeof j->err, "%s", msg);
    if (!S.fatal[0]) snprintf(S.fatal, sizeof S.fatal, "%s", msg);
    S.shutdown = 1;
    pthread_cond_broadcast(&S.work_cv);
    pthread_mutex_unlock(&S.mu);
    kill(getpid(), SIGTERM);
}

/* A slot's thread: runs the jobs dispatch_locked gives it; at shutdown,
 * the one it was given last (cancelled at once), then ends. */
void *worker_main(void *arg) {
    slot *s = arg;
    pthread_mutex_lock(&S.mu);
    for (;;) {
        while (!s->job && !S.shutdown) pthread_cond_wait(&S.work_cv, &S.mu);
        job *j = s->job;
        if (!j) break;
        uint64_t entry = s->entry;
        int skip = j->cancel;
        pthread_mutex_unlock(&S.mu);
        pk_error ferr = {0};
        if (!skip && pk_model_check_file(S.model, &ferr)) model_changed(j, ferr.msg);
        else if (!skip) run_job(s, j, entry);
        pthread_mutex_lock(&S.mu);
        S.n_running--;
        if (j->cancel && !j->finish) S.cancelled_total++;
        j->state = JOB_DONE;
        j->t_end = now();
        s->job = NULL;
        s->entry = 0;
        pthread_cond_broadcast(j->wake);
        job_unref_locked(j);
        dispatch_locked();
    }
    pthread_mutex_unlock(&S.mu);
    return NULL;
}

/* The client went away (mu held): a queued job leaves the queue at once (and
 * its place is free), a running one stops after the current token. */
void job_cancel_locked(job *j) {
    if (j->state == JOB_DONE) return;
    j->cancel = 1;
    if (j->state != JOB_QUEUED) return;
    job **pp = &S.head, *prev = NULL;
    while (*pp && *pp != j) { prev = *pp; pp = &(*pp)->next; }
    if (!*pp) return;
    *pp = j->next;
    if (S.tail == j) S.tail = prev;
    S.n_waiting--;
    S.cancelled_total++;
    j->state = JOB_DONE;
    pthread_cond_broadcast(j->wake);
    job_unref_locked(j);        /* the worker's reference */
}

/* Queue n jobs (one request's choices); 0, or -1 when the server has not
 * room for them all (parallel + queue). */
int submit(job **jobs, int n) {
    pthread_mutex_lock(&S.mu);
    if (S.shutdown || S.n_running + S.n_waiting + n > S.n_parallel + S.n_queue) {
        S.rejected_busy_total++;
        pthread_mutex_unlock(&S.mu);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        job *j = jobs[i];
        j->refs = 2;    /* the connection and the worker */
        if (i) {
            j->leader = jobs[0];
            j->wake = &jobs[0]->cv;
            jobs[0]->refs++;
        }
        j->state = JOB_QUEUED;
        j->t_submit = now();
        j->next = NULL;
        if (S.tail) S.tail->next = j; else S.head = j;
        S.tail = j;
        S.n_waiting++;
    }
    dispatch_locked();
    pthread_mutex_unlock(&S.mu);
    return 0;
}

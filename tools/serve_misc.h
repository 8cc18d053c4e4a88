/* tools/serve_misc.h - pocket serve's small endpoints and habits beside its
 * request path: GET /v1/models/{id}, llama-server's /tokenize, /detokenize,
 * /props and /slots bodies, CORS (--cors) and the access log line.
 *
 * JSON and strings in, JSON and strings out: no connection, no lock. The
 * server (serve_http.c) gathers what they show under its mutex and sends what
 * they return; tests and fuzz/fuzz_serve.c call them directly.
 */
#ifndef POCKET_SERVE_MISC_H
#define POCKET_SERVE_MISC_H

#include <stddef.h>

#include <jansson.h>

#include "pocket.h"
#include "serve_api.h"

#ifndef POCKET_VERSION
#define POCKET_VERSION "0.1.0"
#endif

/* ---- models ---------------------------------------------------------------------------- */

/* The model object of GET /v1/models and /v1/models/{id} (new reference). */
json_t *misc_model_json(const serve_info *si);
/* GET /v1/models/{id}: the model object when id is the served one, else
 * NULL with a 404 naming id in e (OpenAI's answer to an unknown model). */
json_t *misc_model_get(const serve_info *si, const char *id, api_error *e);

/* ---- llama-server's endpoints ----------------------------------------------------------- */

/* A request body: a JSON object (new reference), or NULL with a 400 in e. */
json_t *misc_parse_body(const char *body, size_t len, api_error *e);
/* POST /tokenize {content, add_special = false, parse_special = true,
 * with_pieces = false} -> {tokens: [id...]} or {tokens: [{id, piece}...]}
 * (piece: a string, or its bytes as numbers when they are not UTF-8). */
json_t *misc_tokenize(const pk_model *m, const json_t *body, api_error *e);
/* POST /detokenize {tokens: [id...]} -> {content} (bytes that are not UTF-8
 * become U+FFFD); an id out of the vocabulary is a 400 naming it. */
json_t *misc_detokenize(const pk_model *m, const json_t *body, api_error *e);

/* What /props shows beside serve_info. */
typedef struct misc_props {
    const char *chat_format;        /* the built-in formatter in use ("chatml", ...) */
    int n_parallel;                 /* --parallel */
    pk_sampler_params sp;           /* the sampling defaults */
    int seed_given;                 /* --seed (else each request gets a fresh seed) */
} misc_props;
/* GET /props: llama-server's shape as far as it applies. */
json_t *misc_props_json(const pk_model *m, const serve_info *si, const misc_props *p);

/* One slot as /slots shows it (copied under the server's mutex). */
typedef struct misc_slot {
    int id, n_ctx;
    int is_processing;
    int n_tokens;                   /* tokens it holds (a busy slot: as of its last prompt) */
    int n_checkpoints;
    char request_id[48];            /* busy: its request's id */
    int n_prompt, n_decoded, max_tokens;
} misc_slot;
/* GET /slots: an array, one object per slot. */
json_t *misc_slots_json(const misc_slot *s, int n);

/* ---- CORS ----------------------------------------------------------------------------------- */

#define CORS_MAX 32
typedef struct serve_cors {
    int any;                        /* "*": every origin */
    int n;
    char origin[CORS_MAX][256];     /* scheme://host[:port], as given */
} serve_cors;
/* Add the origins of one --cors value (a comma list). -1 with a one-line
 * message naming the value in err when one is not "*" nor scheme://host[:port]. */
int cors_add(serve_cors *c, const char *list, char *err, size_t cap);
/* The request's Origin header (NULL: none) when it is allowed: the value to
 * send back in Access-Control-Allow-Origin; else NULL. */
const char *cors_allowed(const serve_cors *c, const char *origin);
/* Access-Control-Allow-Headers of a preflight: the headers the APIs' clients
 * send, and the ones asked for (Access-Control-Request-Headers, NULL: none)
 * when that is a list of header names; written to buf (NUL-terminated). */
void cors_allow_headers(const char *requested, char *buf, size_t cap);

/* ---- the access log ------------------------------------------------------------------------ */

/* One request as its log line tells it. */
typedef struct serve_access {
    char method[16];
    char path[256];
    char client[64];                /* the peer's address ("" if unknown) */
    double t0;                      /* when its headers arrived (now()) */
    int status;                     /* 0: nothing was sent (the client went away) */
    char msg[256];                  /* a refusal's message */
    int n_prompt, n_cached, n_gen;  /* < 0: not a generation */
} serve_access;
void access_begin(serve_access *a, const char *method, const char *url, const char *client, double t0);
/* Keep the message of an error body ({"error": {"message"}} or {"error": "..."}). */
void access_error(serve_access *a, const json_t *body);
/* "access TIME CLIENT METHOD PATH STATUS N ms[ prompt P cached C generated G][ error: MSG]"
 * (control and non-ASCII bytes of the path and message as \xHH). */
void access_line(const serve_access *a, double t_end, char *buf, size_t cap);

#endif

/* test_serve_responses.c - the Responses API translator (tools/serve_
 * responses.c) on its own: request bodies -> the OpenAI chat request they
 * become (compared whole) and every refusal (status, param, message); chat
 * completions -> response objects; chunk sequences (text; reasoning then
 * text; a call with its arguments in pieces; two calls after text; cut by
 * the length limit; failed; empty) -> the exact event sequence, reparsed as
 * a client does (each event's name is its type, sequence numbers count from
 * 0, item ids and output indexes agree between added, deltas and done, the
 * deltas add up to the done texts and arguments, and the final response's
 * output is the items as done); refusals in OpenAI's error shape. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/serve_api.h"
#include "testhelp.h"

static const serve_info SI = {.model_id = "tiny", .arch = "qwen3moe", .file = "tiny.gguf", .n_ctx = 4096,
                              .created = 1000, .version = "test"};

/* Test JSON is written with ' for " (none of the texts has an apostrophe). */
static json_t *J(const char *s) {
    char *d = strdup(s);
    for (char *p = d; *p; p++)
        if (*p == '\'') *p = '"';
    json_error_t je;
    json_t *v = json_loads(d, JSON_DECODE_ANY, &je);
    if (!v) { fprintf(stderr, "bad test JSON (%s): %s\n", je.text, d); abort(); }
    free(d);
    return v;
}

static char *dump(const json_t *v) { return v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("(null)"); }

static void same_json(const char *what, const json_t *got, const json_t *want) {
    int ok = got && json_equal(got, want);
    if (!ok) {
        char *g = dump(got), *w = dump(want);
        TEST_CHECK(0, "%s:\n  got  %s\n  want %s", what, g, w);
        free(g);
        free(w);
    } else TEST_COND(what, 1);
}

/* ---- requests ------------------------------------------------------------------- */

static json_t *request(const char *body, api_error *e, int *chat) {
    json_t *b = J(body);
    memset(e, 0, sizeof *e);
    *chat = -1;
    json_t *r = serve_api_responses.request(b, &SI, chat, e);
    json_decref(b);
    return r;
}

static void expect_request(const char *body, const char *want) {
    api_error e;
    int chat;
    json_t *r = request(body, &e, &chat), *w = J(want);
    if (!r) TEST_CHECK(0, "refused (%d %s: %s): %s", e.status, e.param, e.msg, body);
    else same_json(body, r, w);
    TEST_CHECK(chat == 1, "a chat request: %s", body);
    json_decref(r);
    json_decref(w);
}

static void expect_refusal(const char *body, const char *param, const char *needle) {
    api_error e;
    int chat;
    json_t *r = request(body, &e, &chat);
    TEST_CHECK(!r, "accepted: %s", body);
    json_decref(r);
    TEST_CHECK(e.status == 400, "status %d for %s", e.status, body);
    TEST_CHECK(!strcmp(e.param, param), "param '%s', not '%s': %s", e.param, param, body);
    TEST_CHECK(strstr(e.msg, needle) && !strchr(e.msg, '\n'), "message [%s] lacks [%s]", e.msg, needle);
    /* and in OpenAI's error shape */
    json_t *err = serve_api_responses.error(&e), *o = json_object_get(err, "error");
    TEST_CHECK(json_is_object(o) && !strcmp(json_string_value(json_object_get(o, "message")) ?: "", e.msg) &&
               !strcmp(json_string_value(json_object_get(o, "type")) ?: "", "invalid_request_error") &&
               (param[0] ? !strcmp(json_string_value(json_object_get(o, "param")) ?: "", param)
                         : json_is_null(json_object_get(o, "param"))) &&
               json_is_null(json_object_get(o, "code")), "error object for %s", body);
    json_decref(err);
}

static void test_requests(void) {
    /* a string input, instructions, the sampling fields, streaming */
    expect_request("{'model':'tiny','input':'Hello','instructions':'Be brief.','max_output_tokens':64,"
                   "'temperature':0.5,'top_p':0.9,'stream':true,'store':false,'user':'u1','metadata':{'a':'b'},"
                   "'parallel_tool_calls':false,'prompt_cache_key':'k','include':['reasoning.encrypted_content'],"
                   "'safety_identifier':'s','service_tier':'auto','truncation':'disabled','previous_response_id':null}",
                   "{'model':'tiny','messages':[{'role':'system','content':'Be brief.'},{'role':'user','content':'Hello'}],"
                   "'max_tokens':64,'temperature':0.5,'top_p':0.9,'stream':true,'stream_options':{'include_usage':true},"
                   "'parallel_tool_calls':false}");
    /* items: every role, parts, reasoning before a message and before calls, two calls joining the
       message before them, their outputs, string and part outputs */
    expect_request(
        "{'input':[{'role':'developer','content':'Use tools.'},"
        "{'type':'message','role':'user','content':[{'type':'input_text','text':'Weather in Paris'},"
        "{'type':'input_text','text':' and Rome?'}]},"
        "{'type':'reasoning','id':'rs_1','summary':[{'type':'summary_text','text':'short'}],"
        "'content':[{'type':'reasoning_text','text':'Two cities.'}],'encrypted_content':null},"
        "{'type':'message','role':'assistant','id':'msg_1','status':'completed',"
        "'content':[{'type':'output_text','text':'Checking.','annotations':[]}]},"
        "{'type':'function_call','id':'fc_1','call_id':'call_a','name':'weather','arguments':'{\\'city\\':\\'Paris\\'}','status':'completed'},"
        "{'type':'function_call','call_id':'call_b','name':'weather','arguments':'{}'},"
        "{'type':'function_call_output','call_id':'call_a','output':'18C'},"
        "{'type':'function_call_output','call_id':'call_b','output':[{'type':'input_text','text':'21C'}]},"
        "{'type':'reasoning','summary':[{'type':'summary_text','text':'Both known.'}]},"
        "{'type':'function_call','call_id':'call_c','name':'log','arguments':'{}'},"
        "{'type':'function_call_output','call_id':'call_c','output':'ok'},"
        "{'role':'system','content':'Answer now.'},"
        "{'type':'reasoning','summary':[{'type':'summary_text','text':'dropped: no assistant item follows'}]},"
        "{'role':'user','content':'Thanks'}]}",
        "{'messages':[{'role':'developer','content':'Use tools.'},"
        "{'role':'user','content':[{'type':'text','text':'Weather in Paris'},{'type':'text','text':' and Rome?'}]},"
        "{'role':'assistant','content':[{'type':'text','text':'Checking.'}],'reasoning_content':'Two cities.',"
        "'tool_calls':[{'id':'call_a','type':'function','function':{'name':'weather','arguments':'{\\'city\\':\\'Paris\\'}'}},"
        "{'id':'call_b','type':'function','function':{'name':'weather','arguments':'{}'}}]},"
        "{'role':'tool','tool_call_id':'call_a','content':'18C'},"
        "{'role':'tool','tool_call_id':'call_b','content':[{'type':'text','text':'21C'}]},"
        "{'role':'assistant','content':null,'reasoning_content':'Both known.',"
        "'tool_calls':[{'id':'call_c','type':'function','function':{'name':'log','arguments':'{}'}}]},"
        "{'role':'tool','tool_call_id':'call_c','content':'ok'},"
        "{'role':'system','content':'Answer now.'},{'role':'user','content':'Thanks'}]}");
    /* a call after a tool result opens a new assistant message; an assistant refusal part is text */
    expect_request("{'input':[{'role':'user','content':'x'},{'role':'assistant','content':[{'type':'refusal','refusal':'No.'}]},"
                   "{'role':'user','content':'y'},{'type':'function_call','call_id':'c1','name':'f','arguments':''}]}",
                   "{'messages':[{'role':'user','content':'x'},{'role':'assistant','content':[{'type':'text','text':'No.'}]},"
                   "{'role':'user','content':'y'},{'role':'assistant','content':null,'tool_calls':[{'id':'c1','type':'function',"
                   "'function':{'name':'f','arguments':''}}]}]}");
    /* tools, a named tool_choice, a JSON schema, reasoning effort */
    expect_request("{'input':'hi','tools':[{'type':'function','name':'weather','description':'The weather.',"
                   "'parameters':{'type':'object','properties':{'city':{'type':'string'}},'required':['city']},'strict':true},"
                   "{'type':'function','name':'noop','parameters':null,'strict':null}],"
                   "'tool_choice':{'type':'function','name':'weather'},"
                   "'text':{'format':{'type':'json_schema','name':'city','schema':{'type':'object'},'strict':true},"
                   "'verbosity':'low'},'reasoning':{'effort':'high','summary':'auto'}}",
                   "{'messages':[{'role':'user','content':'hi'}],'tools':[{'type':'function','function':{'name':'weather',"
                   "'description':'The weather.','parameters':{'type':'object','properties':{'city':{'type':'string'}},"
                   "'required':['city']},'strict':true}},{'type':'function','function':{'name':'noop'}}],"
                   "'tool_choice':{'type':'function','function':{'name':'weather'}},"
                   "'response_format':{'type':'json_schema','json_schema':{'name':'city','schema':{'type':'object'},'strict':true}},"
                   "'reasoning_effort':'high'}");
    expect_request("{'input':'hi','tool_choice':'required','text':{'format':{'type':'json_object'}},'reasoning':{'effort':'minimal'}}",
                   "{'messages':[{'role':'user','content':'hi'}],'tool_choice':'required','response_format':{'type':'json_object'},"
                   "'reasoning_effort':'low'}");
    expect_request("{'input':'hi','text':{'format':{'type':'json_schema','schema':{}}},'reasoning':{'effort':'xhigh'},'stream':false}",
                   "{'messages':[{'role':'user','content':'hi'}],'response_format':{'type':'json_schema',"
                   "'json_schema':{'name':'response','schema':{}}},'reasoning_effort':'high'}");
    expect_request("{'input':'hi','text':{'format':{'type':'text'}},'reasoning':{'effort':'none'},'tool_choice':'none'}",
                   "{'messages':[{'role':'user','content':'hi'}],'response_format':{'type':'text'},'tool_choice':'none',"
                   "'chat_template_kwargs':{'enable_thinking':false}}");
    /* pocket's own fields pass through; effort none joins the kwargs given */
    expect_request("{'input':'hi','top_k':20,'min_p':0.1,'seed':7,'stop':['x'],'chat_template_kwargs':{'a':1},"
                   "'reasoning':{'effort':'none'}}",
                   "{'messages':[{'role':'user','content':'hi'}],'top_k':20,'min_p':0.1,'seed':7,'stop':['x'],"
                   "'chat_template_kwargs':{'a':1,'enable_thinking':false}}");

    /* refusals: the body, the param named, words of the message */
    static const char *const refusals[][3] = {
        {"[1]", "", "JSON object"},
        {"{}", "input", "missing"},
        {"{'input':5}", "input", "got a number"},
        {"{'input':[]}", "input", "no message"},
        {"{'input':'hi','previous_response_id':'resp_1'}", "previous_response_id", "stateless"},
        {"{'input':'hi','conversation':{'id':'c'}}", "conversation", "stateless"},
        {"{'input':'hi','background':true}", "background", "background"},
        {"{'input':'hi','prompt':{'id':'p'}}", "prompt", "prompt templates"},
        {"{'input':'hi','max_tool_calls':3}", "max_tool_calls", "not supported"},
        {"{'input':'hi','top_logprobs':2}", "top_logprobs", "logprobs"},
        {"{'input':'hi','truncation':'auto'}", "truncation", "disabled"},
        {"{'input':'hi','frobnicate':1}", "frobnicate", "unknown parameter 'frobnicate'"},
        {"{'input':'hi','model':3}", "model", "string"},
        {"{'input':'hi','instructions':['x']}", "instructions", "string"},
        {"{'input':'hi','max_output_tokens':'many'}", "max_output_tokens", "integer"},
        {"{'input':'hi','temperature':'hot'}", "temperature", "number"},
        {"{'input':'hi','stream':'yes'}", "stream", "boolean"},
        {"{'input':'hi','include':['message.output_text.logprobs']}", "include", "logprobs are not supported"},
        {"{'input':'hi','include':'x'}", "include", "array"},
        {"{'input':'hi','reasoning':{'effort':'max'}}", "reasoning.effort", "got \"max\""},
        {"{'input':'hi','reasoning':'high'}", "reasoning", "object"},
        {"{'input':[{'type':'item_reference','id':'msg_1'}]}", "input[0]", "stores nothing"},
        {"{'input':[{'role':'user','content':'a'},{'type':'web_search_call','id':'w'}]}", "input[1]", "\"web_search_call\" is not supported"},
        {"{'input':['hi']}", "input[0]", "must be an object"},
        {"{'input':[{'type':7}]}", "input[0]", "type' must be a string"},
        {"{'input':[{'role':'tool','content':'x'}]}", "input[0].role", "got \"tool\""},
        {"{'input':[{'role':'user'}]}", "input[0].content", "got nothing"},
        {"{'input':[{'role':'user','content':[{'type':'input_image','image_url':'data:'}]}]}", "input[0].content[0].type", "\"input_image\" is not supported"},
        {"{'input':[{'role':'user','content':[{'type':'input_text'}]}]}", "input[0].content[0].text", "string"},
        {"{'input':[{'type':'function_call','name':'f','arguments':'{}'}]}", "input[0]", "call_id"},
        {"{'input':[{'type':'function_call','call_id':'c','arguments':'{}'}]}", "input[0]", "name"},
        {"{'input':[{'type':'function_call','call_id':'c','name':'f','arguments':{}}]}", "input[0]", "arguments"},
        {"{'input':[{'type':'function_call_output','output':'x'}]}", "input[0]", "call_id"},
        {"{'input':[{'type':'function_call_output','call_id':'c','output':[{'type':'input_file','file_id':'f'}]}]}", "input[0].output[0].type", "\"input_file\""},
        {"{'input':[{'type':'reasoning','summary':'x'}]}", "input[0].summary", "array"},
        {"{'input':[{'type':'reasoning','content':[{'type':'reasoning_text'}]}]}", "input[0].content[0].text", "string"},
        {"{'input':'hi','tools':{}}", "tools", "array"},
        {"{'input':'hi','tools':[{'type':'web_search'}]}", "tools[0]", "\"web_search\" is not supported"},
        {"{'input':'hi','tools':[{'type':'function','name':'a'},{'type':'custom','name':'b'}]}", "tools[1]", "\"custom\""},
        {"{'input':'hi','tools':[{'type':'function'}]}", "tools[0]", "name"},
        {"{'input':'hi','tool_choice':'any'}", "tool_choice", "got \"any\""},
        {"{'input':'hi','tool_choice':{'type':'allowed_tools','mode':'auto','tools':[]}}", "tool_choice", "\"allowed_tools\" is not supported"},
        {"{'input':'hi','tool_choice':{'type':'function'}}", "tool_choice", "name"},
        {"{'input':'hi','text':'json'}", "text", "object"},
        {"{'input':'hi','text':{'format':{'type':'xml'}}}", "text.format.type", "got \"xml\""},
        {"{'input':'hi','text':{'format':{'type':'json_schema','name':'x'}}}", "text.format.schema", "schema"},
        {"{'input':'hi','text':{'format':{'type':'json_schema','name':1,'schema':{}}}}", "text.format.name", "string"},
    };
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++)
        expect_refusal(refusals[i][0], refusals[i][1], refusals[i][2]);

    /* a value cut in the middle of a character still makes a valid error object */
    api_error e = {.status = 400};
    memset(e.msg, 'a', sizeof e.msg - 2);
    e.msg[sizeof e.msg - 3] = (char)0xC3;  /* a lead byte with nothing after it */
    e.msg[sizeof e.msg - 2] = 0;
    snprintf(e.param, sizeof e.param, "x\xe2\x82");
    json_t *err = serve_api_responses.error(&e);
    const char *m = json_string_value(json_object_get(json_object_get(err, "error"), "message"));
    TEST_CHECK(m && strlen(m) == sizeof e.msg && !strcmp(m + sizeof e.msg - 3, "\xEF\xBF\xBD"), "cut UTF-8 in an error message");
    TEST_COND("cut UTF-8 in an error param", !strcmp(json_string_value(json_object_get(json_object_get(err, "error"),
                                                     "param")) ?: "", "x\xEF\xBF\xBD\xEF\xBF\xBD"));
    json_decref(err);
    e = (api_error){.status = 500};
    snprintf(e.msg, sizeof e.msg, "out of memory");
    err = serve_api_responses.error(&e);
    TEST_COND("a 500 is a server_error",
              !strcmp(json_string_value(json_object_get(json_object_get(err, "error"), "type")) ?: "", "server_error"));
    json_decref(err);
}

/* ---- responses ------------------------------------------------------------------ */

static json_t *respond(const char *body, const char *completion) {
    json_t *b = J(body), *c = J(completion);
    json_t *r = serve_api_responses.response(b, c, &SI);
    json_decref(b);
    json_decref(c);
    return r;
}

static void test_responses(void) {
    json_t *r = respond("{'model':'tiny','input':'hi','instructions':'Be brief.','temperature':0.2,'metadata':{'k':'v'},"
                        "'reasoning':{'effort':'low'},'store':true}",
        "{'id':'chatcmpl-7','object':'chat.completion','created':123,'model':'tiny','choices':[{'index':0,"
        "'message':{'role':'assistant','content':'Hello.','reasoning_content':'Greet.'},'logprobs':null,'finish_reason':'stop'}],"
        "'usage':{'prompt_tokens':10,'completion_tokens':5,'total_tokens':15,'prompt_tokens_details':{'cached_tokens':4}}}");
    json_t *w = J("{'id':'resp_7','object':'response','created_at':123,'status':'completed','background':false,'error':null,"
                  "'incomplete_details':null,'instructions':'Be brief.','max_output_tokens':null,'model':'tiny',"
                  "'output':[{'id':'rs_7_0','type':'reasoning','status':'completed','summary':[],"
                  "'content':[{'type':'reasoning_text','text':'Greet.'}]},"
                  "{'id':'msg_7_1','type':'message','status':'completed','role':'assistant',"
                  "'content':[{'type':'output_text','text':'Hello.','annotations':[]}]}],"
                  "'parallel_tool_calls':true,'previous_response_id':null,'reasoning':{'effort':'low','summary':null},"
                  "'store':false,'temperature':0.2,'text':{'format':{'type':'text'}},'tool_choice':'auto','tools':[],"
                  "'top_p':null,'truncation':'disabled','usage':{'input_tokens':10,'input_tokens_details':{'cached_tokens':4},"
                  "'output_tokens':5,'output_tokens_details':{'reasoning_tokens':0},'total_tokens':15},'user':null,"
                  "'metadata':{'k':'v'}}");
    same_json("a response with reasoning", r, w);
    json_decref(r);
    json_decref(w);

    /* calls (content null): function_call items, no message; the echoed tools and format */
    r = respond("{'input':'hi','tools':[{'type':'function','name':'f'}],'tool_choice':'required',"
                "'text':{'format':{'type':'json_object'}}}",
                "{'id':'chatcmpl-8','created':1,'model':'tiny','choices':[{'index':0,'message':{'role':'assistant',"
                "'content':null,'tool_calls':[{'id':'call_x','type':'function','function':{'name':'f','arguments':'{\\'a\\':1}'}},"
                "{'id':'call_y','type':'function','function':{'name':'f','arguments':'{}'}}]},'finish_reason':'tool_calls'}],"
                "'usage':{'prompt_tokens':3,'completion_tokens':2,'total_tokens':5,"
                "'completion_tokens_details':{'reasoning_tokens':1}}}");
    same_json("calls", json_object_get(r, "output"),
              w = J("[{'id':'fc_8_0','type':'function_call','status':'completed','call_id':'call_x','name':'f',"
                    "'arguments':'{\\'a\\':1}'},{'id':'fc_8_1','type':'function_call','status':'completed','call_id':'call_y',"
                    "'name':'f','arguments':'{}'}]"));
    json_decref(w);
    same_json("echoed tools", json_object_get(r, "tools"), w = J("[{'type':'function','name':'f'}]"));
    json_decref(w);
    same_json("echoed format", json_object_get(r, "text"), w = J("{'format':{'type':'json_object'}}"));
    json_decref(w);
    same_json("reasoning tokens", json_object_get(json_object_get(r, "usage"), "output_tokens_details"),
              w = J("{'reasoning_tokens':1}"));
    json_decref(w);
    TEST_COND("echoed tool_choice", !strcmp(json_string_value(json_object_get(r, "tool_choice")) ?: "", "required"));
    json_decref(r);

    /* cut by the limit: incomplete, text and a call kept */
    r = respond("{'input':'hi','max_output_tokens':4}",
                "{'id':'chatcmpl-9','created':1,'choices':[{'index':0,'message':{'role':'assistant','content':'abc',"
                "'tool_calls':[{'id':'c','type':'function','function':{'name':'f','arguments':'{\\'a'}}]},"
                "'finish_reason':'length'}],'usage':{'prompt_tokens':3,'completion_tokens':4,'total_tokens':7}}");
    TEST_COND("incomplete", !strcmp(json_string_value(json_object_get(r, "status")) ?: "", "incomplete"));
    same_json("incomplete_details", json_object_get(r, "incomplete_details"), w = J("{'reason':'max_output_tokens'}"));
    json_decref(w);
    same_json("incomplete items", json_object_get(r, "output"),
              w = J("[{'id':'msg_9_0','type':'message','status':'incomplete','role':'assistant',"
                    "'content':[{'type':'output_text','text':'abc','annotations':[]}]},{'id':'fc_9_1','type':'function_call',"
                    "'status':'incomplete','call_id':'c','name':'f','arguments':'{\\'a'}]"));
    json_decref(w);
    TEST_COND("model from the server", !strcmp(json_string_value(json_object_get(r, "model")) ?: "", "tiny"));
    TEST_COND("max_output_tokens echoed", json_integer_value(json_object_get(r, "max_output_tokens")) == 4);
    json_decref(r);

    /* nothing generated: one empty message */
    r = respond("{'input':'hi'}", "{'id':'chatcmpl-0','choices':[{'index':0,'message':{'role':'assistant','content':''},"
                "'finish_reason':'stop'}]}");
    same_json("empty answer", json_object_get(r, "output"),
              w = J("[{'id':'msg_0_0','type':'message','status':'completed','role':'assistant',"
                    "'content':[{'type':'output_text','text':'','annotations':[]}]}]"));
    json_decref(w);
    json_decref(r);
}

/* ---- streams -------------------------------------------------------------------- */

#define HEAD "{'id':'chatcmpl-s1','object':'chat.completion.chunk','created':77,'model':'tiny','choices':["
#define ROLE HEAD "{'index':0,'delta':{'role':'assistant','content':''}}]}"
#define TEXT(t) HEAD "{'index':0,'delta':{'content':'" t "'}}]}"
#define THINK(t) HEAD "{'index':0,'delta':{'reasoning_content':'" t "'}}]}"
#define CALL(i, id, name) HEAD "{'index':0,'delta':{'tool_calls':[{'index':" #i ",'id':'" id "','type':'function'," \
    "'function':{'name':'" name "','arguments':''}}]}}]}"
#define ARGS(i, a) HEAD "{'index':0,'delta':{'tool_calls':[{'index':" #i ",'function':{'arguments':'" a "'}}]}}]}"
#define FINISH(f) HEAD "{'index':0,'delta':{},'finish_reason':'" f "'}]}"
#define USAGE(p, c) HEAD "],'usage':{'prompt_tokens':" #p ",'completion_tokens':" #c ",'total_tokens':0," \
    "'prompt_tokens_details':{'cached_tokens':1}}}"

/* The stream's bytes for the chunks (then the end, or err). */
static char *stream(const char *body, const char *const *chunks, const char *err) {
    json_t *b = J(body);
    void *st = serve_api_responses.stream_new(b, &SI);
    json_decref(b);  /* the state keeps what it needs */
    api_buf out = {0};
    int rc = 0;
    for (; *chunks; chunks++) {
        json_t *c = J(*chunks);
        rc |= serve_api_responses.stream_chunk(st, c, NULL, &out);
        json_decref(c);
    }
    rc |= serve_api_responses.stream_chunk(st, NULL, err, &out);
    /* the stream has ended: later calls add nothing */
    size_t n = out.n;
    json_t *late = J(TEXT("late"));
    rc |= serve_api_responses.stream_chunk(st, late, NULL, &out);
    rc |= serve_api_responses.stream_chunk(st, NULL, NULL, &out);
    json_decref(late);
    TEST_CHECK(out.n == n, "events after the end");
    serve_api_responses.stream_free(st);
    TEST_CHECK(rc == 0 && !out.oom, "stream_chunk failed");
    return out.p;
}

/* Reparse a stream as a client does; returns the event types (without
 * "response.") joined by commas and the final response in *final. */
static char *reparse(const char *sse, json_t **final) {
    api_buf types = {0};
    json_t *items = json_array(), *acc = json_array();  /* acc: each item's text or arguments from deltas */
    char *resp_id = NULL;
    char *copy = strdup(sse ? sse : "");
    long seq = 0;
    *final = NULL;
    for (char *p = copy; *p;) {
        char *end = strstr(p, "\n\n");
        if (!end) { TEST_CHECK(0, "an event without its blank line: %.80s", p); break; }
        *end = 0;
        char *nl = strchr(p, '\n');
        TEST_CHECK(!strncmp(p, "event: ", 7) && nl && !strncmp(nl + 1, "data: ", 6), "not event + data: %.80s", p);
        if (!nl) break;
        *nl = 0;
        const char *name = p + 7;
        json_error_t je;
        json_t *ev = json_loads(nl + 7, 0, &je);
        TEST_CHECK(ev, "data is not JSON: %s", je.text);
        if (!ev) break;
        const char *type = json_string_value(json_object_get(ev, "type")) ?: "";
        TEST_CHECK(!strcmp(type, name), "event %s carries type %s", name, type);
        TEST_CHECK(json_integer_value(json_object_get(ev, "sequence_number")) == seq, "%s: sequence_number %lld, not %ld",
                   name, (long long)json_integer_value(json_object_get(ev, "sequence_number")), seq);
        seq++;
        if (types.n) api_puts(&types, ",");
        api_puts(&types, strncmp(type, "response.", 9) ? type : type + 9);
        json_int_t oi = json_integer_value(json_object_get(ev, "output_index"));
        json_t *item = json_array_get(items, (size_t)oi);
        const char *iid = json_string_value(json_object_get(ev, "item_id"));
        if (iid) TEST_CHECK(item && !strcmp(iid, json_string_value(json_object_get(item, "id")) ?: ""),
                            "%s: item_id %s is not output[%lld]'s", type, iid, (long long)oi);
        const char *a = json_string_value(json_array_get(acc, (size_t)oi)) ?: "";
        const json_t *resp = json_object_get(ev, "response");
        if (!strcmp(type, "response.created") || !strcmp(type, "response.in_progress")) {
            TEST_CHECK(seq <= 2, "%s is not among the first two events", type);
            TEST_CHECK(!strcmp(json_string_value(json_object_get(resp, "status")) ?: "", "in_progress") &&
                       json_array_size(json_object_get(resp, "output")) == 0, "%s: not an empty response in progress", type);
            free(resp_id);
            resp_id = strdup(json_string_value(json_object_get(resp, "id")) ?: "");
        } else if (!strcmp(type, "response.output_item.added")) {
            json_t *it = json_object_get(ev, "item");
            TEST_CHECK(oi == (json_int_t)json_array_size(items), "added at %lld with %zu items", (long long)oi,
                       json_array_size(items));
            TEST_CHECK(!strcmp(json_string_value(json_object_get(it, "status")) ?: "", "in_progress"), "added: status");
            json_array_append(items, it);
            json_array_append_new(acc, json_string(""));
        } else if (strstr(type, ".delta")) {
            const char *d = json_string_value(json_object_get(ev, "delta"));
            TEST_CHECK(d && d[0], "%s: an empty delta", type);
            char *cat = malloc(strlen(a) + strlen(d ?: "") + 1);
            strcpy(cat, a);
            strcat(cat, d ?: "");
            json_array_set_new(acc, (size_t)oi, json_string(cat));
            free(cat);
        } else if (!strcmp(type, "response.output_text.done") || !strcmp(type, "response.reasoning_text.done")) {
            TEST_CHECK(!strcmp(json_string_value(json_object_get(ev, "text")) ?: "", a), "%s: text is not the deltas", type);
        } else if (!strcmp(type, "response.content_part.done")) {
            TEST_CHECK(!strcmp(json_string_value(json_object_get(json_object_get(ev, "part"), "text")) ?: "", a),
                       "part.done: text is not the deltas");
        } else if (!strcmp(type, "response.function_call_arguments.done")) {
            TEST_CHECK(!strcmp(json_string_value(json_object_get(ev, "arguments")) ?: "", a), "arguments are not the deltas");
            TEST_CHECK(json_equal(json_object_get(ev, "name"), json_object_get(item, "name")), "arguments.done: name");
        } else if (!strcmp(type, "response.output_item.done")) {
            json_t *it = json_object_get(ev, "item");
            TEST_CHECK(item && json_equal(json_object_get(it, "id"), json_object_get(item, "id")), "done: another item's id");
            const char *t = json_string_value(json_object_get(it, "type")) ?: "";
            const char *done_text = !strcmp(t, "function_call") ? json_string_value(json_object_get(it, "arguments"))
                : json_string_value(json_object_get(json_array_get(json_object_get(it, "content"), 0), "text"));
            TEST_CHECK(done_text && !strcmp(done_text, a), "done: the item's text is not the deltas");
            json_array_set(items, (size_t)oi, it);
        } else if (!strcmp(type, "response.completed") || !strcmp(type, "response.incomplete") ||
                   !strcmp(type, "response.failed")) {
            TEST_CHECK(resp_id && !strcmp(json_string_value(json_object_get(resp, "id")) ?: "", resp_id), "%s: id", type);
            same_json("the final output is the items done", json_object_get(resp, "output"), items);
            TEST_CHECK(!end[2], "events after %s", type);
            *final = json_deep_copy(resp);
        }
        json_decref(ev);
        p = end + 2;
    }
    TEST_CHECK(*final, "the stream has no final event");
    free(copy);
    free(resp_id);
    json_decref(items);
    json_decref(acc);
    return types.p ? types.p : strdup("");
}

static void expect_stream(const char *what, const char *body, const char *const *chunks, const char *err,
                          const char *want_types, const char *want_output, json_t **final) {
    char *sse = stream(body, chunks, err);
    json_t *fin;
    char *types = reparse(sse, &fin);
    TEST_CHECK(!strcmp(types, want_types), "%s: events\n  got  %s\n  want %s", what, types, want_types);
    json_t *w = J(want_output);
    same_json(what, json_object_get(fin, "output"), w);
    json_decref(w);
    if (final) *final = fin;
    else json_decref(fin);
    free(types);
    free(sse);
}

static void test_streams(void) {
    json_t *fin, *w;
    expect_stream("text", "{'input':'hi','stream':true,'instructions':'x'}",
                  (const char *const[]){ROLE, TEXT("Hel"), TEXT("lo"), FINISH("stop"), USAGE(5, 2), NULL}, NULL,
                  "created,in_progress,output_item.added,content_part.added,output_text.delta,output_text.delta,"
                  "output_text.done,content_part.done,output_item.done,completed",
                  "[{'id':'msg_s1_0','type':'message','status':'completed','role':'assistant',"
                  "'content':[{'type':'output_text','text':'Hello','annotations':[]}]}]", &fin);
    TEST_COND("completed", !strcmp(json_string_value(json_object_get(fin, "status")) ?: "", "completed"));
    TEST_COND("id", !strcmp(json_string_value(json_object_get(fin, "id")) ?: "", "resp_s1"));
    TEST_COND("created_at", json_integer_value(json_object_get(fin, "created_at")) == 77);
    TEST_COND("instructions echoed", !strcmp(json_string_value(json_object_get(fin, "instructions")) ?: "", "x"));
    same_json("stream usage", json_object_get(fin, "usage"),
              w = J("{'input_tokens':5,'input_tokens_details':{'cached_tokens':1},'output_tokens':2,"
                    "'output_tokens_details':{'reasoning_tokens':0},'total_tokens':7}"));
    json_decref(w);
    json_decref(fin);

    expect_stream("reasoning then text", "{'input':'hi','stream':true}",
                  (const char *const[]){ROLE, THINK("Let me "), THINK("think."), TEXT("Yes."), FINISH("stop"), USAGE(5, 4), NULL},
                  NULL,
                  "created,in_progress,output_item.added,content_part.added,reasoning_text.delta,reasoning_text.delta,"
                  "reasoning_text.done,content_part.done,output_item.done,"
                  "output_item.added,content_part.added,output_text.delta,output_text.done,content_part.done,"
                  "output_item.done,completed",
                  "[{'id':'rs_s1_0','type':'reasoning','status':'completed','summary':[],"
                  "'content':[{'type':'reasoning_text','text':'Let me think.'}]},"
                  "{'id':'msg_s1_1','type':'message','status':'completed','role':'assistant',"
                  "'content':[{'type':'output_text','text':'Yes.','annotations':[]}]}]", NULL);

    expect_stream("a call in pieces", "{'input':'hi','stream':true,'tools':[{'type':'function','name':'weather'}]}",
                  (const char *const[]){ROLE, CALL(0, "call_1", "weather"), ARGS(0, "{\\'ci"), ARGS(0, "ty\\':\\'Paris\\'}"),
                                        FINISH("tool_calls"), USAGE(9, 12), NULL}, NULL,
                  "created,in_progress,output_item.added,function_call_arguments.delta,function_call_arguments.delta,"
                  "function_call_arguments.done,output_item.done,completed",
                  "[{'id':'fc_s1_0','type':'function_call','status':'completed','call_id':'call_1','name':'weather',"
                  "'arguments':'{\\'city\\':\\'Paris\\'}'}]", NULL);

    expect_stream("text then two calls", "{'input':'hi','stream':true}",
                  (const char *const[]){ROLE, TEXT("Checking."), CALL(0, "call_a", "f"), ARGS(0, "{}"),
                                        CALL(1, "call_b", "g"), ARGS(1, "{\\'x\\'"), ARGS(1, ":1}"), FINISH("tool_calls"),
                                        USAGE(9, 12), NULL}, NULL,
                  "created,in_progress,output_item.added,content_part.added,output_text.delta,output_text.done,"
                  "content_part.done,output_item.done,output_item.added,function_call_arguments.delta,"
                  "function_call_arguments.done,output_item.done,output_item.added,function_call_arguments.delta,"
                  "function_call_arguments.delta,function_call_arguments.done,output_item.done,completed",
                  "[{'id':'msg_s1_0','type':'message','status':'completed','role':'assistant',"
                  "'content':[{'type':'output_text','text':'Checking.','annotations':[]}]},"
                  "{'id':'fc_s1_1','type':'function_call','status':'completed','call_id':'call_a','name':'f','arguments':'{}'},"
                  "{'id':'fc_s1_2','type':'function_call','status':'completed','call_id':'call_b','name':'g',"
                  "'arguments':'{\\'x\\':1}'}]", NULL);

    expect_stream("cut by the limit", "{'input':'hi','stream':true,'max_output_tokens':2}",
                  (const char *const[]){ROLE, TEXT("ab"), FINISH("length"), USAGE(5, 2), NULL}, NULL,
                  "created,in_progress,output_item.added,content_part.added,output_text.delta,output_text.done,"
                  "content_part.done,output_item.done,incomplete",
                  "[{'id':'msg_s1_0','type':'message','status':'incomplete','role':'assistant',"
                  "'content':[{'type':'output_text','text':'ab','annotations':[]}]}]", &fin);
    TEST_COND("incomplete status", !strcmp(json_string_value(json_object_get(fin, "status")) ?: "", "incomplete"));
    same_json("incomplete reason", json_object_get(fin, "incomplete_details"), w = J("{'reason':'max_output_tokens'}"));
    json_decref(w);
    json_decref(fin);

    expect_stream("failed", "{'input':'hi','stream':true}",
                  (const char *const[]){ROLE, THINK("hm"), NULL}, "generation failed: out of memory",
                  "created,in_progress,output_item.added,content_part.added,reasoning_text.delta,reasoning_text.done,"
                  "content_part.done,output_item.done,failed",
                  "[{'id':'rs_s1_0','type':'reasoning','status':'incomplete','summary':[],"
                  "'content':[{'type':'reasoning_text','text':'hm'}]}]", &fin);
    TEST_COND("failed status", !strcmp(json_string_value(json_object_get(fin, "status")) ?: "", "failed"));
    same_json("failed error", json_object_get(fin, "error"),
              w = J("{'code':'server_error','message':'generation failed: out of memory'}"));
    json_decref(w);
    json_decref(fin);

    /* nothing generated: an empty message, as the non-streamed answer has */
    expect_stream("empty", "{'input':'hi','stream':true}", (const char *const[]){ROLE, FINISH("stop"), USAGE(5, 0), NULL},
                  NULL, "created,in_progress,output_item.added,content_part.added,output_text.done,content_part.done,"
                  "output_item.done,completed",
                  "[{'id':'msg_s1_0','type':'message','status':'completed','role':'assistant',"
                  "'content':[{'type':'output_text','text':'','annotations':[]}]}]", NULL);

    /* pieces of a call that is already done are dropped; other choices are not ours */
    expect_stream("late pieces", "{'input':'hi','stream':true}",
                  (const char *const[]){ROLE, CALL(0, "c0", "f"), ARGS(0, "{"), CALL(1, "c1", "g"), ARGS(0, "}"), ARGS(1, "{}"),
                                        HEAD "{'index':1,'delta':{'content':'other choice'}}]}", FINISH("tool_calls"), NULL},
                  NULL,
                  "created,in_progress,output_item.added,function_call_arguments.delta,function_call_arguments.done,"
                  "output_item.done,output_item.added,function_call_arguments.delta,function_call_arguments.done,"
                  "output_item.done,completed",
                  "[{'id':'fc_s1_0','type':'function_call','status':'completed','call_id':'c0','name':'f','arguments':'{'},"
                  "{'id':'fc_s1_1','type':'function_call','status':'completed','call_id':'c1','name':'g','arguments':'{}'}]",
                  NULL);

    /* the same completion, non-streamed, has the same output */
    json_t *r = respond("{'input':'hi'}", "{'id':'chatcmpl-s1','created':77,'choices':[{'index':0,'message':{'role':'assistant',"
                        "'content':'Yes.','reasoning_content':'Let me think.'},'finish_reason':'stop'}]}");
    w = J("[{'id':'rs_s1_0','type':'reasoning','status':'completed','summary':[],"
          "'content':[{'type':'reasoning_text','text':'Let me think.'}]},"
          "{'id':'msg_s1_1','type':'message','status':'completed','role':'assistant',"
          "'content':[{'type':'output_text','text':'Yes.','annotations':[]}]}]");
    same_json("streamed and not: the same items", json_object_get(r, "output"), w);
    json_decref(w);
    json_decref(r);
}

int main(void) {
    test_requests();
    test_responses();
    test_streams();
    return TEST_REPORT();
}

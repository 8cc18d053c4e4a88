/* test_serve_anthropic.c - the Anthropic Messages translator
 * (tools/serve_anthropic.c) on its own, JSON in and out: request bodies ->
 * the OpenAI requests they become (every block kind, tools, tool_choice,
 * thinking, output_config, count_tokens), each refusal (400 naming the
 * field); chat.completion objects -> Message objects (stop reasons, usage,
 * tool_use input, raw arguments); sequences of OpenAI chunks -> the bytes
 * of the SSE stream, reparsed as events and compared one by one with the
 * events expected (text; reasoning then text; a tool call in pieces; two
 * calls; a length stop; a failure; arguments that are not JSON; no chunks);
 * the error objects for each status.
 *
 * Test JSON is written with ' for " (q() swaps them back). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_anthropic.h"
#include "testhelp.h"

static const serve_info SI = {.model_id = "pocket-model", .n_ctx = 4096};

/* s with ' made " (a static buffer per call, up to 8 at once) */
static const char *q(const char *s) {
    static char buf[8][8192];
    static int at;
    char *b = buf[at++ % 8];
    snprintf(b, sizeof buf[0], "%s", s);
    for (char *p = b; *p; p++)
        if (*p == '\'') *p = '"';
    return b;
}

static json_t *J(const char *s) {
    json_error_t je;
    json_t *v = json_loads(q(s), JSON_DECODE_ANY, &je);
    if (!v) { fprintf(stderr, "bad test JSON (%s): %s\n", je.text, q(s)); exit(2); }
    return v;
}

/* got (stolen) equals the JSON want; prints both when not. */
static int same(json_t *got, const char *want) {
    json_t *w = J(want);
    int ok = got && json_equal(got, w);
    if (!ok) {
        char *g = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS) : NULL, *x = json_dumps(w, JSON_COMPACT | JSON_SORT_KEYS);
        fprintf(stderr, "  got:  %s\n  want: %s\n", g ? g : "(null)", x);
        free(g);
        free(x);
    }
    json_decref(w);
    json_decref(got);
    return ok;
}

/* ---- requests ------------------------------------------------------------------------ */

static json_t *translate(const char *body, int count, api_error *e) {
    json_t *b = J(body);
    int chat = 0;
    memset(e, 0, sizeof *e);
    json_t *r = count ? anthropic_count_request(b, &SI, e) : serve_api_anthropic.request(b, &SI, &chat, e);
    if (!count && r && !chat) { json_decref(r); r = NULL; }
    json_decref(b);
    return r;
}

static void expect_request(const char *body, const char *want) {
    api_error e;
    json_t *r = translate(body, 0, &e);
    TEST_CHECK(same(r, want), "request %s (refused: %s)", body, e.msg);
}

#define U1 "'messages':[{'role':'user','content':'Hi'}]"

static void test_requests(void) {
    expect_request("{'model':'m','max_tokens':16," U1 "}",
                   "{'model':'m','max_tokens':16,'messages':[{'role':'user','content':'Hi'}]}");
    /* system blocks, every block kind of a conversation with tools */
    expect_request(
        "{'model':'claude-x','max_tokens':100,'system':[{'type':'text','text':'Be brief.','cache_control':{'type':'ephemeral'}},"
        "{'type':'text','text':'Use tools.'}],"
        "'messages':[{'role':'user','content':[{'type':'text','text':'Weather in Paris?'}]},"
        "{'role':'assistant','content':[{'type':'thinking','thinking':'Need the tool.','signature':'abc'},"
        "{'type':'redacted_thinking','data':'xyz'},{'type':'text','text':'Checking.'},"
        "{'type':'tool_use','id':'call_1','name':'weather','input':{'city':'Paris'}}]},"
        "{'role':'user','content':[{'type':'tool_result','tool_use_id':'call_1','content':'18 C'},"
        "{'type':'text','text':'And tomorrow?'}]}],"
        "'tools':[{'name':'weather','description':'Weather now','input_schema':{'type':'object',"
        "'properties':{'city':{'type':'string'}}},'cache_control':{'type':'ephemeral'}}],"
        "'tool_choice':{'type':'auto','disable_parallel_tool_use':true},"
        "'stop_sequences':['END','STOP'],'temperature':0.5,'top_p':0.9,'top_k':40,'stream':true,"
        "'thinking':{'type':'enabled','budget_tokens':1024},'metadata':{'user_id':'u-1'},"
        "'service_tier':'auto','cache_control':{'type':'ephemeral'}}",
        "{'model':'claude-x','max_tokens':100,'messages':["
        "{'role':'system','content':[{'type':'text','text':'Be brief.'},{'type':'text','text':'Use tools.'}]},"
        "{'role':'user','content':[{'type':'text','text':'Weather in Paris?'}]},"
        "{'role':'assistant','content':'Checking.','reasoning_content':'Need the tool.','tool_calls':["
        "{'id':'call_1','type':'function','function':{'name':'weather','arguments':'{\\'city\\':\\'Paris\\'}'}}]},"
        "{'role':'tool','tool_call_id':'call_1','content':'18 C'},"
        "{'role':'user','content':[{'type':'text','text':'And tomorrow?'}]}],"
        "'tools':[{'type':'function','function':{'name':'weather','description':'Weather now',"
        "'parameters':{'type':'object','properties':{'city':{'type':'string'}}}}}],"
        "'tool_choice':'auto','stop':['END','STOP'],'temperature':0.5,'top_p':0.9,'top_k':40,"
        "'stream':true,'stream_options':{'include_usage':true},"
        "'chat_template_kwargs':{'enable_thinking':true},'thinking_budget_tokens':1024,'user':'u-1'}");
    /* tool calls only (content null); is_error; tool_result blocks; raw arguments back to text; no input */
    expect_request(
        "{'model':'m','max_tokens':8,'messages':[{'role':'user','content':'go'},"
        "{'role':'assistant','content':[{'type':'tool_use','id':'a','name':'f','input':{'_raw_arguments':'x=1'}},"
        "{'type':'tool_use','id':'b','name':'g'}]},"
        "{'role':'user','content':[{'type':'tool_result','tool_use_id':'a','content':'bad input','is_error':true},"
        "{'type':'tool_result','tool_use_id':'b','content':[{'type':'text','text':'one'},{'type':'text','text':'two'}],"
        "'is_error':true},{'type':'tool_result','tool_use_id':'c'}]}],"
        "'tools':[{'name':'f','input_schema':{'type':'object'}},{'type':'custom','name':'g','input_schema':{}}],"
        "'tool_choice':{'type':'tool','name':'g'}}",
        "{'model':'m','max_tokens':8,'messages':[{'role':'user','content':'go'},"
        "{'role':'assistant','content':null,'tool_calls':["
        "{'id':'a','type':'function','function':{'name':'f','arguments':'x=1'}},"
        "{'id':'b','type':'function','function':{'name':'g','arguments':'{}'}}]},"
        "{'role':'tool','tool_call_id':'a','content':'Error: bad input'},"
        "{'role':'tool','tool_call_id':'b','content':[{'type':'text','text':'Error: '},{'type':'text','text':'one'},"
        "{'type':'text','text':'two'}]},{'role':'tool','tool_call_id':'c','content':''}],"
        "'tools':[{'type':'function','function':{'name':'f','parameters':{'type':'object'}}},"
        "{'type':'function','function':{'name':'g','parameters':{}}}],"
        "'tool_choice':{'type':'function','function':{'name':'g'}}}");
    /* any, none; adaptive / disabled thinking; effort and format; the older output_format; system role; empty blocks */
    expect_request("{'model':'m','max_tokens':0," U1 ",'tools':[{'name':'f','input_schema':{}}],'tool_choice':{'type':'any'},"
                   "'thinking':{'type':'adaptive'},'output_config':{'effort':'max','format':{'type':'json_schema',"
                   "'schema':{'type':'object'}}}}",
                   "{'model':'m','max_tokens':0,'messages':[{'role':'user','content':'Hi'}],"
                   "'tools':[{'type':'function','function':{'name':'f','parameters':{}}}],'tool_choice':'required',"
                   "'chat_template_kwargs':{'enable_thinking':true},'reasoning_effort':'high',"
                   "'response_format':{'type':'json_schema','json_schema':{'name':'output','schema':{'type':'object'},"
                   "'strict':true}}}");
    expect_request("{'model':'m','max_tokens':3,'messages':[{'role':'system','content':'S'},{'role':'user','content':[]},"
                   "{'role':'assistant','content':[]}],'tool_choice':{'type':'none'},'thinking':{'type':'disabled'},"
                   "'output_format':{'type':'json_schema','schema':{}},'output_config':{'effort':'low'},'stop_sequences':[],"
                   "'system':'','metadata':{},'temperature':null,'container':null}",
                   "{'model':'m','max_tokens':3,'messages':[{'role':'system','content':'S'},{'role':'user','content':''},"
                   "{'role':'assistant','content':''}],'tool_choice':'none','chat_template_kwargs':{'enable_thinking':false},"
                   "'response_format':{'type':'json_schema','json_schema':{'name':'output','schema':{},'strict':true}},"
                   "'reasoning_effort':'low'}");

    /* count_tokens: no max_tokens, the same translation otherwise */
    api_error e;
    TEST_COND("count_tokens request",
              same(translate("{'model':'m','system':'S'," U1 ",'tools':[{'name':'f','input_schema':{}}]}", 1, &e),
                   "{'model':'m','messages':[{'role':'system','content':'S'},{'role':'user','content':'Hi'}],"
                   "'tools':[{'type':'function','function':{'name':'f','parameters':{}}}]}"));
    TEST_COND("count_tokens response", same(anthropic_count_response(42), "{'input_tokens':42}"));
}

/* body refused with status 400, param and a message holding what */
static void expect_refusal(const char *body, int count, const char *param, const char *what) {
    api_error e;
    json_t *r = translate(body, count, &e);
    TEST_CHECK(!r && e.status == 400 && !strcmp(e.param, param) && strstr(e.msg, what),
               "refusal of %s: got %s, status %d, param '%s', message '%s'; want param '%s' and '%s'", body,
               r ? "a request" : "NULL", e.status, e.param, e.msg, param, what);
    json_decref(r);
    /* every refusal is a valid Anthropic error object */
    json_t *eo = serve_api_anthropic.error(&e);
    TEST_CHECK(eo && !strcmp(json_string_value(json_object_get(eo, "type")), "error") &&
                   !strcmp(json_string_value(json_object_get(json_object_get(eo, "error"), "type")), "invalid_request_error") &&
                   !strcmp(json_string_value(json_object_get(json_object_get(eo, "error"), "message")), e.msg),
               "error object of %s", body);
    json_decref(eo);
}

#define M "'model':'m','max_tokens':4,"
static const struct refusal { const char *body; int count; const char *param, *what; } refusals[] = {
    {.body = "[]", .param = "", .what = "the body must be a JSON object"},
    {.body = "{" M U1 ",'foo':1}", .param = "foo", .what = "foo: not a field of a Messages request"},
    {.body = "{'max_tokens':4," U1 "}", .param = "model", .what = "model must be a string, got nothing"},
    {.body = "{'model':7,'max_tokens':4," U1 "}", .param = "model", .what = "model must be a string, got a number"},
    {.body = "{'model':'m'," U1 "}", .param = "max_tokens",
     .what = "max_tokens must be a non-negative integer, got nothing"},
    {.body = "{'model':'m','max_tokens':-1," U1 "}", .param = "max_tokens", .what = "non-negative integer"},
    {.body = "{'model':'m','max_tokens':'9'," U1 "}", .param = "max_tokens", .what = "got a string"},
    {.body = "{'model':'m','max_tokens':4}", .param = "messages", .what = "messages must be an array, got nothing"},
    {.body = "{" M "'messages':{}}", .param = "messages", .what = "messages must be an array, got an object"},
    {.body = "{" M "'messages':[]}", .param = "messages", .what = "messages must not be empty"},
    {.body = "{" M "'messages':[3]}", .param = "messages.0", .what = "messages.0 must be an object"},
    {.body = "{" M "'messages':[{'content':'x'}]}", .param = "messages.0", .what = "messages.0.role must be a string"},
    {.body = "{" M "'messages':[{'role':'tool','content':'x'}]}", .param = "messages.0",
     .what = "role 'tool' is not user"},
    {.body = "{" M "'messages':[{'role':'user','content':3}]}", .param = "messages.0",
     .what = "content must be a string or an array"},
    {.body = "{" M "'messages':[{'role':'user','content':[{'type':'text','text':'a'},{'type':'image','source':{}}]}]}",
     .param = "messages.0.content.1", .what = "messages.0.content.1: image blocks are not supported"},
    {.body = "{" M "'messages':[{'role':'user','content':[{'type':'document','source':{}}]}]}",
     .param = "messages.0.content.0", .what = "document blocks are not supported"},
    {.body = "{" M "'messages':[{'role':'user','content':[{'type':'server_tool_use'}]}]}",
     .param = "messages.0.content.0", .what = "'server_tool_use' block is not supported in a user message"},
    {.body = "{" M "'messages':[{'role':'user','content':[{'type':'tool_use','id':'a','name':'f','input':{}}]}]}",
     .param = "messages.0.content.0", .what = "a tool_use block belongs in an assistant message"},
    {.body = "{" M "'messages':[{'role':'assistant','content':[{'type':'tool_result','tool_use_id':'a'}]}]}",
     .param = "messages.0.content.0", .what = "a tool_result block belongs in a user message"},
    {.body = "{" M "'messages':[{'role':'assistant','content':[{'type':'image'}]}]}", .param = "messages.0.content.0",
     .what = "image blocks"},
    {.body = "{" M "'messages':[{'role':'assistant','content':[{'type':'tool_use','name':'f'}]}]}",
     .param = "messages.0.content.0", .what = "messages.0.content.0.id must be a string"},
    {.body = "{" M "'messages':[{'role':'assistant','content':[{'type':'tool_use','id':'a'}]}]}",
     .param = "messages.0.content.0", .what = "messages.0.content.0.name must be a string"},
    {.body = "{" M "'messages':[{'role':'assistant','content':[{'type':'thinking'}]}]}",
     .param = "messages.0.content.0", .what = "thinking must be a string"},
    {.body = "{" M "'messages':[{'role':'user','content':[{'type':'tool_result'}]}]}", .param = "messages.0.content.0",
     .what = "tool_use_id must be a string"},
    {.body = "{" M "'messages':[{'role':'user','content':[{'type':'tool_result','tool_use_id':'a',"
             "'content':[{'type':'image'}]}]}]}",
     .param = "messages.0.content.0.content.0", .what = "image blocks are not supported"},
    {.body = "{" M "'messages':[{'role':'user','content':[{'type':'tool_result','tool_use_id':'a','content':5}]}]}",
     .param = "messages.0.content.0", .what = "content must be a string or an array of text blocks, got a number"},
    {.body = "{" M "'messages':[{'role':'user','content':[{'type':'tool_result','tool_use_id':'a','is_error':1}]}]}",
     .param = "messages.0.content.0", .what = "is_error must be a boolean"},
    {.body = "{" M "'messages':[{'role':'user','content':[{'type':'text'}]}]}", .param = "messages.0.content.0",
     .what = "messages.0.content.0.text must be a string, got nothing"},
    {.body = "{" M "'messages':[{'role':'user','content':[{'text':'a'}]}]}", .param = "messages.0.content.0",
     .what = ".type must be a string"},
    {.body = "{" M "'messages':[{'role':'user','content':['a']}]}", .param = "messages.0.content.0",
     .what = "must be a content block"},
    {.body = "{" M "'messages':[{'role':'system','content':[{'type':'tool_result','tool_use_id':'a'}]}]}",
     .param = "messages.0.content.0", .what = "in a system message"},
    {.body = "{" M U1 ",'system':5}", .param = "system", .what = "system must be a string or an array of text blocks"},
    {.body = "{" M U1 ",'system':[{'type':'image'}]}", .param = "system.0", .what = "image blocks"},
    {.body = "{" M U1 ",'tools':{}}", .param = "tools", .what = "tools must be an array"},
    {.body = "{" M U1 ",'tools':[{'input_schema':{}}]}", .param = "tools.0",
     .what = "tools.0.name must be a non-empty string"},
    {.body = "{" M U1 ",'tools':[{'name':'f'}]}", .param = "tools.0",
     .what = "tools.0.input_schema must be a JSON schema"},
    {.body = "{" M U1 ",'tools':[{'name':'f','input_schema':{},'description':1}]}", .param = "tools.0",
     .what = "description must be a string"},
    {.body = "{" M U1 ",'tools':[{'type':'web_search_20250305','name':'web_search'}]}", .param = "tools.0",
     .what = "'web_search_20250305' is a tool Anthropic defines or runs itself"},
    {.body = "{" M U1 ",'tool_choice':'auto'}", .param = "tool_choice", .what = "tool_choice must be an object"},
    {.body = "{" M U1 ",'tool_choice':{'type':'some'}}", .param = "tool_choice",
     .what = "tool_choice.type 'some' is not auto"},
    {.body = "{" M U1 ",'tool_choice':{'type':'any'}}", .param = "tool_choice", .what = "needs tools"},
    {.body = "{" M U1 ",'tools':[{'name':'f','input_schema':{}}],'tool_choice':{'type':'tool','name':'g'}}",
     .param = "tool_choice", .what = "tool_choice.name 'g' is not one of the tools"},
    {.body = "{" M U1 ",'tools':[{'name':'f','input_schema':{}}],'tool_choice':{'type':'tool'}}",
     .param = "tool_choice", .what = "tool_choice.name must be a string"},
    {.body = "{" M U1 ",'tool_choice':{'type':'auto','disable_parallel_tool_use':'yes'}}", .param = "tool_choice",
     .what = "disable_parallel_tool_use must be a boolean"},
    {.body = "{" M U1 ",'thinking':{'type':'enabled'}}", .param = "thinking.budget_tokens",
     .what = "budget_tokens must be"},
    {.body = "{" M U1 ",'thinking':{'type':'on'}}", .param = "thinking", .what = "thinking.type 'on' is not enabled"},
    {.body = "{" M U1 ",'thinking':true}", .param = "thinking", .what = "thinking must be an object"},
    {.body = "{" M U1 ",'temperature':1.5}", .param = "temperature", .what = "temperature must be a number in [0, 1]"},
    {.body = "{" M U1 ",'top_p':-0.1}", .param = "top_p", .what = "top_p must be a number in [0, 1]"},
    {.body = "{" M U1 ",'top_k':-1}", .param = "top_k", .what = "top_k must be a non-negative integer"},
    {.body = "{" M U1 ",'top_k':1.5}", .param = "top_k", .what = "top_k must be a non-negative integer"},
    {.body = "{" M U1 ",'stop_sequences':'END'}", .param = "stop_sequences",
     .what = "stop_sequences must be an array of strings"},
    {.body = "{" M U1 ",'stop_sequences':['a',1]}", .param = "stop_sequences",
     .what = "stop_sequences.1 must be a string"},
    {.body = "{" M U1 ",'stream':'yes'}", .param = "stream", .what = "stream must be a boolean"},
    {.body = "{" M U1 ",'metadata':{'user_id':5}}", .param = "metadata.user_id",
     .what = "metadata.user_id must be a string"},
    {.body = "{" M U1 ",'metadata':[]}", .param = "metadata", .what = "metadata must be an object"},
    {.body = "{" M U1 ",'output_config':{'effort':'ultra'}}", .param = "output_config.effort",
     .what = "effort must be low"},
    {.body = "{" M U1 ",'output_config':{'format':{'type':'text'}}}", .param = "output_config.format",
     .what = "json_schema"},
    {.body = "{" M U1 ",'output_config':{'format':{'type':'json_schema','schema':1}}}", .param = "output_config.format",
     .what = "output_config.format.schema must be a JSON schema"},
    {.body = "{" M U1 ",'output_format':{'type':'json_schema'}}", .param = "output_format",
     .what = "output_format.schema"},
    {.body = "{" M U1 ",'container':'c-1'}", .param = "container", .what = "no code execution tool"},
    {.body = "{" M U1 ",'cache_control':5}", .param = "cache_control", .what = "cache_control must be an object"},
    {.body = "{" M U1 ",'service_tier':5}", .param = "service_tier", .what = "service_tier must be a string"},
    /* count_tokens: the generation's fields are not its own */
    {.body = "{" M U1 "}", .count = 1, .param = "max_tokens",
     .what = "max_tokens: not a field of a count_tokens request"},
    {.body = "{'model':'m','messages':[]}", .count = 1, .param = "messages", .what = "messages must not be empty"},
    /* a refusal is one line of UTF-8 however the request's text is cut:
       the line break quoted as a space, the 'é' cut at 40 bytes as '?' */
    {.body = "{" M U1 ",'tool_choice':{'type':'a\\nb'}}", .param = "tool_choice", .what = "type 'a b' is not"},
    {.body = "{" M U1 ",'tool_choice':{'type':'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\u00e9'}}", .param = "tool_choice",
     .what = "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa?' is not"},
};

static void test_refusals(void) {
    for (size_t k = 0; k < sizeof refusals / sizeof *refusals; k++)
        expect_refusal(refusals[k].body, refusals[k].count, refusals[k].param, refusals[k].what);
}

/* ---- responses ----------------------------------------------------------------------- */

#define USAGE(p, c, cached) "'usage':{'prompt_tokens':" #p ",'completion_tokens':" #c ",'total_tokens':0," \
                            "'prompt_tokens_details':{'cached_tokens':" #cached "}}"
#define AUSAGE(in, out, cached) "'usage':{'input_tokens':" #in ",'output_tokens':" #out ",'cache_read_input_tokens':" \
                                #cached ",'cache_creation_input_tokens':0}"

static void expect_response(const char *body, const char *completion, const char *want) {
    json_t *b = J(body), *c = J(completion);
    TEST_CHECK(same(serve_api_anthropic.response(b, c, &SI), want), "response to %s", completion);
    json_decref(b);
    json_decref(c);
}

#define CMPL(choice, usage) "{'id':'chatcmpl-x1','object':'chat.completion','created':1,'model':'pocket-model'," \
                            "'choices':[" choice "]," usage "}"
#define MSG(content, reason, seq, usage) "{'id':'msg_x1','type':'message','role':'assistant','model':'pocket-model'," \
                                         "'content':" content ",'stop_reason':'" reason "','stop_sequence':" seq "," usage "}"

static void test_responses(void) {
    const char *body = "{'model':'m','max_tokens':5," U1 "}";
    expect_response(body,
                    CMPL("{'index':0,'message':{'role':'assistant','content':'Hello','reasoning_content':'Let me think.'},"
                         "'finish_reason':'stop'}", USAGE(10, 4, 3)),
                    MSG("[{'type':'thinking','thinking':'Let me think.','signature':'9acf7fade953e586'},"
                        "{'type':'text','text':'Hello'}]", "end_turn", "null", AUSAGE(7, 4, 3)));
    /* tool calls: a JSON object, arguments that are not, none at all */
    expect_response(body,
                    CMPL("{'index':0,'message':{'role':'assistant','content':null,'tool_calls':["
                         "{'id':'call_1','type':'function','function':{'name':'f','arguments':'{\\'city\\': \\'Paris\\'}'}},"
                         "{'id':'call_2','type':'function','function':{'name':'g','arguments':'city=Paris'}},"
                         "{'id':'call_3','type':'function','function':{'name':'h','arguments':'[1]'}},"
                         "{'id':'call_4','type':'function','function':{'name':'k','arguments':' '}}]},"
                         "'finish_reason':'tool_calls'}", USAGE(10, 5, 0)),
                    MSG("[{'type':'tool_use','id':'call_1','name':'f','input':{'city':'Paris'},'caller':{'type':'direct'}},"
                        "{'type':'tool_use','id':'call_2','name':'g','input':{'_raw_arguments':'city=Paris'},'caller':{'type':'direct'}},"
                        "{'type':'tool_use','id':'call_3','name':'h','input':{'_raw_arguments':'[1]'},'caller':{'type':'direct'}},"
                        "{'type':'tool_use','id':'call_4','name':'k','input':{},'caller':{'type':'direct'}}]",
                        "tool_use", "null", AUSAGE(10, 5, 0)));
    /* length at max_tokens; before it (the context is full) */
    expect_response(body, CMPL("{'index':0,'message':{'role':'assistant','content':'abcde'},'finish_reason':'length'}", USAGE(3, 5, 0)),
                    MSG("[{'type':'text','text':'abcde'}]", "max_tokens", "null", AUSAGE(3, 5, 0)));
    expect_response(body, CMPL("{'index':0,'message':{'role':'assistant','content':'abc'},'finish_reason':'length'}", USAGE(3, 3, 0)),
                    MSG("[{'type':'text','text':'abc'}]", "model_context_window_exceeded", "null", AUSAGE(3, 3, 0)));
    /* a stop string named by the server; an empty answer */
    expect_response(body, CMPL("{'index':0,'message':{'role':'assistant','content':'ab'},'finish_reason':'stop',"
                               "'stop_sequence':'END'}", USAGE(3, 3, 0)),
                    MSG("[{'type':'text','text':'ab'}]", "stop_sequence", "'END'", AUSAGE(3, 3, 0)));
    expect_response(body, CMPL("{'index':0,'message':{'role':'assistant','content':''},'finish_reason':'stop'}", USAGE(3, 0, 0)),
                    MSG("[]", "end_turn", "null", AUSAGE(3, 0, 0)));
}

/* ---- streams --------------------------------------------------------------------------- */

#define MAXEV 64

/* Run a stream: each chunk is the inside of a chunk object after its id and
   model ("'choices':[...]"), or "ERR:message" (a failure); after the last,
   the end (NULL) unless told not to. Returns the bytes (malloc'ed). */
static char *run_stream(const char *body, const char *const *chunks, int n, int end) {
    json_t *b = J(body);
    void *st = serve_api_anthropic.stream_new(b, &SI);
    api_buf out = {0};
    for (int i = 0; i < n; i++) {
        if (!strncmp(chunks[i], "ERR:", 4)) {
            TEST_COND("stream_chunk (error)", serve_api_anthropic.stream_chunk(st, NULL, chunks[i] + 4, &out) == 0);
            continue;
        }
        char s[4096];
        snprintf(s, sizeof s, "{'id':'chatcmpl-abc','object':'chat.completion.chunk','created':1,'model':'pocket-model',%s}",
                 chunks[i]);
        json_t *c = J(s);
        TEST_COND("stream_chunk", serve_api_anthropic.stream_chunk(st, c, NULL, &out) == 0);
        json_decref(c);
    }
    if (end) TEST_COND("stream_chunk (end)", serve_api_anthropic.stream_chunk(st, NULL, NULL, &out) == 0);
    size_t before = out.n;  /* nothing more once ended or failed */
    TEST_COND("stream_chunk after the end", serve_api_anthropic.stream_chunk(st, NULL, NULL, &out) == 0 && out.n == before);
    serve_api_anthropic.stream_free(st);
    json_decref(b);
    return out.p;
}

/* The stream's bytes, reparsed as server-sent events ("event: NAME\ndata: JSON\n\n"),
   equal to want ("NAME JSON" each): names, data, and data.type == NAME. */
static void expect_events(const char *what, const char *bytes, const char *const *want, int n) {
    int k = 0, ok = 1;
    const char *p = bytes ? bytes : "";
    while (*p && ok) {
        const char *end = strstr(p, "\n\n"), *nl = strchr(p, '\n');
        ok = end && nl && !strncmp(p, "event: ", 7) && !strncmp(nl, "\ndata: ", 7) && nl < end;
        if (!ok) { fprintf(stderr, "  not an event at: %.80s\n", p); break; }
        if (k >= n) { fprintf(stderr, "  an event more than the %d expected: %.*s\n", n, (int)(end - p), p); ok = 0; break; }
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(nl - p - 7), p + 7);
        json_t *data = json_loadb(nl + 7, (size_t)(end - nl - 7), 0, NULL);
        const char *sp = strchr(want[k], ' ');
        ok = data && sp && (size_t)(sp - want[k]) == strlen(name) && !strncmp(want[k], name, strlen(name)) &&
             !strcmp(json_string_value(json_object_get(data, "type")), name);
        if (!ok) {
            fprintf(stderr, "  event %d: got %s %.*s, want %s\n", k, name, (int)(end - nl - 7), nl + 7, want[k]);
            json_decref(data);
        } else if (!(ok = same(data, sp + 1))) {
            fprintf(stderr, "  (event %d)\n", k);
        }
        k++;
        p = end + 2;
    }
    TEST_CHECK(ok && k == n, "stream %s: %d events of %d as expected", what, k, n);
}

#define ROLE "'choices':[{'index':0,'delta':{'role':'assistant','content':''}}]"
#define CONTENT(t) "'choices':[{'index':0,'delta':{'content':'" t "'}}]"
#define REASON(t) "'choices':[{'index':0,'delta':{'reasoning_content':'" t "'}}]"
#define FINISH(r) "'choices':[{'index':0,'delta':{},'finish_reason':'" r "'}]"
#define UCHUNK(p, c, cached) "'choices':[]," USAGE(p, c, cached)
#define CALL(i, id, name) "'choices':[{'index':0,'delta':{'tool_calls':[{'index':" #i ",'id':'" id "','type':'function'," \
                          "'function':{'name':'" name "','arguments':''}}]}}]"
#define ARGS(i, a) "'choices':[{'index':0,'delta':{'tool_calls':[{'index':" #i ",'function':{'arguments':'" a "'}}]}}]"

#define E_START "message_start {'type':'message_start','message':{'id':'msg_abc','type':'message','role':'assistant'," \
                "'model':'pocket-model','content':[],'stop_reason':null,'stop_sequence':null," AUSAGE(0, 0, 0) "}}"
#define E_TEXT(i) "content_block_start {'type':'content_block_start','index':" #i ",'content_block':{'type':'text','text':''}}"
#define E_THINK(i) "content_block_start {'type':'content_block_start','index':" #i ",'content_block':{'type':'thinking'," \
                   "'thinking':'','signature':''}}"
#define E_TOOL(i, id, name) "content_block_start {'type':'content_block_start','index':" #i ",'content_block':{'type':'tool_use'," \
                            "'id':'" id "','name':'" name "','input':{},'caller':{'type':'direct'}}}"
#define E_DELTA(i, d) "content_block_delta {'type':'content_block_delta','index':" #i ",'delta':" d "}"
#define E_STOP(i) "content_block_stop {'type':'content_block_stop','index':" #i "}"
#define E_MDELTA(reason, seq, usage) "message_delta {'type':'message_delta','delta':{'stop_reason':'" reason "'," \
                                     "'stop_sequence':" seq "}," usage "}"
#define E_END "message_stop {'type':'message_stop'}"
#define RUN(what, body, end, chunks, events) do { \
    static const char *const c_[] = chunks, *const e_[] = events; \
    char *b_ = run_stream(body, c_, (int)(sizeof c_ / sizeof *c_), end); \
    expect_events(what, b_, e_, (int)(sizeof e_ / sizeof *e_)); \
    free(b_); \
} while (0)
#define L(...) {__VA_ARGS__}

static void test_streams(void) {
    const char *body = "{'model':'m','max_tokens':5,'stream':true," U1 "}";
    RUN("text", body, 1,
        L(ROLE, CONTENT("Hel"), CONTENT("lo"), FINISH("stop"), UCHUNK(10, 2, 4)),
        L(E_START, E_TEXT(0), E_DELTA(0, "{'type':'text_delta','text':'Hel'}"), E_DELTA(0, "{'type':'text_delta','text':'lo'}"),
          E_STOP(0), E_MDELTA("end_turn", "null", AUSAGE(6, 2, 4)), E_END));
    RUN("reasoning then text", body, 1,
        L(ROLE, REASON("Hmm, "), REASON("the sky."), CONTENT("Blue."), FINISH("stop"), UCHUNK(10, 4, 0)),
        L(E_START, E_THINK(0), E_DELTA(0, "{'type':'thinking_delta','thinking':'Hmm, '}"),
          E_DELTA(0, "{'type':'thinking_delta','thinking':'the sky.'}"),
          E_DELTA(0, "{'type':'signature_delta','signature':'9d5fb1fc14a6affd'}"), E_STOP(0),
          E_TEXT(1), E_DELTA(1, "{'type':'text_delta','text':'Blue.'}"), E_STOP(1),
          E_MDELTA("end_turn", "null", AUSAGE(10, 4, 0)), E_END));
    RUN("a tool call in pieces", body, 1,
        L(ROLE, CONTENT("Let me check."), CALL(0, "call_1", "weather"), ARGS(0, "{\\'ci"), ARGS(0, "ty\\': \\'Pa"),
          ARGS(0, "ris\\'}"), FINISH("tool_calls"), UCHUNK(20, 9, 0)),
        L(E_START, E_TEXT(0), E_DELTA(0, "{'type':'text_delta','text':'Let me check.'}"), E_STOP(0),
          E_TOOL(1, "call_1", "weather"), E_DELTA(1, "{'type':'input_json_delta','partial_json':'{\\'ci'}"),
          E_DELTA(1, "{'type':'input_json_delta','partial_json':'ty\\': \\'Pa'}"),
          E_DELTA(1, "{'type':'input_json_delta','partial_json':'ris\\'}'}"), E_STOP(1),
          E_MDELTA("tool_use", "null", AUSAGE(20, 9, 0)), E_END));
    RUN("two tool calls", body, 1,
        L(ROLE, CALL(0, "call_1", "f"), ARGS(0, "{}"), CALL(1, "call_2", "g"), ARGS(1, "{\\'a\\'"), ARGS(1, ": 1}"),
          FINISH("tool_calls"), UCHUNK(20, 9, 0)),
        L(E_START, E_TOOL(0, "call_1", "f"), E_DELTA(0, "{'type':'input_json_delta','partial_json':'{}'}"), E_STOP(0),
          E_TOOL(1, "call_2", "g"), E_DELTA(1, "{'type':'input_json_delta','partial_json':'{\\'a\\''}"),
          E_DELTA(1, "{'type':'input_json_delta','partial_json':': 1}'}"), E_STOP(1),
          E_MDELTA("tool_use", "null", AUSAGE(20, 9, 0)), E_END));
    RUN("arguments that are not JSON", body, 1,
        L(ROLE, CALL(0, "call_1", "f"), ARGS(0, "city="), ARGS(0, "Paris"), FINISH("tool_calls"), UCHUNK(20, 9, 0)),
        L(E_START, E_TOOL(0, "call_1", "f"),
          E_DELTA(0, "{'type':'input_json_delta','partial_json':'{\\'_raw_arguments\\':\\'city=Paris\\'}'}"), E_STOP(0),
          E_MDELTA("tool_use", "null", AUSAGE(20, 9, 0)), E_END));
    RUN("a call with no arguments", body, 1,
        L(ROLE, CALL(0, "call_1", "f"), FINISH("tool_calls"), UCHUNK(2, 1, 0)),
        L(E_START, E_TOOL(0, "call_1", "f"), E_STOP(0), E_MDELTA("tool_use", "null", AUSAGE(2, 1, 0)), E_END));
    RUN("length", body, 1,
        L(ROLE, CONTENT("abcde"), FINISH("length"), UCHUNK(3, 5, 0)),
        L(E_START, E_TEXT(0), E_DELTA(0, "{'type':'text_delta','text':'abcde'}"), E_STOP(0),
          E_MDELTA("max_tokens", "null", AUSAGE(3, 5, 0)), E_END));
    RUN("a full context", body, 1,
        L(ROLE, CONTENT("ab"), FINISH("length"), UCHUNK(3, 2, 0)),
        L(E_START, E_TEXT(0), E_DELTA(0, "{'type':'text_delta','text':'ab'}"), E_STOP(0),
          E_MDELTA("model_context_window_exceeded", "null", AUSAGE(3, 2, 0)), E_END));
    RUN("a stop string", body, 1,
        L(ROLE, CONTENT("ab"), "'choices':[{'index':0,'delta':{},'finish_reason':'stop','stop_sequence':'END'}]", UCHUNK(3, 2, 0)),
        L(E_START, E_TEXT(0), E_DELTA(0, "{'type':'text_delta','text':'ab'}"), E_STOP(0),
          E_MDELTA("stop_sequence", "'END'", AUSAGE(3, 2, 0)), E_END));
    RUN("a failure", body, 0,
        L(ROLE, CONTENT("Hi"), "ERR:generation failed: out of memory", CONTENT("more")),
        L(E_START, E_TEXT(0), E_DELTA(0, "{'type':'text_delta','text':'Hi'}"),
          "error {'type':'error','error':{'type':'api_error','message':'generation failed: out of memory'}}"));
    RUN("no chunks", body, 1, L(ROLE),
        L(E_START, E_MDELTA("end_turn", "null", AUSAGE(0, 0, 0)), E_END));
}

/* ---- errors -------------------------------------------------------------------------- */

static void test_errors(void) {
    static const struct { int status; const char *type; } map[] = {
        {400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"},
        {404, "not_found_error"}, {413, "request_too_large"}, {429, "rate_limit_error"},
        {500, "api_error"}, {503, "overloaded_error"}, {422, "invalid_request_error"}};
    for (size_t k = 0; k < sizeof map / sizeof *map; k++) {
        api_error e;
        api_fail(&e, map[k].status, NULL, "went wrong");
        char want[160];
        snprintf(want, sizeof want, "{'type':'error','error':{'type':'%s','message':'went wrong'}}", map[k].type);
        TEST_CHECK(same(serve_api_anthropic.error(&e), want), "error object for %d", map[k].status);
    }
    /* a message cut inside a UTF-8 character still makes a JSON string */
    api_error e;
    api_fail(&e, 400, NULL, "bad: %.3s", "ab\xc3\xa9");
    TEST_COND("a cut UTF-8 message", same(serve_api_anthropic.error(&e),
                                           "{'type':'error','error':{'type':'invalid_request_error','message':'bad: ab?'}}"));
    TEST_COND("the stream type", !strcmp(serve_api_anthropic.stream_type, "text/event-stream") &&
                                     !strcmp(serve_api_anthropic.name, "anthropic"));
}

int main(void) {
    test_requests();
    test_refusals();
    test_responses();
    test_streams();
    test_errors();
    return TEST_REPORT();
}

/* schema_valid.h - a validator of JSON values against the JSON schema
 * subset pocket's grammars support, written from JSON Schema's rules (not
 * the grammar's: absent additionalProperties allows anything, oneOf needs
 * exactly one), for the tests that check generated output
 * (test_grammar_gen.c, test_toolcall_grammar.c). Set root_schema (for
 * $refs) before valid(value, schema). Static: each test gets its copy. */
#ifndef PK_TEST_SCHEMA_VALID_H
#define PK_TEST_SCHEMA_VALID_H

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *root_schema;

static json_t *resolve_ref(const char *ref) {
    json_t *cur = root_schema;
    if (ref[0] != '#') return NULL;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", ref + 1);
    for (char *tok = strtok(buf, "/"); tok && cur; tok = strtok(NULL, "/")) cur = json_object_get(cur, tok);
    return cur;
}

static size_t utf8_len(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int digits(const char *s, int n) {
    for (int i = 0; i < n; i++) if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

static int valid_format(const char *f, const char *s) {
    size_t n = strlen(s);
    if (!strcmp(f, "date"))
        return n == 10 && digits(s, 4) && s[4] == '-' && digits(s + 5, 2) && s[7] == '-' && digits(s + 8, 2) &&
               atoi(s + 5) >= 1 && atoi(s + 5) <= 12 && atoi(s + 8) >= 1 && atoi(s + 8) <= 31;
    if (!strcmp(f, "uuid")) {
        if (n != 36) return 0;
        for (size_t i = 0; i < n; i++) {
            int dash = i == 8 || i == 13 || i == 18 || i == 23;
            if (dash != (s[i] == '-')) return 0;
            if (!dash && !strchr("0123456789abcdefABCDEF", s[i])) return 0;
        }
        return 1;
    }
    return 1;
}

static int valid(json_t *v, json_t *s);

static int valid_type(json_t *v, const char *t) {
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "integer")) return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    return 0;
}

static int valid(json_t *v, json_t *s) {
    if (json_is_true(s)) return 1;
    if (json_is_false(s) || !json_is_object(s)) return 0;
    json_t *x;
    if ((x = json_object_get(s, "$ref"))) return valid(v, resolve_ref(json_string_value(x)));
    if (json_is_null(v) && json_is_true(json_object_get(s, "nullable"))) return 1;
    if ((x = json_object_get(s, "const")) && !json_equal(v, x)) return 0;
    if ((x = json_object_get(s, "enum"))) {
        int any = 0;
        for (size_t i = 0; i < json_array_size(x); i++) any |= json_equal(v, json_array_get(x, i));
        if (!any) return 0;
    }
    if ((x = json_object_get(s, "anyOf"))) {
        int any = 0;
        for (size_t i = 0; i < json_array_size(x); i++) any |= valid(v, json_array_get(x, i));
        if (!any) return 0;
    }
    if ((x = json_object_get(s, "oneOf"))) {
        int n = 0;
        for (size_t i = 0; i < json_array_size(x); i++) n += valid(v, json_array_get(x, i));
        if (n != 1) return 0;
    }
    if ((x = json_object_get(s, "type"))) {
        int ok = 0;
        if (json_is_string(x)) ok = valid_type(v, json_string_value(x));
        for (size_t i = 0; i < json_array_size(x); i++) ok |= valid_type(v, json_string_value(json_array_get(x, i)));
        if (!ok) return 0;
    }
    if (json_is_number(v)) {
        double d = json_number_value(v);
        if ((x = json_object_get(s, "minimum")) && d < json_number_value(x)) return 0;
        if ((x = json_object_get(s, "maximum")) && d > json_number_value(x)) return 0;
        if ((x = json_object_get(s, "exclusiveMinimum")) && d <= json_number_value(x)) return 0;
        if ((x = json_object_get(s, "exclusiveMaximum")) && d >= json_number_value(x)) return 0;
    }
    if (json_is_string(v)) {
        size_t n = utf8_len(json_string_value(v));
        if ((x = json_object_get(s, "minLength")) && n < (size_t)json_integer_value(x)) return 0;
        if ((x = json_object_get(s, "maxLength")) && n > (size_t)json_integer_value(x)) return 0;
        if ((x = json_object_get(s, "format")) && !valid_format(json_string_value(x), json_string_value(v))) return 0;
    }
    if (json_is_array(v)) {
        size_t n = json_array_size(v), np = 0;
        if ((x = json_object_get(s, "minItems")) && n < (size_t)json_integer_value(x)) return 0;
        if ((x = json_object_get(s, "maxItems")) && n > (size_t)json_integer_value(x)) return 0;
        if ((x = json_object_get(s, "prefixItems"))) {
            np = json_array_size(x);
            for (size_t i = 0; i < np && i < n; i++) if (!valid(json_array_get(v, i), json_array_get(x, i))) return 0;
        }
        if ((x = json_object_get(s, "items")))
            for (size_t i = np; i < n; i++) if (!valid(json_array_get(v, i), x)) return 0;
    }
    if (json_is_object(v)) {
        json_t *props = json_object_get(s, "properties"), *add = json_object_get(s, "additionalProperties");
        if ((x = json_object_get(s, "required")))
            for (size_t i = 0; i < json_array_size(x); i++)
                if (!json_object_get(v, json_string_value(json_array_get(x, i)))) return 0;
        const char *k;
        json_t *val;
        json_object_foreach(v, k, val) {
            json_t *ps = props ? json_object_get(props, k) : NULL;
            if (ps) { if (!valid(val, ps)) return 0; }
            else if (add && !valid(val, add)) return 0;
        }
    }
    return 1;
}

#endif

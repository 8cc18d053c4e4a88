#!/usr/bin/python3
"""jinja_gen.py SEED N DIR - write N random Jinja templates (DIR/gen-SEED-K.jinja)
over the variables of tests/data/jinja/vars.json, for comparing pocket's
engine with Jinja2 (tests/cli/t_jinja.sh). The same SEED gives the same
templates everywhere (Python's random with a fixed seed).

The templates mix what chat templates do - loops with loop.*, if/elif/else,
set (plain, tuple, namespace attribute, block), macros with defaults,
filters and tests with arguments, string and dict methods, slices,
conditional expressions, comparisons, arithmetic, string formatting - with
every white-space control form. Values Python prints with a memory address
(bound methods, generators, range objects) are always consumed (|list,
|join, called) so that the texts can be equal; integers stay small so that
Python's unbounded integers and pocket's 64-bit ones agree."""
import os
import random
import sys

STRS = ["s", "u8", "ws", "empty", "html", "multiline", "'abc'", "'A b C'", "\"it's\"", "'x,y,,z'",
        "'  pad  '", "'<think>r</think>c'", "'日本語'", "'\\n\\t'", "'{}-{}'.format(i, s)", "('%s:%d' % (s, i))",
        "('%5.1f|%-3s|' % (x, 'ab'))", "'{0}{1}{0}'.format('a', 'b')"]
NUMS = ["i", "neg", "x", "zero", "1", "2", "3", "0", "-1", "2.5", "0.1", "7", "1e3", "tiny"]
LISTS = ["l", "words", "floats", "mixed", "people", "messages", "[1, 2, 3]", "['b', 'a']", "[]", "(1, 'a')",
         "[none, true, 0]"]
DICTS = ["d", "nested", "people[0]", "messages[2]", "{'k': 1, 'j': [1, 2]}", "{}", "nested.k[1]"]
ANY = ["n", "t", "f", "undefined_name", "d.missing", "nested.k", "people[1].tags", "d.get('a', 0)", "d.get('zz')",
       "d.keys()|list", "d.values()|list", "d.items()|list", "d.copy()", "(d|dictsort)[0]", "range(3)|list",
       "dict(x=1, y=[2])", "people|map(attribute='age')|sum", "(people|groupby_never)"]
STR_FILTERS = ["upper", "lower", "title", "capitalize", "trim", "length", "string", "first", "last", "list",
               "reverse", "wordcount", "e", "safe", "tojson", "indent", "indent(2, true)", "replace('a', 'X')",
               "default('dflt')", "trim('x')", "center(9)", "truncate(8)", "count"]
LIST_FILTERS = ["length", "first", "last", "list", "sort", "unique|list", "join(',')", "join", "tojson",
                "reverse|list", "select('odd')|list", "reject('none')|list", "map('string')|join('+')",
                "string", "min", "max", "sum", "sort(reverse=true)", "select|list", "tojson(indent=2)",
                "map('upper')|list", "default([1])", "batch_never" ]
DICT_FILTERS = ["items|list", "dictsort", "tojson", "list", "length", "dictsort(by='value')", "string",
                "tojson(indent=1)", "first"]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable",
         "sequence", "boolean", "true", "false", "callable", "odd", "even", "divisibleby(3)", "eq 1",
         "in [1, 2, 'a']", "lower", "upper", "sameas none"]
STR_METHODS = ["upper()", "lower()", "strip()", "split()", "split(',')", "startswith('a')", "endswith('c')",
               "replace('a', 'b')", "title()", "find('b')", "count('a')", "lstrip()", "rstrip('x')",
               "rsplit(' ', 1)", "splitlines()", "isdigit()", "capitalize()", "zfill(6)", "center(7, '*')"]
WS = ["", "-"]


class Gen:
    def __init__(self, rnd):
        self.r = rnd
        self.depth = 0
        self.loop_vars = []
        self.macros = []

    def pick(self, xs):
        return self.r.choice(xs)

    def string(self):
        c = self.r.random()
        if self.depth > 2 or c < 0.35:
            return self.pick(STRS + [v for v, t in self.loop_vars if t == "str"])
        self.depth += 1
        try:
            k = self.r.randrange(7)
            if k == 0:
                return "(%s ~ %s)" % (self.any(), self.any())
            if k == 1:
                return "(%s + %s)" % (self.string(), self.string())
            if k == 2:
                return "%s.%s" % (self.atom_str(), self.pick(STR_METHODS[:5] + ["replace('l', 'L')", "title()"]))
            if k == 3:
                return "%s[%s]" % (self.atom_str(), self.pick(["0", "-1", "1:", "::-1", ":3", "1:-1", "::2"]))
            if k == 4:
                return "(%s if %s else %s)" % (self.string(), self.boolean(), self.string())
            if k == 5:
                return "%s|%s" % (self.atom_str(), self.pick(["upper", "trim", "lower", "string", "e", "title"]))
            return "(%s|join(%s))" % (self.lst(), self.pick(["','", "' '", "''"]))
        finally:
            self.depth -= 1

    def atom_str(self):
        s = self.string()
        return s if s.replace("_", "").isalnum() or s.startswith("(") else "(%s)" % s

    def number(self):
        if self.depth > 2 or self.r.random() < 0.4:
            return self.pick(NUMS + [v for v, t in self.loop_vars if t == "num"] + ["loop_free_len"]) \
                .replace("loop_free_len", "l|length")
        self.depth += 1
        try:
            k = self.r.randrange(6)
            op = self.pick(["+", "-", "*", "//", "%", "/"])
            if k == 0:
                return "(%s %s %s)" % (self.number(), op, self.pick(["1", "2", "3", "7", "2.5"]))
            if k == 1:
                return "(%s|length)" % self.pick([self.string(), self.lst()])
            if k == 2:
                return "(%s|%s)" % (self.number(), self.pick(["abs", "int", "float", "round", "round(1)", "string|length"]))
            if k == 3:
                return "-%s" % self.pick(NUMS)
            if k == 4:
                return "(%s|sum)" % self.pick(["l", "[1, 2.5]", "floats"])
            return "(%s if %s else %s)" % (self.number(), self.boolean(), self.number())
        finally:
            self.depth -= 1

    def boolean(self):
        if self.depth > 2:
            return self.pick(["t", "f", "true", "false", "n is none"])
        self.depth += 1
        try:
            k = self.r.randrange(7)
            if k == 0:
                return "%s is %s%s" % (self.any(), self.pick(["", "not "]), self.pick(TESTS))
            if k == 1:
                return "(%s %s %s)" % (self.number(), self.pick(["==", "!=", "<", "<=", ">", ">="]), self.number())
            if k == 2:
                return "(%s in %s)" % (self.string(), self.pick([self.string(), self.lst(), "d"]))
            if k == 3:
                return "(%s %s %s)" % (self.boolean(), self.pick(["and", "or"]), self.boolean())
            if k == 4:
                return "not %s" % self.boolean()
            if k == 5:
                return "(%s == %s)" % (self.any(), self.any())
            return self.pick(["t", "f", "n", "l", "empty", "d", "undefined_name"])
        finally:
            self.depth -= 1

    def lst(self):
        if self.depth > 2 or self.r.random() < 0.4:
            return self.pick(LISTS)
        self.depth += 1
        try:
            k = self.r.randrange(6)
            if k == 0:
                return "%s[%s]" % (self.pick(LISTS), self.pick(["1:", "::-1", ":2", "-2:"]))
            if k == 1:
                return "(%s|%s)" % (self.pick(LISTS[:4]), self.pick(["sort", "list", "unique|list", "reverse|list"]))
            if k == 2:
                return "(%s|map(attribute='%s', default='-')|list)" % (self.pick(["people", "messages"]),
                                                                       self.pick(["name", "role", "age", "tags.0"]))
            if k == 3:
                return "(%s|selectattr('%s')|list)" % (self.pick(["people", "messages"]), self.pick(["tags", "role", "tool_calls"]))
            if k == 4:
                return "%s.split(%s)" % (self.atom_str(), self.pick(["", "','", "' '"]))
            return "[%s, %s]" % (self.any(), self.any())
        finally:
            self.depth -= 1

    def any(self):
        k = self.r.randrange(6)
        if k == 0:
            return self.string()
        if k == 1:
            return self.number()
        if k == 2:
            return self.boolean()
        if k == 3:
            return self.lst()
        if k == 4:
            return self.pick(DICTS)
        return self.pick(ANY).replace("(people|groupby_never)", "(people|map(attribute='name')|sort|first)")

    def filtered(self):
        k = self.r.randrange(4)
        if k == 0:
            return "%s|%s" % (self.atom_str(), self.pick(STR_FILTERS))
        if k == 1:
            return "%s|%s" % (self.pick(LISTS), self.pick(LIST_FILTERS).replace("batch_never", "length"))
        if k == 2:
            return "%s|%s" % (self.pick(DICTS), self.pick(DICT_FILTERS))
        return "%s.%s" % (self.atom_str(), self.pick(STR_METHODS))

    def output(self):
        e = self.pick([self.any, self.filtered, self.string, self.number])()
        return "{{%s %s %s}}" % (self.pick(WS), e, self.pick(WS))

    def tag(self, body):
        return "{%%%s %s %s%%}" % (self.pick(WS + ["", "+"]), body, self.pick(WS + ["", ""]))

    def text(self):
        return self.pick(["", " ", "\n", "  \n", "x", "\n    ", " | ", "\n\n", "\t", "word\n  "])

    def block(self, n):
        out = []
        for _ in range(n):
            out.append(self.text())
            out.append(self.stmt())
        out.append(self.text())
        return "".join(out)

    def stmt(self):
        if self.depth > 3:
            return self.output()
        self.depth += 1
        try:
            k = self.r.randrange(12)
            if k <= 2:
                return self.output()
            if k == 3:
                parts = [self.tag("if %s" % self.boolean()), self.block(2)]
                if self.r.random() < 0.5:
                    parts += [self.tag("elif %s" % self.boolean()), self.block(1)]
                if self.r.random() < 0.5:
                    parts += [self.tag("else"), self.block(1)]
                parts.append(self.tag("endif"))
                return "".join(parts)
            if k == 4:
                var = "v%d" % self.r.randrange(3)
                src, typ = self.pick([("l", "num"), ("words", "str"), ("people|map(attribute='name')", "str"),
                                      ("range(4)", "num"), ("s", "str"), ("d", "str"), ("floats", "num")])
                cond = " if %s" % self.boolean() if self.r.random() < 0.25 else ""
                self.loop_vars.append((var, typ))
                body = self.block(2) + self.pick(["{{ loop.index }}", "{{ loop.first }}", "{{ loop.last }}",
                                                  "{{ loop.length }}{{ loop.revindex }}", "{{ loop.previtem }}",
                                                  "{{ loop.cycle('a', 'b') }}", "",
                                                  "{% if loop.index > 2 %}{% break %}{% endif %}",
                                                  "{% if loop.first %}{% continue %}{% endif %}"])
                self.loop_vars.pop()
                els = self.tag("else") + self.block(1) if self.r.random() < 0.2 else ""
                return self.tag("for %s in %s%s" % (var, src, cond)) + body + els + self.tag("endfor")
            if k == 5:
                var = "s%d" % self.r.randrange(2)
                return self.tag("set %s = %s" % (var, self.any())) + "{{ %s }}" % var
            if k == 6:
                return self.tag("set ns = namespace(a=%s, b=0)" % self.any()) + \
                    self.tag("for q in l") + self.tag("set ns.b = ns.b + q") + self.tag("endfor") + "{{ ns.b }}{{ ns.a }}"
            if k == 7:
                name = "m%d" % self.r.randrange(100)
                body = self.block(1) + "{{ a }}{{ b }}"
                call = "{{ %s(%s) }}" % (name, self.pick(["1", "'x', 2", "b='k', a=3", "s"]))
                return self.tag("macro %s(a, b=%s)" % (name, self.pick(["none", "'d'", "[1]", "2"]))) + body + \
                    self.tag("endmacro") + self.text() + call
            if k == 8:
                return self.tag("set blk") + self.block(1) + self.tag("endset") + "[{{ blk|trim }}]"
            if k == 9:
                return "{#%s comment {{ x }} %s#}" % (self.pick(WS), self.pick(WS))
            if k == 10:
                return self.tag("set p, q = %s" % self.pick(["[1, 2]", "'ab'", "(s, i)", "[1]"])) + "{{ p }}{{ q }}"
            return self.tag("filter %s" % self.pick(["upper", "trim", "lower|replace('e', '3')"])) + \
                self.block(1) + self.tag("endfilter")
        finally:
            self.depth -= 1


def main():
    seed, n, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    os.makedirs(out, exist_ok=True)
    for k in range(n):
        g = Gen(random.Random(seed * 100003 + k))
        with open(os.path.join(out, "gen-%d-%d.jinja" % (seed, k)), "w", encoding="utf-8") as f:
            f.write(g.block(g.r.randrange(2, 6)))


if __name__ == "__main__":
    main()

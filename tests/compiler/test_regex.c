/* ir/regex.c: regex -> minimal DFA.
 *
 * The oracle is the C library: for a few hundred generated regexes over a small alphabet, the
 * DFA must accept exactly the strings POSIX regexec (REG_EXTENDED, anchored as ^(re)$) matches,
 * on thousands of random strings and on strings the DFA itself generates. Then hand-written
 * cases for what the generator does not reach (escapes, POSIX classes, anchors, bytes >= 0x80),
 * the errors with the byte they point at, and the limits. */
#include <criterion/criterion.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regex_dfa.h"

static unsigned rng(unsigned long long *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)(*s >> 33);
}

/* ---- generated regexes against regexec ---- */

struct gen {
	char buf[512];
	size_t n;
	unsigned long long seed;
};

static void put(struct gen *g, const char *s)
{
	size_t l = strlen(s);
	if (g->n + l < sizeof(g->buf))
		memcpy(g->buf + g->n, s, l), g->n += l;
	g->buf[g->n] = 0;
}

static const char *const literals[] = { "a", "b", "c", "/", "\\." };
static const char *const brackets[] = { "[ab]", "[^a]", "[a-c]", "[^/b]", "[b/.]", "[c-c]", "[^abc/.]", "[.a]" };
static const char *const quants[] = { "*", "+", "?", "{2}", "{0,2}", "{1,3}", "{2,}", "{0,1}", "{3}" };

static void gen_re(struct gen *g, int depth)
{
	unsigned k = rng(&g->seed) % (depth > 0 ? 7 : 3);
	switch (k) {
	case 0: put(g, literals[rng(&g->seed) % 5]); break;
	case 1: put(g, rng(&g->seed) % 3 ? brackets[rng(&g->seed) % 8] : "."); break;
	case 2:   /* a literal with a quantifier */
		put(g, literals[rng(&g->seed) % 5]);
		put(g, quants[rng(&g->seed) % 9]);
		break;
	case 3:
	case 4: {   /* concatenation */
		int n = 2 + (int)(rng(&g->seed) % 3);
		for (int i = 0; i < n; i++)
			gen_re(g, depth - 1);
		break;
	}
	case 5:   /* alternation */
		put(g, "(");
		gen_re(g, depth - 1);
		put(g, "|");
		gen_re(g, depth - 1);
		put(g, ")");
		break;
	default:   /* a repeated group */
		put(g, "(");
		gen_re(g, depth - 1);
		put(g, ")");
		put(g, quants[rng(&g->seed) % 9]);
		break;
	}
}

static bool oracle(const regex_t *re, const unsigned char *s, size_t n)
{
	char buf[64];
	memcpy(buf, s, n);
	buf[n] = 0;
	return regexec(re, buf, 0, NULL, 0) == 0;
}

Test(regex, agrees_with_regexec)
{
	static const unsigned char alphabet[] = "abc/.xA\xc3";
	unsigned long long seed = 7;
	int regexes = 0, strings = 0, accepted = 0;
	for (int i = 0; i < 400; i++) {
		struct gen g = { .seed = seed + (unsigned long long)i * 7919 };
		gen_re(&g, 3);
		struct re_dfa d;
		struct re_error err;
		cr_assert_eq(re_compile(g.buf, g.n, &d, &err), 0, "%s: %s", g.buf, err.msg);
		char anchored[600];
		snprintf(anchored, sizeof(anchored), "^(%s)$", g.buf);
		regex_t re;
		cr_assert_eq(regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB), 0, "regcomp refused %s", anchored);
		for (int k = 0; k < 3000; k++) {
			unsigned char s[32];
			size_t n = rng(&seed) % 13;
			for (size_t j = 0; j < n; j++)
				s[j] = alphabet[rng(&seed) % (sizeof(alphabet) - 1)];
			bool want = oracle(&re, s, n), got = re_match(&d, s, n);
			cr_assert_eq(got, want, "regex %s on \"%.*s\": DFA %d, regexec %d", g.buf, (int)n, s, got, want);
			accepted += want;
			strings++;
		}
		for (int k = 0; k < 50; k++) {   /* strings the DFA accepts: regexec must too */
			unsigned char s[40];
			int n = re_example(&d, &seed, s, 30);
			if (n < 0)
				break;
			cr_assert(oracle(&re, s, (size_t)n), "regex %s: DFA accepts \"%.*s\", regexec does not", g.buf, n, s);
			cr_assert(re_match(&d, s, (size_t)n));
			strings++;
			accepted++;
		}
		regfree(&re);
		re_free(&d);
		regexes++;
	}
	cr_assert_gt(accepted, strings / 50, "too few positive cases (%d of %d) for the test to mean much", accepted, strings);
	printf("regex oracle: %d regexes, %d strings, %d accepted\n", regexes, strings, accepted);
}

/* ---- hand-written cases ---- */

static bool m(const char *re, const char *s)
{
	struct re_dfa d;
	struct re_error err;
	cr_assert_eq(re_compile(re, strlen(re), &d, &err), 0, "%s: %s", re, err.msg);
	bool r = re_match(&d, (const unsigned char *)s, strlen(s));
	re_free(&d);
	return r;
}

#define YES(re, s) cr_expect(m(re, s), "%s should match \"%s\"", re, s)
#define NO(re, s) cr_expect(!m(re, s), "%s should not match \"%s\"", re, s)

Test(regex, whole_value)
{
	YES("/api/", "/api/");
	NO("/api/", "/api/x");   /* full match, like RE2::FullMatch */
	NO("/api/", "x/api/");
	YES("^/api/$", "/api/");  /* anchors are accepted and redundant */
	YES("", "");
	NO("", "a");
	YES("a|", "");
	YES("()", "");
	YES("(?:ab)+", "abab");
}

Test(regex, classes_and_ranges)
{
	YES("[a-z0-9_-]+", "a_b-9");
	NO("[a-z0-9_-]+", "a.b");
	YES("[]a]", "]");
	YES("[^]a]", "b");
	NO("[^]a]", "]");
	YES("[a-]", "-");
	YES("[\\]\\\\]+", "]\\");
	YES("[[:digit:]]{3}", "123");
	YES("[[:alpha:][:digit:]]+", "ab12");
	YES("[[:xdigit:]]+", "09afAF");
	NO("[[:xdigit:]]", "g");
	YES("[[:space:]]", " ");
	YES("[[:upper:]][[:lower:]]+", "Hello");
	YES("[[:punct:]]+", "!/:@[`{~");
	YES("\\d+\\.\\d+", "12.5");
	NO("\\d", "a");
	YES("\\w+", "ab_9");
	NO("\\w", "-");
	YES("\\s", "\t");
	YES("\\D\\W\\S", "a-x");
	NO("\\D", "5");
	YES("[\\d.]+", "1.2");
	YES(".", "\xff");
	YES("a.c", "a\nc");
}

Test(regex, counted_repetition)
{
	YES("a{3}", "aaa");
	NO("a{3}", "aa");
	NO("a{3}", "aaaa");
	YES("a{2,4}", "aa");
	YES("a{2,4}", "aaaa");
	NO("a{2,4}", "aaaaa");
	YES("a{2,}", "aaaaaaaa");
	NO("a{2,}", "a");
	YES("a{0}", "");
	NO("a{0}", "a");
	YES("(ab){2}c", "ababc");
	char x254[255];
	memset(x254, 'x', 254);
	x254[254] = 0;
	YES("x{254}", x254);   /* 256 states with the dead one: the limit exactly */
	NO("x{254}", x254 + 1);
	YES("(a|b){0,1}c", "c");
}

Test(regex, alternation_and_groups)
{
	YES("GET|HEAD", "GET");
	YES("GET|HEAD", "HEAD");
	NO("GET|HEAD", "GETHEAD");
	YES("/(users|groups)/[0-9]+", "/groups/7");
	YES("((a|b)(c|d))*", "acbdad");
	NO("((a|b)(c|d))*", "acb");
	YES("/static/.*\\.(css|js)", "/static/a/b.css");
	NO("/static/.*\\.(css|js)", "/static/a/b.cssx");
}

Test(regex, anchors_elsewhere)
{
	NO("a^b", "ab");    /* ^ holds only at the start, $ only at the end */
	NO("a$b", "ab");
	YES("(^a|b)c", "ac");
	YES("a(b$|c)", "ab");
	YES("$^", "");
	YES("a*$^", "");    /* the start state is its own state: ^ holds there only */
	NO("a*$^", "a");
}

Test(regex, bytes_above_0x7f)
{
	YES("caf\xc3\xa9", "caf\xc3\xa9");        /* UTF-8 as bytes */
	YES("caf\\xc3\\xa9", "caf\xc3\xa9");
	YES("[\\x80-\\xff]+", "\xc3\xa9\xff");
	NO("[\\x80-\\xff]", "a");
	YES("[^a]", "\x80");
	YES("\\x41\\x2f", "A/");
}

Test(regex, empty_language)
{
	struct re_dfa d;
	struct re_error err;
	cr_assert_eq(re_compile("[^\\x00-\\xff]", 12, &d, &err), 0, "%s", err.msg);
	cr_expect_eq(d.start, 0, "a regex that matches nothing starts dead");
	cr_expect(!re_match(&d, (const unsigned char *)"", 0));
	unsigned long long seed = 1;
	unsigned char buf[8];
	cr_expect_eq(re_example(&d, &seed, buf, 8), -1);
	re_free(&d);
}

/* The DFA is minimal and small: classes merge, the dead state is state 0. */
Test(regex, sizes)
{
	struct re_dfa d;
	struct re_error err;
	cr_assert_eq(re_compile("/api/v[0-9]+/users/[0-9]+", 25, &d, &err), 0);
	cr_expect_eq(d.nstates, 17);   /* dead + 16 (one per position, two loops) */
	cr_expect_eq(d.nclasses, 11);  /* other, / 0-9 a e i p r s u v */
	cr_expect_eq(d.cls['0'], d.cls['9']);
	for (int c = 0; c < d.nclasses; c++)
		cr_expect_eq(d.next[c], 0, "the dead state stays dead");
	re_free(&d);
	cr_assert_eq(re_compile("(a|b)*abb", 9, &d, &err), 0);
	cr_expect_eq(d.nstates, 5);    /* the textbook minimal DFA has 4, plus dead */
	re_free(&d);
	cr_assert_eq(re_compile("[ab]*|[ab]+", 11, &d, &err), 0);
	cr_expect_eq(d.nstates, 2);    /* everything over {a,b}: one state, plus dead */
	cr_expect_eq(d.nclasses, 2);
	re_free(&d);
}

/* ---- errors: what and where ---- */

static void refused(const char *re, size_t pos, const char *msg)
{
	struct re_dfa d;
	struct re_error err;
	cr_assert_eq(re_compile(re, strlen(re), &d, &err), -1, "%s compiled", re);
	cr_expect_eq(err.pos, pos, "%s: error at %zu, expected %zu (%s)", re, err.pos, pos, err.msg);
	cr_expect(strstr(err.msg, msg) != NULL, "%s: \"%s\" does not say \"%s\"", re, err.msg, msg);
}

Test(regex, errors)
{
	refused("(a)\\1", 3, "not a regular language; l7c regexes compile to a DFA");
	refused("a(?=b)", 1, "not a regular language");
	refused("a(?<!b)", 1, "not a regular language");
	refused("ab[cd", 2, "missing ']'");
	refused("a(bc", 1, "missing ')'");
	refused("ab)", 2, "unmatched ')'");
	refused("*a", 0, "nothing to repeat");
	refused("a|+", 2, "nothing to repeat");
	refused("a**", 2, "cannot follow another");
	refused("a{3,2}", 1, "minimum exceeds the maximum");
	refused("a{x}", 1, "expected a count");
	refused("a{2", 1, "expected a count");
	refused("a{1001}", 1, "above 1000");
	refused("[z-a]", 1, "reversed");
	refused("[[:alfa:]]", 1, "unknown character class");
	refused("\\q", 0, "unknown escape");
	refused("ab\\", 2, "trailing");
	refused("\\xZ1", 0, "two hex digits");
	refused("\\bword", 0, "not supported");
	refused("^*", 1, "nothing to repeat");
	refused("a(?i)b", 1, "unsupported group");
}

Test(regex, limits)
{
	refused("(a|b)*a(a|b){8}", 0, "more than 256 DFA states");   /* 2^9 states: no minimisation helps */
	refused("x{255}", 0, "more than 256 DFA states");
	refused("x{1000}y{1000}z{1000}w{1000}v{1000}a{1000}b{1000}c{1000}", 0, "more than 256 DFA states");
	refused(".*(a|b|c|d|e|f|g|h|i|j|k|l|m|n|o|p|q|r|s|t|u|v|w|x|y|z).{12}", 0, "DFA states");
	char many[1024] = "";
	for (int b = 1; b <= 170; b++)   /* 170 distinct bytes in a row: 172 states x 171 classes */
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "\\x%02x", b);
	refused(many, 0, "table of");
	refused("((a{100}){100}){100}", 0, "too large");
	char deep[300] = "";
	for (int i = 0; i < 120; i++)
		strcat(deep, "(");
	refused(deep, 99, "nested more than");   /* at the 100th '(' */
}

/* Bad input never crashes: random soups of metacharacters either compile to a well-formed DFA
 * or are refused with a position inside the regex. */
Test(regex, random_input)
{
	static const char soup[] = "ab.()[]^$|*+?{},-\\dwsx0123:=!<>/\xc3";
	unsigned long long seed = 99;
	int compiled = 0;
	for (int i = 0; i < 20000; i++) {
		char re[40];
		size_t n = rng(&seed) % sizeof(re);
		for (size_t k = 0; k < n; k++)
			re[k] = soup[rng(&seed) % (sizeof(soup) - 1)];
		struct re_dfa d;
		struct re_error err;
		if (re_compile(re, n, &d, &err)) {
			cr_assert(err.pos <= n && err.len >= 1 && err.msg[0], "%.*s: bad error %zu/%zu '%s'", (int)n, re, err.pos, err.len,
				  err.msg);
			continue;
		}
		compiled++;
		cr_assert(d.nstates >= 1 && d.nstates <= RE_MAX_STATES && d.start < d.nstates && !d.accept[0]);
		for (int s = 0; s < d.nstates * d.nclasses; s++)
			cr_assert_lt(d.next[s], d.nstates);
		for (int b = 0; b < 256; b++)
			cr_assert_lt(d.cls[b], d.nclasses);
		re_free(&d);
	}
	cr_assert_gt(compiled, 100);
}

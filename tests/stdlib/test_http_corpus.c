/* Every case of corpus/http/index.tsv and corpus/smuggling/index.tsv through the parser and
 * the framing helpers. Cases this parser deliberately decides differently are listed in
 * known_deviations.tsv with a kind and a reason; everything else must match, and each listed
 * deviation must behave as its kind claims:
 *   no-host      HTTP/1.1 without Host: refused (400, RFC 9112 3.2); with "Host: h" inserted
 *                after the request line the case must then pass as the corpus says
 *   strict       the corpus accepts, we refuse (an error on request 1)
 *   after-close  the corpus says `reject` for data after a closing request: request 1 is
 *                complete and valid, the bytes after it are refused (error on request 2) */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus.h"
#include "walk.h"

#ifndef L7_DEVIATIONS_FILE
#define L7_DEVIATIONS_FILE "known_deviations.tsv"
#endif

struct devs {
	struct tsv t;
	int *used;
};

static void devs_load(struct devs *d)
{
	cr_assert_eq(tsv_load(L7_DEVIATIONS_FILE, &d->t), 0, "cannot read %s", L7_DEVIATIONS_FILE);
	d->used = calloc((size_t)d->t.nrows + 1, sizeof(int));
}

/* Row of a listed deviation for (corpus, name), or -1. */
static int devs_find(struct devs *d, const char *corpus, const char *name)
{
	for (int i = 0; i < d->t.nrows; i++)
		if (!strcmp(tsv_get(&d->t, i, 0), corpus) && !strcmp(tsv_get(&d->t, i, 1), name))
			return i;
	return -1;
}

static void describe(const struct walk *w, char *out, size_t cap)
{
	int n = snprintf(out, cap, "nreq=%d complete=%d err=%s@%d%s%s%s", w->nreq, w->complete,
			 walk_errname(w->err), w->err_req, w->body_err ? "(body)" : "",
			 w->incomplete ? " incomplete" : "", w->upgraded ? " upgrade" : "");
	for (int i = 0; i < w->nreq && i < WALK_MAX && n > 0 && (size_t)n < cap; i++)
		n += snprintf(out + n, cap - (size_t)n, " | %s %s (%u)", w->req[i].method,
			      w->req[i].target, w->req[i].n_headers);
}

/* Result of one case: 1 pass, 0 fail. `why` says what went wrong. */
static int judge_http(const struct tsv *t, int r, const struct walk *w, char *why, size_t cap)
{
	const char *exp = tsv_get(t, r, 2);
	char target[1024];

	if (!strcmp(exp, "valid")) {
		unescape(tsv_get(t, r, 4), target, sizeof target);
		if (w->err || w->nreq < 1) {
			snprintf(why, cap, "expected valid");
			return 0;
		}
		if (strcmp(w->req[0].method, tsv_get(t, r, 3)) || strcmp(w->req[0].target, target) ||
		    w->req[0].n_headers != (unsigned)atoi(tsv_get(t, r, 5))) {
			snprintf(why, cap, "expected %s %s (%s headers)", tsv_get(t, r, 3), target,
				 tsv_get(t, r, 5));
			return 0;
		}
		return 1;
	}
	if (!strcmp(exp, "invalid")) {
		snprintf(why, cap, "expected an error");
		return w->err != 0;
	}
	if (!strcmp(exp, "incomplete")) {
		snprintf(why, cap, "expected incomplete, no error");
		return !w->err && w->incomplete;
	}
	snprintf(why, cap, "unknown expectation %s", exp);
	return 0;
}

static int judge_smuggling(const struct tsv *t, int r, const struct walk *w, char *why,
			   size_t cap)
{
	const char *exp = tsv_get(t, r, 2);

	if (!strcmp(exp, "reject")) {
		snprintf(why, cap, "expected an error on request 1");
		return w->err && w->err_req == 1;
	}
	if (!strncmp(exp, "reject@", 7)) {
		int n = atoi(exp + 7);
		snprintf(why, cap, "expected requests 1..%d fine, error on request %d", n - 1, n);
		return w->err && w->err_req == n && w->nreq >= n - 1;
	}
	if (!strcmp(exp, "accept")) {
		char list[2048], *save = NULL, *item;
		int i = 0;

		snprintf(list, sizeof list, "%s", tsv_get(t, r, 4));
		snprintf(why, cap, "expected no error and requests: %s", tsv_get(t, r, 4));
		if (w->err)
			return 0;
		for (item = strtok_r(list, "|", &save); item; item = strtok_r(NULL, "|", &save), i++) {
			char m[64], tg[1024];
			while (*item == ' ')
				item++;
			if (sscanf(item, "%63s %1023s", m, tg) != 2 || i >= w->nreq ||
			    strcmp(w->req[i].method, m) || strcmp(w->req[i].target, tg))
				return 0;
		}
		return i == w->nreq;
	}
	snprintf(why, cap, "informational");
	return 1;
}

/* The stream with "Host: h" after every request line: a line that ends in " HTTP/1.1" and has
 * no ':' before its first space (a field line that only looks like one, such as garden-server-39's
 * trailer "X:POST / HTTP/1.1", gets none: a Host trailer would be refused for itself). */
static unsigned char *insert_host(const unsigned char *data, size_t len, size_t *out_len)
{
	static const char host[] = "Host: h\r\n", ver[] = " HTTP/1.1\r\n";
	const size_t vl = sizeof ver - 1, hl = sizeof host - 1;
	unsigned char *o = malloc(len * 2 + hl + 1);
	size_t n = 0, line = 0;

	for (size_t i = 0; i < len; i++) {
		o[n++] = data[i];
		if (i + 1 >= vl && !memcmp(data + i + 1 - vl, ver, vl)) {
			size_t sp = line, colon = line;
			while (sp < i && data[sp] != ' ')
				sp++;
			while (colon < sp && data[colon] != ':')
				colon++;
			if (colon == sp) {
				memcpy(o + n, host, hl);
				n += hl;
			}
		}
		if (data[i] == '\n')
			line = i + 1;
	}
	*out_len = n;
	return o;
}

/* Does the deviation behave as its kind says? */
static int check_deviation(const char *kind, const struct tsv *t, int r, const unsigned char *data,
			   size_t len, const struct walk *w,
			   int (*judge)(const struct tsv *, int, const struct walk *, char *, size_t),
			   char *why, size_t cap)
{
	if (!strcmp(kind, "no-host")) {
		size_t n;
		unsigned char *v = insert_host(data, len, &n);
		struct walk w2;
		int ok;

		walk_stream(v, n, &w2);
		free(v);
		if (w->err != -L7_E_BAD || w->err_req != 1) {
			snprintf(why, cap, "no-host: original not refused as BAD on request 1");
			return 0;
		}
		/* header counts grow by the inserted field */
		for (int i = 0; i < w2.nreq && i < WALK_MAX; i++)
			w2.req[i].n_headers--;
		ok = judge(t, r, &w2, why, cap);
		if (!ok)
			snprintf(why + strlen(why), cap - strlen(why), " (with Host inserted)");
		return ok;
	}
	if (!strcmp(kind, "strict")) {
		snprintf(why, cap, "strict: expected an error on request 1");
		return w->err && w->err_req == 1;
	}
	if (!strcmp(kind, "after-close")) {
		snprintf(why, cap, "after-close: expected request 1 complete, refused after it");
		return w->err == WALK_E_AFTER_CLOSE && w->err_req == 2 && w->complete == 1;
	}
	snprintf(why, cap, "unknown deviation kind %s", kind);
	return 0;
}

static void run_corpus(const char *corpus, const char *index,
		       int (*judge)(const struct tsv *, int, const struct walk *, char *, size_t))
{
	struct tsv t;
	struct devs d;
	int pass = 0, dev = 0, fail = 0, either = 0, stale = 0;

	devs_load(&d);
	cr_assert_eq(tsv_load(index, &t), 0, "cannot read %s/%s (set L7_CORPUS)", corpus_dir(),
		     index);
	for (int r = 0; r < t.nrows; r++) {
		const char *name = tsv_get(&t, r, 0), *file = tsv_get(&t, r, 1);
		char why[512], got[4096];
		size_t len;
		unsigned char *data = corpus_read(file, &len);
		struct walk w;
		int ok, di;

		cr_assert_not_null(data, "missing %s", file);
		walk_stream(data, len, &w);
		ok = judge(&t, r, &w, why, sizeof why);
		describe(&w, got, sizeof got);
		di = devs_find(&d, corpus, name);
		if (!strcmp(tsv_get(&t, r, 2), "either")) {
			either++;
			printf("  either  %-60s %s\n", name, got);
		} else if (ok) {
			pass++;
			if (di >= 0) {
				stale++;
				printf("  STALE deviation (now passes): %s\n", name);
			}
		} else if (di >= 0 && check_deviation(tsv_get(&d.t, di, 2), &t, r, data, len, &w,
						       judge, why, sizeof why)) {
			dev++;
			d.used[di] = 1;
			printf("  deviation %-11s %-52s %s\n", tsv_get(&d.t, di, 2), name, got);
		} else {
			fail++;
			printf("  FAIL %-60s %s; got %s\n", name, why, got);
		}
		free(data);
	}
	printf("%s corpus: %d cases: %d pass, %d known deviations, %d fail, %d informational\n",
	       corpus, t.nrows, pass, dev, fail, either);
	fflush(stdout);
	cr_expect_eq(fail, 0, "%s: %d corpus cases fail", corpus, fail);
	cr_expect_eq(stale, 0, "%s: %d listed deviations now pass: update known_deviations.tsv",
		     corpus, stale);
	tsv_free(&t);
	tsv_free(&d.t);
	free(d.used);
}

Test(corpus, http)
{
	run_corpus("http", "http/index.tsv", judge_http);
}

Test(corpus, smuggling)
{
	run_corpus("smuggling", "smuggling/index.tsv", judge_smuggling);
}

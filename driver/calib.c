/* Reading the verifier calibration (calib.h). */
#include "calib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

/* The shipped tables (driver/calibration/<series>.tsv, embedded by driver/CMakeLists.txt), and the
 * kernel major.minor each is for. */
extern const unsigned char l7_calibration_6_18[];
extern const size_t l7_calibration_6_18_size;
static const struct { const char *series; const unsigned char *text; const size_t *size; } shipped[] = {
	{ "6.18", l7_calibration_6_18, &l7_calibration_6_18_size },
};

/* Parses a table's text into c; returns 0, or -1 (with c->note) if it is not one. */
static int parse(struct calib *c, const char *text, size_t len)
{
	int cap = 64;
	c->rows = malloc(sizeof(*c->rows) * (size_t)cap);
	c->nrows = 0;
	c->release[0] = 0;
	for (size_t at = 0; at < len;) {
		size_t e = at;
		while (e < len && text[e] != '\n')
			e++;
		char line[512];
		size_t n = e - at < sizeof(line) - 1 ? e - at : sizeof(line) - 1;
		memcpy(line, text + at, n);
		line[n] = 0;
		at = e + 1;
		if (!line[0] || line[0] == '#')
			continue;
		struct calib_row r = { 0 };
		char kind[16], key[32];
		if (sscanf(line, "release %63s", c->release) == 1)
			continue;
		if (sscanf(line, "%15s %63s %31s %lf %lf", kind, r.name, key, &r.a, &r.b) < 4 || strlen(kind) != 1 ||
		    !strchr("ecfmp", kind[0])) {
			snprintf(c->note, sizeof(c->note), "%s: not a calibration table (\"%.40s\")", c->path, line);
			return -1;
		}
		r.kind = kind[0];
		r.key = strtoull(key, NULL, 16);
		if (c->nrows == cap)
			c->rows = realloc(c->rows, sizeof(*c->rows) * (size_t)(cap *= 2));
		c->rows[c->nrows++] = r;
	}
	if (!c->release[0]) {
		snprintf(c->note, sizeof(c->note), "%s: no kernel release in it", c->path);
		return -1;
	}
	return 0;
}

static int load_file(struct calib *c, const char *path)
{
	snprintf(c->path, sizeof(c->path), "%s", path);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char *text = NULL;
	size_t len = 0, cap = 0, n;
	char buf[8192];
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		if (len + n > cap)
			text = realloc(text, cap = (len + n) * 2);
		memcpy(text + len, buf, n);
		len += n;
	}
	fclose(f);
	int rc = parse(c, text ? text : "", len);
	free(text);
	return rc;
}

static void drop(struct calib *c)
{
	free(c->rows);
	c->rows = NULL;
	c->nrows = 0;
	c->release[0] = 0;
}

/* The series ("6.18") of a release ("6.18.44-fc-v857"). */
static void series(const char *release, char *out, size_t n)
{
	int dots = 0;
	size_t i = 0;
	for (; release[i] && i + 1 < n; i++) {
		if (release[i] == '.' && ++dots == 2)
			break;
		out[i] = release[i];
	}
	out[i] = 0;
}

static void load(struct calib *c)
{
	struct utsname u;
	snprintf(c->running, sizeof(c->running), "%s", uname(&u) ? "" : u.release);
	c->source = "none";
	const char *env = getenv("L7C_CALIBRATION");
	if (env && !strcmp(env, "none")) {
		snprintf(c->note, sizeof(c->note), "L7C_CALIBRATION=none");
		return;
	}
	if (env) {   /* asked for: used whatever kernel it was measured on */
		if (load_file(c, env)) {
			if (!c->note[0])
				snprintf(c->note, sizeof(c->note), "%s: cannot be read", env);
			drop(c);
			return;
		}
		c->source = "file";
		return;
	}
#ifdef L7C_BUILT_CALIBRATION
	if (!load_file(c, L7C_BUILT_CALIBRATION)) {
		if (!strcmp(c->release, c->running)) {
			c->source = "built";
			return;
		}
		snprintf(c->note, sizeof(c->note), "%s was measured on %s, not the running %s", c->path, c->release,
			 c->running);
	}
	drop(c);
#endif
	char want[32], have[32];
	series(c->running, want, sizeof(want));
	for (size_t i = 0; i < sizeof shipped / sizeof shipped[0]; i++) {
		if (strcmp(shipped[i].series, want))
			continue;
		snprintf(c->path, sizeof(c->path), "(shipped, %s)", shipped[i].series);
		if (parse(c, (const char *)shipped[i].text, *shipped[i].size)) {
			drop(c);
			return;
		}
		series(c->release, have, sizeof(have));
		if (!strcmp(have, want)) {
			c->source = "shipped";
			return;
		}
		drop(c);
	}
	if (!c->note[0])
		snprintf(c->note, sizeof(c->note), "no calibration for kernel %s (shipped: 6.18)", c->running);
	c->path[0] = 0;
}

const struct calib *calib_get(void)
{
	static struct calib c;
	static int loaded;
	if (!loaded) {
		load(&c);
		loaded = 1;
	}
	return &c;
}

size_t calib_kind_len(const char *name)
{
	const char *d = strstr(name, "_decide_");
	return d ? (size_t)(d + 8 - name) : strlen(name);
}

const struct calib_row *calib_find(const struct calib *c, char kind, const char *name, uint64_t key)
{
	size_t n = kind == 'e' ? strlen(name) : calib_kind_len(name);
	for (int i = 0; i < c->nrows; i++)
		if (c->rows[i].kind == kind && !strncmp(c->rows[i].name, name, n) && !c->rows[i].name[n] &&
		    (kind == 'p' || c->rows[i].key == key))
			return &c->rows[i];
	return NULL;
}

const struct calib_row *calib_nearest(const struct calib *c, const char *name, double model)
{
	size_t n = calib_kind_len(name);
	const struct calib_row *best = NULL;
	double d = 0;
	for (int i = 0; i < c->nrows; i++) {
		const struct calib_row *r = &c->rows[i];
		if (r->kind != 'm' || strncmp(r->name, name, n) || r->name[n])
			continue;
		double x = (model > 1 ? model : 1) / (r->a > 1 ? r->a : 1);
		x = x < 1 ? 1 / x : x;
		if (!best || x < d) {
			best = r;
			d = x;
		}
	}
	return best;
}

const char *calib_level_name(enum calib_level l)
{
	static const char *names[] = { "none", "program", "features", "config", "exact" };
	return names[l];
}

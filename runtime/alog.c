/* The access log (--access-log FILE|-): one JSON line per request, from the records the data
 * plane writes at each decision into its version's l7_log ring buffer (stdlib/bpf/alog.h).
 * Each version's buffer is an fd in the event loop (libbpf's ring_buffer epoll fd), drained
 * when it is readable and once more when the version is unloaded. A request whose response
 * comes through the kernel (its record has a seq) is held until the response's record (same
 * conn and seq: status, bytes back, its end's time) and written with it as one line; one held
 * longer than ALOG_HOLD_MS, or past ALOG_HOLD_MAX held, is written with those fields null and
 * counted (access_log_no_response): docs/language.md, *Access log*. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <bpf/libbpf.h>
#include <sys/epoll.h>
#include "l7run.h"

#define ALOG_HOLD_MS  10000   /* a response slower than this is logged without its fields */
#define ALOG_HOLD_MAX 65536   /* requests held at once: past it the oldest goes without */
#define ALOG_BUCKETS  4096

/* requests waiting for their response record: hashed by (conn, seq), listed oldest first */
struct held {
	struct l7_log_rec r;
	uint64_t at_ms;
	struct held *hnext, *prev, *next;
};
struct alog_join {
	struct held *bucket[ALOG_BUCKETS];
	struct held *old, *young;
	unsigned n;
};

static uint64_t mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static struct held **slot_of(struct alog_join *j, uint64_t conn, uint32_t seq)
{
	uint64_t h = (conn ^ (uint64_t)seq * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
	return &j->bucket[(h >> 40) % ALOG_BUCKETS];
}

int alog_open(struct l7run *L, const char *path)
{
	if (L->alog && L->alog != stdout)
		fclose(L->alog);
	L->alog = strcmp(path, "-") ? fopen(path, "a") : stdout;
	if (L->alog)
		setvbuf(L->alog, NULL, _IOLBF, 0);   /* whole lines, as they come */
	return L->alog ? 0 : -1;
}

/* a JSON string of n bytes (escaped: quotes, backslashes, control and non-ASCII bytes) */
static void jstr(FILE *o, const char *s, size_t n)
{
	fputc('"', o);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			fprintf(o, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(o, "\\u%04x", c);
		else
			fputc(c, o);
	}
	fputc('"', o);
}

static void jname(FILE *o, const struct l7m_str *s)
{
	jstr(o, s->s, s->len);
}

/* the copy of a field the record holds: its first `cap` bytes (len is the whole length) */
static void jfield(FILE *o, const char *copy, unsigned len, unsigned cap)
{
	jstr(o, copy, len < cap ? len : cap);
}

static const char *why_text(unsigned why)
{
	static const char *const t[] = { [L7_WHY_POOL_MISS] = "pool miss", [L7_WHY_ORDER] = "response order",
					 [L7_WHY_DENY] = "deny", [L7_WHY_BEHIND] = "behind l7run",
					 [L7_WHY_BAD] = "malformed", [L7_WHY_UNSUPPORTED] = "framing l7run does",
					 [L7_WHY_NO_FALLBACK] = "fallback" };
	return why < sizeof t / sizeof t[0] && t[why] ? t[why] : "?";
}

/* the class of a refusal by the status the parser chose (l7_http_error_status; 503: a split
 * program's chain broke): a sentence, or (code) the "error" field's name */
static const char *refusal_text(unsigned status, int code)
{
	switch (status) {
	case 414: return code ? "uri_too_long" : "request-target too long";
	case 431: return code ? "head_too_large" : "request head too large";
	case 501: return code ? "not_implemented" : "a transfer coding not implemented";
	case 503: return code ? "chain_failed" : "a split program's tail call failed";
	default:  return code ? "bad_request" : "malformed request";
	}
}

/* why a JWT check failed: -enum l7_jwt_res (stdlib/bpf/jwt.h), as its comments say */
static const char *jwt_text(unsigned err)
{
	static const char *const t[] = {
		[1] = "missing", [2] = "not a bearer token", [3] = "empty or too long", [4] = "malformed",
		[5] = "bad base64url", [6] = "bad JSON", [7] = "algorithm not allowed", [8] = "no key",
		[9] = "bad signature", [10] = "no expiry", [11] = "expired", [12] = "not yet valid",
		[13] = "wrong issuer", [14] = "wrong audience", [15] = "internal",
	};
	return err < sizeof t / sizeof t[0] && t[err] ? t[err] : "invalid";
}

/* request r's line, with its response's record (NULL: none came) */
static void write_line(struct version *v, const struct l7_log_rec *r, const struct l7_log_resp *rs)
{
	const struct manifest *mf = v->cfg.mf;
	FILE *o = v->log_out;

	/* the record's monotonic time as wall time */
	struct timespec mono, real;
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &real);
	long long ns = (long long)real.tv_sec * 1000000000ll + real.tv_nsec -
		       ((long long)mono.tv_sec * 1000000000ll + mono.tv_nsec - (long long)r->ts_ns);
	time_t sec = (time_t)(ns / 1000000000ll);
	struct tm tm;
	gmtime_r(&sec, &tm);
	char when[64], ip[INET_ADDRSTRLEN];
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
	struct in_addr a = { r->src_ip4 };
	inet_ntop(AF_INET, &a, ip, sizeof ip);

	fprintf(o, "{\"time\":\"%s.%03lldZ\",\"mode\":\"%s\",\"client\":\"%s\",\"client_port\":", when,
		(ns / 1000000) % 1000, r->mode == L7_LOG_MESH ? "mesh" : "gateway", ip);
	if (r->src_port)
		fprintf(o, "%u", r->src_port);
	else
		fputs("null", o);
	fputs(",\"identity\":", o);
	if (r->caller < mf->n_identity)
		jname(o, &mf->identity[r->caller].name);
	else
		fputs("\"external\"", o);
	fputs(",\"service\":", o);
	if (r->service < mf->n_service)
		jname(o, &mf->service[r->service].name);
	else
		fputs("null", o);
	/* a request the parser refused: its head was not understood, so no field of it is known */
	int refused = r->verdict == L7_DENY && r->why == L7_WHY_BAD;
	if (refused) {
		fputs(",\"method\":null,\"target\":null,\"target_cut\":false,\"host\":null,\"protocol\":null", o);
	} else {
		fputs(",\"method\":", o);
		jfield(o, r->method, r->method_len, L7_LOG_METHOD);
		fputs(",\"target\":", o);
		jfield(o, r->target, r->target_len, L7_LOG_PATH);
		fprintf(o, ",\"target_cut\":%s,\"host\":", r->target_len > L7_LOG_PATH ? "true" : "false");
		jfield(o, r->host, r->host_len, L7_LOG_HOST);
		fprintf(o, ",\"protocol\":\"%s\"", r->flags & L7_REQ_HTTP2 ? "HTTP/2" : r->flags & L7_REQ_HTTP10 ? "HTTP/1.0" : "HTTP/1.1");
	}

	/* the decision, and who carries it out */
	const char *decision = refused ? "refused" : r->verdict == L7_DENY ? "deny" : r->verdict == L7_FALLBACK ? "slow path"
			       : r->audit ? "audit" : r->verdict == L7_FORWARD ? "allow" : "?";
	const char *by = r->verdict == L7_FALLBACK ? "fallback proxy" : r->verdict == L7_DENY || r->why ? "l7run" : "kernel";
	fprintf(o, ",\"decision\":\"%s\",\"by\":\"%s\",\"rule\":%u,\"line\":", decision, by, r->rule);
	if (r->rule && r->rule < v->n_rule_line && v->rule_line[r->rule])
		fprintf(o, "%u", v->rule_line[r->rule]);
	else
		fputs("null", o);
	if (r->audit) {
		unsigned ar = r->audit - 1;
		fprintf(o, ",\"audit_rule\":%u,\"audit_line\":", ar);
		if (ar && ar < v->n_rule_line && v->rule_line[ar])
			fprintf(o, "%u", v->rule_line[ar]);
		else
			fputs("null", o);   /* rule 0: an ALLOW policy's 403 under --audit */
	}
	fputs(",\"upstream\":", o);
	if (r->verdict != L7_DENY && r->upstream < L7_MAX_UPSTREAMS && v->cfg.upstream[r->upstream].set) {
		const struct cfg_endpoint *e = &v->cfg.upstream[r->upstream];
		char eip[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &e->addr.sin_addr, eip, sizeof eip);
		jstr(o, e->name, strlen(e->name));
		fprintf(o, ",\"endpoint\":\"%s:%u\"", eip, ntohs(e->addr.sin_port));
	} else {
		fputs("null,\"endpoint\":null", o);
	}
	fputs(",\"status\":", o);
	if (r->verdict == L7_DENY)
		fprintf(o, "%u", r->status);
	else if (rs)
		fprintf(o, "%u", rs->status);
	else
		fputs("null", o);
	/* why: a deny's rule (or the default), l7run's reason to take a request */
	fputs(",\"why\":", o);
	if (refused)
		fprintf(o, "\"%s\",\"error\":\"%s\"", refusal_text(r->status, 0), refusal_text(r->status, 1));
	else if (r->verdict == L7_DENY && r->rule)
		fprintf(o, "\"rule %u (line %u)\"", r->rule, r->rule < v->n_rule_line ? v->rule_line[r->rule] : 0);
	else if (r->verdict == L7_DENY && r->status == 404)
		fputs("\"no policy routes it\"", o);
	else if (r->verdict == L7_DENY)
		fputs("\"an ALLOW policy applied and none of its rules allowed it\"", o);
	else if (r->why)
		fprintf(o, "\"%s\"", why_text(r->why));
	else
		fputs("null", o);
	if (r->verdict == L7_DENY && !refused && r->jwt_err)   /* the last JWT check that failed */
		fprintf(o, ",\"jwt\":\"%s\"", jwt_text(r->jwt_err));
	if (refused)
		fputs(",\"bytes_in\":null,\"body_chunked\":false", o);
	else
		fprintf(o, ",\"bytes_in\":%u,\"body_chunked\":%s", r->head_len + r->body_len, r->flags & L7_REQ_CHUNKED ? "true" : "false");
	if (rs)   /* kernel clocks at the decision and at the response's last byte */
		fprintf(o, ",\"bytes_out\":%llu,\"duration_ms\":%.3f", (unsigned long long)rs->bytes,
			rs->ts_ns > r->ts_ns ? (double)(rs->ts_ns - r->ts_ns) / 1e6 : 0.0);
	else
		fputs(",\"bytes_out\":null,\"duration_ms\":null", o);
	if (rs && rs->grpc_status)   /* an HTTP/2 gRPC call's, from its trailers */
		fprintf(o, ",\"grpc_status\":%u", rs->grpc_status - 1);
	if (r->flags & L7_REQ_HTTP2)   /* (seq: the stream's id) */
		fprintf(o, ",\"stream\":%u", r->seq);
	fprintf(o, ",\"conn\":\"%016llx\"}\n", (unsigned long long)r->conn);
}

static void unhold(struct alog_join *j, struct held *h, struct held **at)
{
	*at = h->hnext;
	if (h->prev)
		h->prev->next = h->next;
	else
		j->old = h->next;
	if (h->next)
		h->next->prev = h->prev;
	else
		j->young = h->prev;
	j->n--;
}

/* the oldest held request written without its response, counted */
static void give_up_oldest(struct version *v)
{
	struct alog_join *j = v->log_join;
	struct held *h = j->old, **at = slot_of(j, h->r.conn, h->r.seq);

	while (*at != h)
		at = &(*at)->hnext;
	unhold(j, h, at);
	write_line(v, &h->r, NULL);
	stat_bump(v->stats, L7_STAT_LOG_NO_RESPONSE);
	free(h);
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct version *v = ctx;
	struct alog_join *j = v->log_join;

	if (!v->log_out)
		return 0;
	if (size == sizeof(struct l7_log_resp)) {
		const struct l7_log_resp *rs = data;
		struct held **at = j ? slot_of(j, rs->conn, rs->seq) : NULL;
		for (; at && *at; at = &(*at)->hnext)
			if ((*at)->r.conn == rs->conn && (*at)->r.seq == rs->seq) {
				struct held *h = *at;
				unhold(j, h, at);
				write_line(v, &h->r, rs);
				free(h);
				break;
			}
		return 0;   /* not found: its request was sampled out, NoLog or its record lost */
	}
	if (size < sizeof(struct l7_log_rec))
		return 0;
	const struct l7_log_rec *r = data;
	/* mesh numbers every request: only a forward's response comes through the kernel */
	int waits = r->seq && (r->verdict == L7_FORWARD || r->verdict == L7_FALLBACK) && r->why != L7_WHY_BAD;
	struct held *h = waits && j ? malloc(sizeof *h) : NULL;
	if (!h) {
		write_line(v, r, NULL);
		return 0;
	}
	if (j->n >= ALOG_HOLD_MAX)
		give_up_oldest(v);
	h->r = *r;
	h->at_ms = mono_ms();
	struct held **at = slot_of(j, r->conn, r->seq);
	h->hnext = *at;
	*at = h;
	h->prev = j->young;
	h->next = NULL;
	if (j->young)
		j->young->next = h;
	else
		j->old = h;
	j->young = h;
	j->n++;
	return 0;
}

void alog_response(struct version *v, const struct l7_log_resp *rs)
{
	if (!v->log_rb)
		return;
	ring_buffer__consume(v->log_rb);   /* its request's record first, if not read yet */
	on_record(v, (void *)rs, sizeof *rs);
}

void alog_tick(struct l7run *L)
{
	uint64_t now = mono_ms();

	for (struct version *v = L->cur; v; v = v->older)
		while (v->log_join && v->log_join->old && now - v->log_join->old->at_ms >= ALOG_HOLD_MS)
			give_up_oldest(v);
}

static void on_ready(struct l7run *L, struct io *io, uint32_t events)
{
	struct version *v = (struct version *)((char *)io - offsetof(struct version, log_io));
	(void)L, (void)events;
	ring_buffer__consume(v->log_rb);
}

int alog_version_open(struct l7run *L, struct version *v, char *err, size_t errlen)
{
	if (!L->alog)
		return 0;
	const struct manifest *mf = v->cfg.mf;
	uint32_t n = 1;
	for (uint32_t i = 0; i < mf->n_rule; i++)
		if (mf->rule[i].id + 1 > n)
			n = mf->rule[i].id + 1;
	v->rule_line = calloc(n, sizeof *v->rule_line);
	v->n_rule_line = v->rule_line ? n : 0;
	for (uint32_t i = 0; v->rule_line && i < mf->n_rule; i++)
		if (!v->rule_line[mf->rule[i].id])   /* a table's group rule: its first entry's line */
			v->rule_line[mf->rule[i].id] = (uint16_t)(mf->rule[i].line > 65535 ? 65535 : mf->rule[i].line);
	int fd = bpf_object__find_map_fd_by_name(v->obj, "l7_log");
	v->log_out = L->alog;
	v->log_join = calloc(1, sizeof *v->log_join);
	v->log_rb = fd >= 0 ? ring_buffer__new(fd, on_record, v, NULL) : NULL;
	if (!v->log_rb) {
		snprintf(err, errlen, "--access-log: cannot read the l7_log ring buffer: %s",
			 fd < 0 ? "no such map (an older l7c's object?)" : strerror(errno));
		return -1;
	}
	return 0;
}

void alog_version_watch(struct l7run *L, struct version *v)
{
	if (v->log_rb) {
		v->log_io.ready = on_ready;
		loop_watch(L, ring_buffer__epoll_fd(v->log_rb), &v->log_io, EPOLLIN);
	}
}

void alog_version_close(struct l7run *L, struct version *v)
{
	if (v->log_rb) {
		ring_buffer__consume(v->log_rb);
		if (v->log_io.ready)
			loop_unwatch(L, ring_buffer__epoll_fd(v->log_rb));
		ring_buffer__free(v->log_rb);
		v->log_rb = NULL;
	}
	while (v->log_join && v->log_join->old)
		give_up_oldest(v);   /* the version's responses can no longer come */
	free(v->log_join);
	v->log_join = NULL;
	free(v->rule_line);
	v->rule_line = NULL;
}

/* Building blocks the generated policy calls (codegen/policy.c): comparisons of a field of the
 * header vector with a constant, the caller's identity, counters, token buckets and the choice
 * of an endpoint of an upstream set. Compiled to BPF bitcode, linked into every policy and
 * inlined. (codegen/policy.c emits the string compares already unrolled, with the semantics of
 * l7_field_* and l7_claim_* here.)
 *
 * Spans always lie inside their buffer (off + len <= head_len <= L7_MAX_HEAD for buf, and
 * <= L7_JWT_JSON for jwt_json), so masking an index never changes it; the mask is what proves
 * it to the verifier. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "balance.h"
#include "compat.h"
#include "l7/abi.h"
#include "l7/dataplane.h"
#include "xxhash.h"

/* Non-static so the definitions survive into the bitcode; l7c internalises them after linking. */
#define L7_INLINE __attribute__((always_inline))

#define HEAD_MASK (L7_MAX_HEAD - 1)
#define JSON_MASK (L7_JWT_JSON - 1)

extern struct { void *type, *max_entries, *key, *value; } l7_counters, l7_buckets, l7_idents, l7_cidrs,
	l7_counter_values, l7_timers, l7_config;
extern const __u32 l7_n_identities;

/* Compares with a constant. codegen unrolls the short ones itself (~3 instructions a byte, no
 * call) and calls l7_field_* for the others: every unrolled byte is walked by the verifier on
 * every path through the policy (4 rules on 3,000-byte values took the mesh program past the 1M
 * limit), one bpf_strncmp call is a constant cost whatever the length. Where the line lies is
 * codegen's choice (codegen_split.unroll_max). Request fields hold no NUL (the parser refuses
 * it), so strncmp == 0 means equal; the constant is NUL-terminated in .rodata (codegen's
 * cg_string). JWT claims may hold an escaped NUL (\u0000), so they always compare byte by byte
 * (by_call 0). */
L7_INLINE int l7_bytes_at(const __u8 *buf, __u32 mask, __u32 off, const char *s, __u32 n, int by_call)
{
	if (by_call) {
		off &= mask;
		if (n > mask + 1 || off > mask + 1 - n)
			return 0;   /* cannot be: spans lie inside their buffer */
		return bpf_strncmp((const char *)&buf[off], n, s) == 0;
	}
	for (__u32 i = 0; i < n && i < L7_MAX_HEAD; i++)
		if (buf[(off + i) & mask] != (__u8)s[i])
			return 0;
	return 1;
}

/* field == s */
L7_INLINE int l7_field_equals(const struct l7_req *req, const struct l7_span *f, const char *s, __u32 n)
{
	return f->len == n && l7_bytes_at(req->buf, HEAD_MASK, f->off, s, n, 1);
}

/* field starts with s */
L7_INLINE int l7_field_prefix(const struct l7_req *req, const struct l7_span *f, const char *s, __u32 n)
{
	return f->len >= n && l7_bytes_at(req->buf, HEAD_MASK, f->off, s, n, 1);
}

/* claim i (of a token l7_jwt_check found valid) == s */
L7_INLINE int l7_claim_equals(const struct l7_req *req, __u32 i, const char *s, __u32 n)
{
	const struct l7_span *f = &req->claim[i & (L7_MAX_CLAIMS - 1)];
	return f->len == n && l7_bytes_at(req->jwt_json, JSON_MASK, f->off, s, n, 0);
}

L7_INLINE int l7_claim_prefix(const struct l7_req *req, __u32 i, const char *s, __u32 n)
{
	const struct l7_span *f = &req->claim[i & (L7_MAX_CLAIMS - 1)];
	return f->len >= n && l7_bytes_at(req->jwt_json, JSON_MASK, f->off, s, n, 0);
}

/* The caller: the identity of the longest prefix holding the client address in l7_idents
 * (kept current by l7run, as Meshlib's IP cache), l7_n_identities ("external") if none. */
L7_INLINE __u32 l7_identity_of(const struct l7_req *req)
{
	struct l7_ident_key k = { 32, req->src_ip4 };
	__u32 *id = bpf_map_lookup_elem(&l7_idents, &k);
	return id && *id < l7_n_identities ? *id : l7_n_identities;
}

/* The client address is in prefix set `set` (ir/passes/sets.c). */
L7_INLINE int l7_source_in_set(const struct l7_req *req, __u32 set)
{
	struct l7_cidr_key k = { 64, __builtin_bswap32(set), req->src_ip4 };
	return bpf_map_lookup_elem(&l7_cidrs, &k) != 0;
}

L7_INLINE void l7_count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&l7_counters, &idx);
	if (v)
		*v += 1;   /* per-CPU: no atomics needed */
}

/* A deny not enforced (Audit(request), or any Deny under l7run --audit): the rule's audit
 * counter, and the decision says so (the access log). Returns 1. */
L7_INLINE int l7_audit_mark(struct l7_decision *d, __u32 rule)
{
	if (rule < L7_MAX_COUNTERS)
		l7_count(L7_AUDIT_COUNTER(rule));
	d->audit = rule + 1;
	return 1;
}

/* At a Deny: 1 (and audited) when l7run runs the object with --audit, 0 to deny. */
L7_INLINE int l7_audit_deny(struct l7_decision *d, __u32 rule)
{
	__u32 k = 0;
	struct l7_config *cfg = bpf_map_lookup_elem(&l7_config, &k);
	return cfg && (cfg->flags & L7_CFG_AUDIT) ? l7_audit_mark(d, rule) : 0;
}

/* Counter values that conditions read: shared by all CPUs (atomic), unlike the per-CPU
 * telemetry totals above; Reset zeroes the value, never the total. */
L7_INLINE void l7_counter_add(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&l7_counter_values, &idx);
	if (v)
		__sync_fetch_and_add(v, 1);
}

L7_INLINE void l7_counter_reset(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&l7_counter_values, &idx);
	if (v)
		__sync_lock_test_and_set(v, 0);
}

/* The value, saturated to 32 bits (policies compare it with int constants). */
L7_INLINE __u32 l7_counter_value(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&l7_counter_values, &idx);
	__u64 n = v ? *v : 0;
	return n > 0xffffffffull ? 0xffffffffu : (__u32)n;
}

/* Timers hold their start in bpf_ktime_get_ns() time (CLOCK_MONOTONIC); l7run starts them
 * when it loads the policy. */
L7_INLINE int l7_timer_elapsed(__u32 idx, __u32 seconds)
{
	__u64 *t = bpf_map_lookup_elem(&l7_timers, &idx);
	return t && bpf_ktime_get_ns() - *t >= (__u64)seconds * 1000000000ull;
}

L7_INLINE void l7_timer_restart(__u32 idx)
{
	__u64 *t = bpf_map_lookup_elem(&l7_timers, &idx);
	if (t)
		*t = bpf_ktime_get_ns();
}

/* Takes a token from the bucket of key k, refilled at `rate` per second up to `burst`. 1: taken,
 * 0: empty. Two CPUs updating one key at once may both take the last token: the limit is
 * exact per CPU, approximate across them. */
static __always_inline int l7_bucket_take_key(const struct l7_bucket_key *k, __u32 rate, __u32 burst)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 cap = (__u64)burst * 1000;
	struct l7_bucket *b = bpf_map_lookup_elem(&l7_buckets, k);
	if (!b) {
		struct l7_bucket fresh = { .milli_tokens = cap - 1000, .last_ns = now };
		bpf_map_update_elem(&l7_buckets, k, &fresh, BPF_NOEXIST);
		return 1;
	}
	__u64 elapsed = now > b->last_ns ? now - b->last_ns : 0;
	if (elapsed > 1000000000ull * 3600)
		elapsed = 1000000000ull * 3600;   /* keeps the product below in 64 bits */
	__u64 tokens = b->milli_tokens + elapsed * rate / 1000000;
	if (tokens > cap)
		tokens = cap;
	b->last_ns = now;
	if (tokens < 1000) {
		b->milli_tokens = tokens;
		return 0;
	}
	b->milli_tokens = tokens - 1000;
	return 1;
}

/* Limit(bucket, key) for a key that is a span of the head, or none (one bucket for all). */
L7_INLINE int l7_bucket_take(const struct l7_req *req, __u32 bucket, const struct l7_span *key, __u32 rate, __u32 burst)
{
	struct l7_bucket_key k = { .bucket = bucket };
	if (key)
		k.key_hash = l7_xxh64(req->buf, key->off, key->len, bucket) | 1;
	return l7_bucket_take_key(&k, rate, burst);
}

/* Limit(bucket, request.source): one bucket per client address (l7_bucket_key says how). */
L7_INLINE int l7_bucket_take_source(const struct l7_req *req, __u32 bucket, __u32 rate, __u32 burst)
{
	struct l7_bucket_key k = { .bucket = bucket, .key_hash = (__u64)req->src_ip4 << 32 | 2 };
	return l7_bucket_take_key(&k, rate, burst);
}

/* (method, path) in rule table `table`: up to four lookups, those `lookups` says can match
 * (1 exact any-method, 2 exact this method, 4 prefix any-method, 8 prefix this method). The
 * two keys take 152 bytes of stack. */
extern struct { void *type, *max_entries, *key, *value; } l7_exact;
extern struct { void *type, *max_entries, *key, *value, *map_flags; } l7_prefix;

struct l7_table_keys {
	struct l7_table_key exact;
	struct l7_prefix_key prefix;
};

extern struct { void *type, *max_entries, *key, *value; } l7_entry_hits;

/* One more request decided by the table rule l7_table_match answered `value` for. */
L7_INLINE void l7_table_hit(__u32 value)
{
	__u32 pos = value >> 8;
	__u64 *n = bpf_map_lookup_elem(&l7_entry_hits, &pos);
	if (n)
		__sync_fetch_and_add(n, 1);
}

/* The smallest value of the lookups that find an entry (L7_TABLE_VALUE: the first matching
 * rule of the run, its group in the low byte), 0 when none does. */
static __always_inline __u32 l7_table_min(__u32 best, const __u32 *v)
{
	return v && (!best || *v < best) ? *v : best;
}

L7_INLINE __u32 l7_table_match(const struct l7_req *req, const struct l7_span *field, __u32 table, __u32 lookups)
{
	struct l7_table_keys k;
	__u32 len = field->len, off = field->off, best = 0;
	__u32 n = len < L7_TABLE_PATH ? len : L7_TABLE_PATH;
	__builtin_memset(&k, 0, sizeof(k));
	for (__u32 i = 0; i < L7_TABLE_PATH; i++) {
		if (i >= n)
			break;
		k.exact.path[i] = req->buf[(off + i) & HEAD_MASK];
	}
	__builtin_memcpy(k.prefix.path, k.exact.path, L7_TABLE_PATH);
	k.exact.table = table;
	k.exact.len = len;
	k.prefix.table = __builtin_bswap32(table);
	k.prefix.prefixlen = 64 + 8 * n;
	if (len <= L7_TABLE_PATH) {
		if (lookups & 1)
			best = l7_table_min(best, bpf_map_lookup_elem(&l7_exact, &k.exact));
		k.exact.method = req->method;
		if ((lookups & 2) && req->method)
			best = l7_table_min(best, bpf_map_lookup_elem(&l7_exact, &k.exact));
	}
	if (lookups & 4)
		best = l7_table_min(best, bpf_map_lookup_elem(&l7_prefix, &k.prefix));
	k.prefix.method = __builtin_bswap32(req->method);
	if ((lookups & 8) && req->method)
		best = l7_table_min(best, bpf_map_lookup_elem(&l7_prefix, &k.prefix));
	return best;
}

/* Backend slots l7run has taken out of a set compiled into the object (passive health: a
 * refused connect or a reset with a response owed; active `health` checks): bit s of
 * l7_lb_down[0] is slot s (runtime/endpoints.c writes it). A pick that lands on a down slot
 * walks on to the next point of the ring (the next turn) whose slot is up, so only the down
 * endpoint's keys move; past L7_LB_WALK points of down slots (or when all are down) it keeps
 * its pick, and l7run's connect retry takes over. 16 leaves a key on a down endpoint with
 * probability share^16 (a third of the ring down: 2e-8). */
extern struct { void *type, *max_entries, *key, *value; } l7_lb_down;
#define L7_LB_WALK 16
_Static_assert(L7_MAX_UPSTREAMS <= 32, "l7_lb_down: a bit per backend slot");

L7_INLINE __u32 l7_lb_down_mask(void)
{
	__u32 k = 0, *m = bpf_map_lookup_elem(&l7_lb_down, &k);

	return m ? *m : 0;
}

/* The backend slot a Ketama ring (balance.h) gives this request: the key is a span of the head
 * (path, Host, a wanted header; absent = empty) or, without one, the client's address. ring
 * and slots are the set's constant tables, 1 << log2n entries each. */
L7_INLINE __u32 l7_lb_pick_hash(const struct l7_req *req, const struct l7_span *key, const __u32 *ring,
				const __u8 *slots, __u32 log2n)
{
	__u32 h = key ? l7_lb_hash(req->buf, key->off, key->len) : l7_lb_hash_addr(req->src_ip4);
	__u32 mask = (1u << (log2n & 31)) - 1, i = l7_ketama_find(ring, log2n, h), pick = slots[i];
	__u32 down = l7_lb_down_mask();

	if (!((down >> (pick & 31)) & 1))
		return pick;
	for (__u32 k = 0; k < L7_LB_WALK; k++) {
		i = (i + 1) & mask;
		if (ring[i] == 0xffffffffu)
			i = 0;   /* the padding: past the last point the ring wraps to its first */
		__u32 s = slots[i];
		if (!((down >> (s & 31)) & 1))
			return s;
	}
	return pick;
}

/* Weighted round robin: turn t of upstream `set` is turns[t % n] (smooth weighted order, built
 * by ir/balance.c). One counter per set shared by all CPUs, taken with an atomic add: every
 * request gets its own turn; a down slot's turn goes to the next turn's slot that is up. */
extern struct { void *type, *max_entries, *key, *value; } l7_lb_rr;

L7_INLINE __u32 l7_lb_pick_rr(__u32 set, const __u8 *turns, __u32 n)
{
	__u64 *c = bpf_map_lookup_elem(&l7_lb_rr, &set);
	__u64 t = c ? __sync_fetch_and_add(c, 1) : 0;
	__u32 i = (__u32)(t % n);

	l7_barrier_var(i);   /* keep the bound below: the verifier does not follow the modulo */
	if (i >= n)
		i = 0;
	__u32 pick = turns[i], down = l7_lb_down_mask();
	if (!((down >> (pick & 31)) & 1))
		return pick;
	for (__u32 k = 0; k < L7_LB_WALK; k++) {
		if (++i >= n)
			i = 0;
		__u32 s = turns[i];
		if (!((down >> (s & 31)) & 1))
			return s;
	}
	return pick;
}

/* A run-time upstream set (l7/dataplane.h struct l7_lb_tab): the same choices over the table
 * l7run keeps, the half l7_lb_gen names. L7_NO_SLOT when the set has no endpoint (the policy
 * answers 503), counted as no_endpoint. hash is a constant at each call site. */
extern struct { void *type, *max_entries, *key, *value; } l7_lb_tab, l7_lb_gen, l7_stats;

L7_INLINE __u32 l7_lb_pick_rt(const struct l7_req *req, const struct l7_span *key, __u32 set, __u32 rt, __u32 hash)
{
	__u32 *gen = bpf_map_lookup_elem(&l7_lb_gen, &rt);
	__u32 k = 2 * rt + (gen ? *gen & 1 : 0);
	const struct l7_lb_tab *t = bpf_map_lookup_elem(&l7_lb_tab, &k);
	__u32 n = t ? (hash ? t->npoints : t->nturns) : 0;

	if (!t || !n || n > (hash ? L7_LB_DRING - 1 : L7_LB_TURNS)) {
		__u32 idx = L7_STAT_NO_ENDPOINT;
		__u64 *v = bpf_map_lookup_elem(&l7_stats, &idx);
		if (v)
			*v += 1;
		return L7_NO_SLOT;
	}
	if (hash) {
		__u32 h = key ? l7_lb_hash(req->buf, key->off, key->len) : l7_lb_hash_addr(req->src_ip4);
		return t->ring_slot[l7_ketama_find(t->ring, L7_LB_DRING_LOG2, h)];
	}
	__u64 *c = bpf_map_lookup_elem(&l7_lb_rr, &set);
	__u64 turn = c ? __sync_fetch_and_add(c, 1) : 0;
	__u32 i = (__u32)(turn % n);

	l7_barrier_var(i);
	if (i >= L7_LB_TURNS)
		i = 0;
	return t->turns[i];
}

/* matches(field, regex): the DFA of desc run over the field's bytes, the whole value (see
 * struct l7_re_desc). Each bpf_loop callback reads L7_RE_CHUNK bytes, unrolled: the
 * callback is verified once per call site (not per byte), and the per-call cost (~6.5 ns,
 * platform.md) is paid once per chunk, not per byte. The loop stops in the dead state. The
 * context keeps 8-byte fields: the verifier tracks constants the call site stores (the masks)
 * only in whole stack slots, and needs them to bound the indices. */
#define L7_RE_CHUNK 16   /* = the steps written out in l7_re_cb */

struct l7_re_run {
	const __u8 *buf;
	const struct l7_re_desc *re;
	__u64 off, len;        /* the field's span */
	__u64 buf_mask;        /* of buf: every read is masked */
	__u64 next_mask;       /* of re->next */
	__u64 state;
};

L7_LOOP_CB(l7_re_cb)
{
	struct l7_re_run *r = l7_ctx;
	__u32 at = (__u32)l7_idx * L7_RE_CHUNK, left = (__u32)r->len - at;
	__u32 nm = (__u32)r->next_mask, s = (__u32)r->state;
	/* one masked base per chunk, then constant offsets: the buffers have L7_BUF_SLACK bytes
	 * after the masked range */
	const __u8 *p = r->buf + (((__u32)r->off + at) & (__u32)r->buf_mask);
	const __u8 *cls = r->re->cls;
	const __u16 *next = r->re->next;
	/* unrolled by hand: clang folds the two exits into a runtime trip count and then will
	 * not unroll the loop */
#define L7_RE_STEP(k)                                  \
	if ((k) >= left)                               \
		goto done;                             \
	s = next[(s + cls[p[k]]) & nm];                \
	if (!s)                                        \
		goto done;
#define L7_RE_STEP4(k) L7_RE_STEP(k) L7_RE_STEP(k + 1) L7_RE_STEP(k + 2) L7_RE_STEP(k + 3)
	L7_RE_STEP4(0) L7_RE_STEP4(4) L7_RE_STEP4(8) L7_RE_STEP4(12)
#undef L7_RE_STEP4
#undef L7_RE_STEP
done:
	r->state = s;
	return s == 0;
}

L7_INLINE int l7_regex_match(const struct l7_req *req, const struct l7_span *f, __u32 in_json, const struct l7_re_desc *re)
{
	struct l7_re_run r;
	__u32 len = f->len, cap = in_json ? L7_JWT_JSON : L7_MAX_HEAD;
	if (len > cap)
		len = cap;   /* the field's limit: a path is at most the head */
	r.buf = in_json ? req->jwt_json : req->buf;
	r.buf_mask = in_json ? JSON_MASK : HEAD_MASK;
	r.re = re;
	r.off = f->off;
	r.len = len;
	r.next_mask = re->next_mask;
	r.state = re->start;
	l7_loop((len + L7_RE_CHUNK - 1) / L7_RE_CHUNK, l7_re_cb, &r);
	return r.state >= re->accept_lo;
}

/* Header mutations, in the order the policy reaches them (see struct l7_decision). The
 * request's and the response's lists are alike; `response` is a constant after inlining. */

/* SET or REMOVE of a name: the sender's lines of it go (bit of d->del / d->rdel), and so do
 * lines added for it before (`same`: the l7_mut_* lines of this name, as a bit mask; 0 when
 * the compiler saw that no line of the name can have been added before). */
L7_INLINE void l7_mut_drop(struct l7_decision *d, __u32 response, __u64 same, __u32 bit)
{
	__u8 *set = response ? d->rset : d->set;
	__u32 n = response ? d->n_rset : d->n_set, k = 0;

	if (response)
		d->rdel |= bit;
	else
		d->del |= bit;
	if (!same)
		return;
	for (__u32 i = 0; i < L7_MAX_SET; i++) {
		if (i >= n)
			break;
		__u8 m = set[i];
		if (!(same >> (m & 63) & 1))
			set[k++ & (L7_MAX_SET - 1)] = m;
	}
	if (response)
		d->n_rset = k;
	else
		d->n_set = k;
}

/* SET or ADD: one more line (l7_mut_* index m). ir_lower bounds how many one request can
 * collect by L7_MAX_SET, so the check never refuses one. */
L7_INLINE void l7_mut_add(struct l7_decision *d, __u32 response, __u32 m)
{
	__u32 n = response ? d->n_rset : d->n_set;

	if (n >= L7_MAX_SET)
		return;
	/* n < 8 and d on the stack, 8-aligned: LLVM would turn &d->set[n] into an OR of the
	 * stack pointer, which the verifier refuses ("bitwise operator |= on pointer") */
	l7_barrier_var(n);
	if (response) {
		d->rset[n] = (__u8)m;
		d->n_rset = n + 1;
	} else {
		d->set[n] = (__u8)m;
		d->n_set = n + 1;
	}
}

/* policy.h: a compiled policy object, from its file to a loaded, filled bpf_object, in either
 * mode: read the object and its manifest (load.c, manifest.c), load its programs, fill what they read
 * before the first request (JWT keys and clock: jwt.c; caller identities: identities.c; rule
 * tables: tables.c; tail-call chains: tails.c), after asking the kernel what it can do
 * (probe.c). Nothing here knows about connections, the event loop or the mode's runtime; what
 * persists across loads is in struct policy_env, which the caller owns. */
#ifndef L7RUN_POLICY_H
#define L7RUN_POLICY_H

#include <netinet/in.h>
#include <stdint.h>
#include <time.h>
#include <bpf/libbpf.h>
#include "l7/dataplane.h"
#include "base.h"
#include "manifest.h"
#include "probe.h"

#define MAX_SERVICES 16

struct cfg_endpoint {
	char name[L7M_NAME_MAX + 8];   /* an endpoint of a set: NAME#i */
	struct sockaddr_in addr;
	int set;
	int draining;            /* a run-time slot whose endpoint left its set (endpoints.c): its
				  * connections finish, none is opened */
	int pooled;              /* the pool's connections to it that the data plane can use (pool.c) */
	uint64_t retries;        /* requests sent to another endpoint after a connect here failed */
};

/* A version's configuration as run: its manifest with the command line's overrides. */
struct config {
	struct manifest *mf;     /* the object's manifest (owned): JWTs, tables, names, ... */
	char policy[L7M_NAME_MAX + 1];   /* the last policy's name, for the log */
	struct cfg_endpoint service[MAX_SERVICES];
	int n_services;
	struct cfg_endpoint upstream[L7_MAX_UPSTREAMS];
	int fallback;            /* upstream index, -1 = none */
	struct idents *idents;   /* its caller identities (identities.c), NULL if none */
	struct rtsets *rt;       /* its upstreams with run-time endpoints (endpoints.c), NULL if none */
	int resp_mut;            /* rules mutate responses (mesh mode: l7_mesh_rmut) */
};

/* An object file read into memory once: its manifest and its programs are the same bytes. */
struct policy_file {
	char *buf;
	size_t len;
	struct manifest *mf;     /* its manifest, read and checked */
};

/* Command-line settings applied to every version's config (gateway mode). */
struct overrides {
	const char *listen[MAX_SERVICES];
	int n_listen;
	const char *up[L7_MAX_UPSTREAMS];
	int n_up;
	int fallback;            /* -2: not given */
};

/* jwt.c: --jwt-key, and the l7_jwt_clock maps of the published versions (run loop only). */
#define JWT_MAX_CLOCKS 64
struct jwt_env {
	char key_override[L7_MAX_JWT][512];
	int clock_fd[JWT_MAX_CLOCKS];
	int n_clocks;
	int64_t off;             /* the offset written, -1 before the first */
	time_t at;               /* when it was last checked */
	int64_t test_shift;      /* L7RUN_JWT_NOW: ns the JWT clock runs behind real time */
	uint32_t gen;            /* key generations handed out (loader thread) */
};

/* identities.c: --identities, and the published versions it is applied to (run loop only). */
struct ident_env {
	char file[512];
	time_t checked;
	struct idents *watched;
};

/* endpoints.c: --endpoints, --resolve-every, the passive health of run-time endpoints, and
 * the published versions they are applied to (run loop only, but for the loader's read of
 * file and resolve_every). */
#define EP_HEALTH_MAX 256
#define EP_RESOLVE_DEFAULT 5     /* s between resolutions of a name */
/* what an active health check found (health.c), by the names of l7_health_checks_total */
enum ep_check { EP_CHECK_PASSED, EP_CHECK_STATUS, EP_CHECK_CONNECT, EP_CHECK_TIMEOUT, EP_CHECK_BAD_RESPONSE, EP_CHECK_KINDS };
#define EP_CHECK_NAMES { "passed", "status", "connect", "timeout", "bad_response" }
struct ep_health {
	char upstream[L7M_NAME_MAX + 1];
	struct sockaddr_in addr;
	int fails;               /* failed connects in a row */
	int row;                 /* ejections in a row (the back-off doubles with each) */
	int ejected;             /* passive: out until `until` */
	uint64_t until;          /* ms */
	uint64_t ejections;      /* in all */
	int down;                /* active checks: out until `healthy` pass in a row */
	unsigned passes, failures;   /* active checks in a row */
	uint64_t checks[EP_CHECK_KINDS];
};
struct ep_env {
	char file[512];
	unsigned resolve_every;  /* 0: EP_RESOLVE_DEFAULT */
	time_t checked;
	uint64_t resolved_at;    /* ms */
	int changed;             /* the health or a slot changed: rebuild */
	int eager;               /* the mode's pools keep connections open to every endpoint (mesh):
				  * an endpoint is in force only while its pool has one (pooled), so
				  * none is picked before its pool has filled or after it emptied */
	struct rtsets *watched;
	struct ep_health health[EP_HEALTH_MAX];
	int n_health;
};

/* What every load reads and what outlives versions: one per l7run, in its context. */
struct policy_env {
	int verbose;
	struct kernel_probe probe;   /* what this kernel can do (probe.c), asked at the first load */
	struct overrides ov;         /* --listen, --upstream, --fallback */
	struct jwt_env jwt;
	struct ident_env ident;
	__u32 dp_flags;              /* l7_config's flags (L7_CFG_*: --audit), the same in every version */
	__u32 log_sample;            /* --access-log-sample N: about 1 in N requests logged */
	__u32 log_ring;              /* --access-log-buffer: bytes of l7_log (0: the default) */
	struct ep_env ep;
};

void policy_env_init(struct policy_env *env);    /* the defaults, before the command line */
void policy_env_ready(struct policy_env *env);   /* after it: libbpf's log level, L7RUN_JWT_NOW */

/* load.c */
enum load_mode { LOAD_GATEWAY, LOAD_MESH };
int policy_read(const char *path, struct policy_file *pf, char *err, size_t errlen);
void policy_free(struct policy_file *pf);
void config_from_manifest(struct manifest *mf, struct config *cfg);
void config_free(struct config *cfg);
int print_manifest(const char *object);   /* l7run --manifest */
struct bpf_object *open_policy(struct policy_env *env, const struct policy_file *pf, const char *path,
			       enum load_mode mode, const struct config *cfg, char *err, size_t errlen);
int version_config(const char *path, const struct config *serving, const struct overrides *ov,
		   struct policy_file *pf, struct config *cfg, char *err, size_t errlen);
int version_open(struct policy_env *env, const struct policy_file *pf, const char *path, enum load_mode mode,
		 struct config *cfg, struct bpf_object **obj, int *clock_fd, uint64_t *load_us, char *err, size_t errlen);
void version_close(struct policy_env *env, struct config *cfg, int clock_fd, struct bpf_object *obj);
int find_map(struct bpf_object *obj, const char *name, char *err, size_t errlen);   /* its fd, or -1 and err */
void pin_replace(const char *dir, int fd, const char *name);
void pin_programs(const char *dir, struct bpf_object *obj, int mesh);   /* DIR/prog_NAME */
void unpin_programs(const char *dir);
uint64_t object_mem(struct bpf_object *obj);
int parse_addr(const char *s, struct sockaddr_in *a);
int apply_overrides(struct config *cfg, const struct overrides *ov, char *err, size_t errlen);
const char *services_differ(const struct config *a, const struct config *b);

/* The programs of l7/progs.def, for the modes that attach and pin them. */
struct prog_desc {
	const char *name, *section, *map;
};
extern const struct prog_desc l7_progs[];
extern const int l7_n_progs;
int prog_is_mesh(const struct prog_desc *p);

/* identities.c: l7_idents from the manifest / --identities FILE, re-read when it changes */
struct idents;
int ident_file_arg(struct ident_env *env, const char *path);
int ident_setup(struct ident_env *env, struct bpf_object *obj, struct config *cfg, char *err, size_t errlen);
void ident_watch(struct ident_env *env, struct config *cfg, int on);
void ident_free(struct config *cfg);
void ident_tick(struct ident_env *env);

/* jwt.c: l7_jwt_keys from the manifest / --jwt-key, l7_jwt_clock */
int jwt_key_arg(struct jwt_env *env, const char *arg);
int jwt_setup(struct policy_env *env, struct bpf_object *obj, const struct config *cfg, int *clock_fd, char *err,
	      size_t errlen);
void jwt_clock_watch(struct jwt_env *env, int fd, int on);
void jwt_tick(struct jwt_env *env);
int64_t jwt_test_shift(void);   /* L7RUN_JWT_NOW, read once at start (policy_env_ready) */

/* endpoints.c: upstreams with run-time endpoints (l7_lb_tab) from --endpoints FILE and DNS */
struct rtsets;
int ep_file_arg(struct ep_env *env, const char *path);
int ep_resolve_arg(struct ep_env *env, const char *seconds);
int ep_setup(struct ep_env *env, struct bpf_object *obj, struct config *cfg, char *err, size_t errlen);
/* the tables of cfg's sets again from what its slots hold now (no source read): the mode's pool
 * changed what can be picked before the loop's next ep_tick (mesh: filled at publication) */
void ep_rebuild(struct config *cfg);
void ep_watch(struct ep_env *env, struct config *cfg, int on);
void ep_free(struct config *cfg);
void ep_tick(struct ep_env *env, uint64_t now_ms);
/* the pools' connects (upstream.c): an endpoint of a run-time set that fails is ejected */
int ep_seen(struct ep_env *env, const struct cfg_endpoint *e, int ok, uint64_t now_ms);   /* 1: ejected it */
/* row i of the ejection counts of cfg's sets' upstreams (the metrics: under the lock the loop
 * holds while ep_seen counts); 0 past the last */
const struct ep_health *ep_health_row(const struct config *cfg, int i, int *in_set);
/* the sets of cfg and their endpoints, for the active checks (health.c): the set's name, and
 * 1 with the address of slot k of set i if it holds an endpoint of the set (not draining) */
int ep_sets(const struct config *cfg);
const char *ep_set_name(const struct config *cfg, int i);
int ep_set_endpoint(const struct config *cfg, int i, int k, struct sockaddr_in *a);
int ep_set_slots(const struct config *cfg, int i, int *first);   /* slots of set i from *first; 0: none */
/* an active check's outcome: out after `unhealthy` failures in a row, back after `healthy`
 * passes (logged once per change); 1 if the endpoint's state changed */
int ep_checked(struct ep_env *env, const char *set, const struct sockaddr_in *a, enum ep_check r, const char *why,
	       unsigned unhealthy, unsigned healthy);
/* retries (gateway mode): how many a request whose connect to slot failed may have, and
 * another slot of its upstream to try (live, not ejected nor down, not in tried: a bit per
 * slot), or -1 */
int ep_retries(const struct config *cfg, int slot);
int ep_retry_slot(const struct config *cfg, int slot, uint32_t tried);
/* a slot whose endpoint left its set and is out of its table (no new requests); the mode says
 * when none of its connections is left, and the slot may take another endpoint */
int ep_retired(const struct config *cfg, int slot);
/* the name of the set a DENY's upstream names when its set had no endpoint, else NULL */
const char *ep_empty_set(const struct config *cfg, uint32_t upstream);
void ep_drained(struct config *cfg, int slot);

int fill_rule_tables(struct bpf_object *obj, const struct manifest *mf, char *err, size_t errlen);   /* tables.c */

/* tails.c: fill the PROG_ARRAY of each split host of this mode (0 gateway, 1 mesh) before
 * anything is attached; returns the decide programs put in, -1 with err set. The chains, for
 * pins and --stats: */
int fill_tail_calls(struct bpf_object *obj, int mesh, char *err, size_t errlen);
int tail_chain_count(void);
const char *tail_chain_name(int i, const char **prog_array);

#endif

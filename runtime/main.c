/* l7run: run a compiled policy in gateway or mesh mode (the core: core.c, the modes: modes.h),
 * or one of its commands (--stats, --metrics, --reload, --probe, --help). Every option is a row
 * of options.def.
 *   l7run [options] POLICY.o [-- CMD [ARGS]]
 *   l7run --mesh --cgroup PATH [options] POLICY.o [-- CMD [ARGS]]
 *   l7run --stats PIN_DIR | --metrics PIN_DIR POLICY.o | --manifest POLICY.o | --reload PID|PIDFILE [--pin DIR]
 *   l7run --probe */
#include <getopt.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include "modes.h"

enum { OPT_GW = 1, OPT_MESH = 2, OPT_CMD = 4 };
enum opt_id {
#define L7_OPT(id, name, letter, arg, modes, help) O_##id,
#include "options.def"
#undef L7_OPT
	N_OPTS
};
static const struct {
	const char *name;
	int letter;
	const char *arg;
	int modes;
	const char *help;
} opts[N_OPTS] = {
#define L7_OPT(id, name, letter, arg, modes, help) { name, letter, arg, modes, help },
#include "options.def"
#undef L7_OPT
};

static const char synopsis[] =
	"usage: l7run [options] POLICY.o [-- CMD [ARGS]]                    gateway mode\n"
	"       l7run [options] --watch DIR [-- CMD [ARGS]]                  the node agent (either mode)\n"
	"       l7run --mesh --cgroup PATH [options] POLICY.o [-- CMD [ARGS]]  mesh mode\n"
	"       l7run --stats PIN_DIR\n"
	"       l7run --metrics PIN_DIR POLICY.o\n"
	"       l7run --manifest POLICY.o\n"
	"       l7run --reload PID|PIDFILE [--pin DIR]\n"
	"       l7run --probe\n"
	"       l7run --help\n";

/* The options of one section: those whose modes, --reload's --pin aside, are `modes`. */
static void print_opts(int modes, const char *title)
{
	printf("\n%s:\n", title);
	for (int i = 0; i < N_OPTS; i++) {
		if ((opts[i].modes == OPT_CMD ? OPT_CMD : opts[i].modes & ~OPT_CMD) != modes)
			continue;
		char spec[64];
		int n = opts[i].letter ? snprintf(spec, sizeof spec, "-%c, --%s", opts[i].letter, opts[i].name)
				       : snprintf(spec, sizeof spec, "    --%s", opts[i].name);
		if (opts[i].arg)
			snprintf(spec + n, sizeof spec - (size_t)n, " %s", opts[i].arg);
		printf("  %-30s", spec);
		if (strlen(spec) > 29)
			printf("\n  %-30s", "");
		for (const char *h = opts[i].help; *h; h++) {
			putchar(*h);
			if (*h == '\n')
				printf("  %-30s", "");
		}
		putchar('\n');
	}
}

static void help(void)
{
	fputs(synopsis, stdout);
	printf("\n-- CMD [ARGS]: once the policy serves, run CMD (in mesh mode inside the cgroup, so that\n"
	       "its sockets are the mesh's), pass SIGTERM and SIGINT on to it, and when it ends clean\n"
	       "up as on SIGTERM and exit with its status.\n");
	print_opts(OPT_GW | OPT_MESH, "both modes");
	print_opts(OPT_GW, "gateway mode");
	print_opts(OPT_MESH, "mesh mode");
	print_opts(OPT_CMD, "commands");
	printf("\ncounters (--stats: `stat NAME VALUE`; --metrics: l7_dataplane_total{event=\"NAME\"}):\n");
	for (int i = 0; i < L7_STAT_MAX; i++)
		printf("  %-30s%s\n", l7_stat_desc[i].name, l7_stat_desc[i].help);
	printf("\nSIGHUP reloads POLICY.o from the same path (replace the file with rename(2)): the new\n"
	       "version takes new connections once it is fully loaded; a refused one changes nothing.\n"
	       "With --watch DIR, a change of DIR (a ConfigMap volume's ..data swap) is built with l7c and\n"
	       "reloaded the same way; SIGHUP builds it again. With --metrics-listen, /healthz answers\n"
	       "200 while the event loop turns and /readyz 200 while a policy serves.\n");
}

/* A usage error: what is wrong, the synopsis, on stderr; exit code 2. */
static int usage_error(const char *what, const char *arg)
{
	fprintf(stderr, "l7run: %s%s\n%s(l7run --help lists every option)\n", what, arg, synopsis);
	return 2;
}

static int seconds_arg(const char *v, double *out)
{
	char *end;
	*out = strtod(v, &end);
	return end == v || *end || *out < 0 ? -1 : 0;
}

/* Parse argv into L's settings; 0, or the exit code of a usage error. The policy object is
 * the one argument that is not an option; what follows `--` is the command. */
static int parse_args(int argc, char **argv, struct l7run *L)
{
	struct l7run_args *a = &L->args;
	struct overrides *ov = &L->env.ov;
	struct option lo[N_OPTS + 1];
	char shorts[N_OPTS + 2] = "-";   /* '-': non-options in order (the object); `--` ends */
	int seen[N_OPTS] = { 0 };

	memset(lo, 0, sizeof lo);
	for (int i = 0; i < N_OPTS; i++) {
		lo[i] = (struct option){ opts[i].name, opts[i].arg ? required_argument : no_argument, NULL, 256 + i };
		if (opts[i].letter) {
			size_t n = strlen(shorts);
			shorts[n] = (char)opts[i].letter;
			shorts[n + 1] = 0;
		}
	}
	opterr = 0;
	for (;;) {
		int c = getopt_long(argc, argv, shorts, lo, NULL);
		if (c == -1)
			break;
		if (c == 1) {
			if (a->obj)
				return usage_error("more than one policy object: ", optarg);
			a->obj = optarg;
			continue;
		}
		int id = c >= 256 && c < 256 + N_OPTS ? c - 256 : -1;
		for (int i = 0; id < 0 && i < N_OPTS; i++)
			if (opts[i].letter && opts[i].letter == c)
				id = i;
		if (id < 0)
			return usage_error("unknown option or missing argument: ", argv[optind - 1]);
		const char *v = optarg;
		double d;
		seen[id] = 1;
		switch ((enum opt_id)id) {
		case O_MESH: a->mesh = 1; break;
		case O_CGROUP: a->cgroup = v; break;
		case O_CREATE_CGROUP: a->create_cgroup = 1; break;
		case O_POOL: a->pool_n = atoi(v); break;
		case O_H2C: a->h2c = v; break;
		case O_LISTEN:
			if (ov->n_listen == MAX_SERVICES)
				return usage_error("too many --listen: ", v);
			ov->listen[ov->n_listen++] = v;
			break;
		case O_UPSTREAM:
			if (ov->n_up == L7_MAX_UPSTREAMS)
				return usage_error("too many --upstream: ", v);
			ov->up[ov->n_up++] = v;
			break;
		case O_FALLBACK: ov->fallback = atoi(v); break;
		case O_POOL_MAX: a->pool_max = atoi(v); break;
		case O_POOL_IDLE: a->pool_idle = atoi(v); break;
		case O_DRAIN_TIMEOUT:
			if (seconds_arg(v, &d))
				return usage_error("--drain-timeout expects seconds, not ", v);
			a->drain_ms = (uint64_t)(d * 1000);
			break;
		case O_WATCH: a->watch = v; break;
		case O_L7C: a->l7c = v; break;
		case O_STATUS_FILE: a->status_file = v; break;
		case O_GRACE_PERIOD:
			if (seconds_arg(v, &d))
				return usage_error("--grace-period expects seconds, not ", v);
			a->grace_ms = (uint64_t)(d * 1000);
			break;
		case O_PIN: snprintf(L->pin_dir, sizeof L->pin_dir, "%s", v); break;
		case O_PIDFILE: a->pidfile = v; break;
		case O_JWT_KEY:
			if (jwt_key_arg(&L->env.jwt, v))
				return usage_error("--jwt-key expects IDX=PATH, not ", v);
			break;
		case O_IDENTITIES:
			if (ident_file_arg(&L->env.ident, v))
				return usage_error("--identities: not a usable path: ", v);
			break;
		case O_ENDPOINTS:
			if (ep_file_arg(&L->env.ep, v))
				return usage_error("--endpoints: not a usable path: ", v);
			break;
		case O_RESOLVE_EVERY:
			if (ep_resolve_arg(&L->env.ep, v))
				return usage_error("--resolve-every expects whole seconds (1-86400), not ", v);
			break;
		case O_METRICS_LISTEN: a->metrics_addr = v; break;
		case O_BPF_STATS: a->bpf_stats = 1; break;
		case O_AUDIT: L->env.dp_flags |= L7_CFG_AUDIT; break;
		case O_ACCESS_LOG: a->access_log = v; break;   /* opened once the command line is read */
		case O_ACCESS_LOG_SAMPLE:
			if (atoi(v) < 1)
				return usage_error("--access-log-sample expects N >= 1, not ", v);
			L->env.log_sample = (__u32)atoi(v);
			break;
		case O_ACCESS_LOG_BUFFER: {
			long n = atol(v);
			if (n < 4096 || (n & (n - 1)) || n > (1l << 30))
				return usage_error("--access-log-buffer expects a power of two from 4096 to 1 GiB, not ", v);
			L->env.log_ring = (__u32)n;
			break;
		}
		case O_VERBOSE: L->env.verbose = 1; break;
		case O_STATS: a->stats_dir = v; break;
		case O_METRICS: a->metrics_dir = v; break;
		case O_MANIFEST: a->manifest = v; break;
		case O_RELOAD: a->reload = v; break;
		case O_HELP: a->help = 1; break;
		case O_PROBE: a->probe = 1; break;
		case N_OPTS: break;
		}
	}
	if (optind < argc)
		a->cmd = argv + optind;
	if (a->help || a->stats_dir || a->reload || a->probe || a->manifest)
		return 0;
	if (a->metrics_dir)
		return a->obj ? 0 : usage_error("--metrics PIN_DIR needs the POLICY.o of that l7run", "");
	int mode = a->mesh ? OPT_MESH : OPT_GW;
	for (int i = 0; i < N_OPTS; i++)
		if (seen[i] && !(opts[i].modes & (mode | OPT_CMD))) {
			char what[96];
			snprintf(what, sizeof what, "--%s is an option of %s", opts[i].name, a->mesh ? "gateway mode" : "mesh mode (--mesh)");
			return usage_error(what, "");
		}
	if (a->watch && a->obj)
		return usage_error("--watch DIR builds the policy: no POLICY.o as well: ", a->obj);
	if (a->l7c && !a->watch)
		return usage_error("--l7c is an option of --watch", "");
	if (!a->obj && !a->watch)
		return usage_error("no POLICY.o given (or --watch DIR)", "");
	if (a->mesh && !a->cgroup)
		return usage_error("--mesh needs --cgroup PATH", "");
	return 0;
}

int main(int argc, char **argv)
{
	struct l7run *L = malloc(sizeof *L);   /* the context, passed down: l7run has no other state */

	if (!L)
		return 1;
	l7run_init(L, &gateway_mode);
	int rc = parse_args(argc, argv, L);
	if (rc)
		return rc;
	if (L->args.help) {
		help();
		return 0;
	}
	if (L->args.probe)   /* what this kernel supports, for both modes */
		return probe_print(stdout, &L->env.probe, PM_GW | PM_MESH);
	if (L->args.stats_dir)
		return print_stats(L->args.stats_dir);
	if (L->args.metrics_dir)
		return print_metrics(L->args.metrics_dir, L->args.obj);
	if (L->args.manifest)
		return print_manifest(L->args.manifest);
	if (L->args.reload)
		return reload_command(L->args.reload, L->pin_dir);
	if (L->args.mesh)
		L->mode = &mesh_mode;
	if (L->args.access_log) {
		if (alog_open(L, L->args.access_log)) {
			fprintf(stderr, "l7run: --access-log %s: %s\n", L->args.access_log, strerror(errno));
			return 1;
		}
		L->env.dp_flags |= L7_CFG_LOG;
	}
	policy_env_ready(&L->env);
	return l7run_serve(L);
}

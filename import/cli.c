/* `l7c import`: the subcommand's options, its input files and its output. */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "import.h"
#include "model.h"

static void usage(FILE *o)
{
	fprintf(o,
		"usage: l7c import [options] FILE.yaml... -o POLICY.l7\n"
		"Translates CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy, Istio AuthorizationPolicy and\n"
		"RequestAuthentication objects into one .l7 policy file (docs/import.md).\n\n"
		"  -o FILE                 write the policy to FILE (default stdout); JWT key files go next to it\n"
		"  --namespace=NS          namespace of objects that name none (default default)\n"
		"  --istio-root-namespace=NS  Istio's root namespace: its policies are mesh-wide (default istio-system)\n"
		"  --port=N                the port every workload is served on, besides those its policies name\n"
		"                          (default 80)\n"
		"  --listen=WORKLOAD=IP    the address l7run serves WORKLOAD at (default 127.1.0.N)\n"
		"  --backend=WORKLOAD=IP   the address of WORKLOAD's pods (default 127.2.0.N)\n"
		"  --fallback=IP:PORT      the fallback proxy CUSTOM policies send to (default 127.0.0.1:15001)\n"
		"  --identities=FILE       addresses of the caller identities (l7run's --identities format),\n"
		"                          declared in the policy instead of given at run time\n"
		"  --fields                print the table of every field and what l7c does with it\n"
		"  --color=WHEN            never | always | auto (default auto)\n"
		"  -h, --help              this text\n");
}

static int addr_opt(const char *opt, const char *arg, struct l7_import_addr **list, int *n)
{
	const char *eq = strrchr(arg, '=');
	struct in_addr a;
	char ip[64];
	if (!eq || eq == arg || strlen(eq + 1) >= sizeof ip) {
		fprintf(stderr, "l7c: error: --%s=%s: expected WORKLOAD=IP\n", opt, arg);
		return -1;
	}
	snprintf(ip, sizeof ip, "%s", eq + 1);
	if (inet_pton(AF_INET, ip, &a) != 1) {
		fprintf(stderr, "l7c: error: --%s=%s: '%s' is not an IPv4 address\n", opt, arg, ip);
		return -1;
	}
	*list = realloc(*list, sizeof(**list) * (size_t)(*n + 1));
	(*list)[*n].workload = strndup(arg, (size_t)(eq - arg));
	(*list)[(*n)++].ip = ntohl(a.s_addr);
	return 0;
}

static struct l7_source *read_file(const char *path, struct l7_diags *d)
{
	if (strcmp(path, "-"))
		return l7_source_load(path, d);
	struct l7_source *s = l7_source_from_string("<stdin>", "");
	size_t cap = 4096;
	s->text = realloc(s->text, cap);
	size_t n;
	while ((n = fread(s->text + s->len, 1, cap - s->len - 1, stdin)) > 0)
		if ((s->len += n) + 1 == cap)
			s->text = realloc(s->text, cap *= 2);
	s->text[s->len] = 0;
	return s;
}

int l7_import_main(int argc, char **argv)
{
	struct l7_import_opts o = { .ns = "default", .istio_root = "istio-system", .port = 80,
				    .fallback_ip = 0x7f000001, .fallback_port = 15001 };
	const char *identities = NULL;
	int color = -1, rc = 2;
	static const struct option longopts[] = {
		{ "namespace", required_argument, NULL, 'n' }, { "istio-root-namespace", required_argument, NULL, 'r' },
		{ "port", required_argument, NULL, 'p' }, { "listen", required_argument, NULL, 'l' },
		{ "backend", required_argument, NULL, 'b' }, { "fallback", required_argument, NULL, 'f' },
		{ "identities", required_argument, NULL, 'i' }, { "fields", no_argument, NULL, 'F' },
		{ "color", required_argument, NULL, 'c' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o': o.out_path = optarg; break;
		case 'n': o.ns = optarg; break;
		case 'r': o.istio_root = optarg; break;
		case 'p': {
			char *e;
			long p = strtol(optarg, &e, 10);
			if (*e || p < 1 || p > 65535) {
				fprintf(stderr, "l7c: error: --port=%s: expected a port number\n", optarg);
				goto out;
			}
			o.port = (int)p;
			break;
		}
		case 'l':
			if (addr_opt("listen", optarg, &o.listen, &o.nlisten))
				goto out;
			break;
		case 'b':
			if (addr_opt("backend", optarg, &o.backend, &o.nbackend))
				goto out;
			break;
		case 'f': {
			char ip[64];
			unsigned port;
			struct in_addr a;
			const char *colon = strrchr(optarg, ':');
			if (!colon || (size_t)(colon - optarg) >= sizeof ip || sscanf(colon + 1, "%u", &port) != 1 || !port || port > 65535) {
				fprintf(stderr, "l7c: error: --fallback=%s: expected IP:PORT\n", optarg);
				goto out;
			}
			snprintf(ip, sizeof ip, "%.*s", (int)(colon - optarg), optarg);
			if (inet_pton(AF_INET, ip, &a) != 1) {
				fprintf(stderr, "l7c: error: --fallback=%s: '%s' is not an IPv4 address\n", optarg, ip);
				goto out;
			}
			o.fallback_ip = ntohl(a.s_addr);
			o.fallback_port = (int)port;
			break;
		}
		case 'i': identities = optarg; break;
		case 'F': print_fields(stdout); rc = 0; goto out;
		case 'c': color = !strcmp(optarg, "always") ? 1 : !strcmp(optarg, "never") ? 0 : -1; break;
		case 'h': usage(stdout); rc = 0; goto out;
		default: usage(stderr); goto out;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "l7c: error: no YAML file given\n");
		usage(stderr);
		goto out;
	}
	struct l7_diags d = { .out = stderr, .color = color < 0 ? isatty(2) : color };
	int n = argc - optind;
	bool loaded = true;
	struct l7_source **srcs = calloc((size_t)n + 1, sizeof(*srcs));
	for (int i = 0; i < n; i++)
		loaded &= (srcs[i] = read_file(argv[optind + i], &d)) != NULL;
	struct l7_source *ids = identities ? l7_source_load(identities, &d) : NULL;
	loaded &= !identities || ids;
	if (loaded) {
		o.identities = ids;
		char *text = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&text, &len);
		rc = d.errors ? 1 : l7_import(&o, srcs, n, mem, &d);
		fclose(mem);
		if (!rc) {
			FILE *f = o.out_path && strcmp(o.out_path, "-") ? fopen(o.out_path, "w") : stdout;
			if (!f || fwrite(text, 1, len, f) != len || (f == stdout ? fflush(f) : fclose(f))) {
				fprintf(stderr, "l7c: error: cannot write '%s'\n", o.out_path);
				rc = 2;
			}
		}
		free(text);
		if (d.errors)
			fprintf(stderr, "%d error%s generated.\n", d.errors, d.errors == 1 ? "" : "s");
	}
	for (int i = 0; i < n; i++)
		l7_source_free(srcs[i]);
	free(srcs);
	l7_source_free(ids);
out:
	for (int i = 0; i < o.nlisten; i++)
		free((char *)o.listen[i].workload);
	for (int i = 0; i < o.nbackend; i++)
		free((char *)o.backend[i].workload);
	free(o.listen);
	free(o.backend);
	return rc;
}

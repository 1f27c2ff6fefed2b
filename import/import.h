/* import: CiliumNetworkPolicy / CiliumClusterwideNetworkPolicy and Istio AuthorizationPolicy /
 * RequestAuthentication YAML to a .l7 policy file (docs/import.md).
 *
 *   l7_import_main()   the `l7c import` subcommand: options, files, output
 *   l7_import()        the translation itself, on loaded sources
 *
 * Every field the importer cannot express is an error or a warning at its YAML file:line:col,
 * through the compiler's diagnostics engine. Bad YAML is reported, never a crash. */
#ifndef L7_IMPORT_H
#define L7_IMPORT_H

#include <stdio.h>

#include "frontend.h"

struct l7_import_addr {          /* --listen / --backend: a workload's address */
	const char *workload;
	unsigned ip;                 /* host byte order */
};

struct l7_import_opts {
	const char *out_path;        /* the .l7 written ("-": stdout); key files go next to it */
	const char *ns;              /* namespace of objects that name none (default "default") */
	const char *istio_root;      /* Istio's root namespace (default "istio-system") */
	int port;                    /* the port every workload is served on besides those its
	                              * policies name (default 80) */
	unsigned fallback_ip;        /* the fallback proxy, for CUSTOM (default 127.0.0.1:15001) */
	int fallback_port;
	struct l7_import_addr *listen, *backend;
	int nlisten, nbackend;
	const struct l7_source *identities;   /* --identities FILE: addresses of identities */
};

/* Translates the documents of srcs into .l7 text on out (only if there are no errors: out
 * stays untouched otherwise). Returns 0, or 1 if errors were reported. */
int l7_import(const struct l7_import_opts *o, struct l7_source *const *srcs, int nsrcs, FILE *out,
	      struct l7_diags *d);

/* `l7c import [options] FILE.yaml... -o policy.l7`; argv[0] is "import". Exit status: 0 done,
 * 1 the inputs have errors, 2 usage or I/O errors. */
int l7_import_main(int argc, char **argv);

#endif

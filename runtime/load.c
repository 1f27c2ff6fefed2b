/* Loading: open and load the object (verifier log on failure), attach the programs to the
 * SOCKHASHes as l7/progs.def says, pin them so `l7run --stats` finds them, read l7.config. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <linux/magic.h>
#include "l7run.h"

static const struct {
	const char *name, *section, *map;
} progs[] = {
#define L7_PROG(name, section, entry, map) { #name, section, #map },
#include "l7/progs.def"
#undef L7_PROG
};

static int attach_type(const char *section)
{
	if (!strcmp(section, "sk_skb/stream_parser"))
		return BPF_SK_SKB_STREAM_PARSER;
	if (!strcmp(section, "sk_skb/stream_verdict"))
		return BPF_SK_SKB_STREAM_VERDICT;
	if (!strcmp(section, "sk_skb/verdict"))
		return BPF_SK_SKB_VERDICT;
	if (!strcmp(section, "sk_msg"))
		return BPF_SK_MSG_VERDICT;
	return -1;
}

/* libbpf prints the verifier log at warning level when a load fails; keep only that. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && !rt.verbose)
		return 0;
	if (level == LIBBPF_INFO && !rt.verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static int ensure_bpffs(void)
{
	struct statfs st;

	if (statfs("/sys/fs/bpf", &st) == 0 && st.f_type == BPF_FS_MAGIC)
		return 0;
	mkdir("/sys/fs/bpf", 0700);
	if (mount("bpf", "/sys/fs/bpf", "bpf", 0, NULL)) {
		fprintf(stderr, "l7run: cannot mount bpffs: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int map_fd(const char *name)
{
	int fd = bpf_object__find_map_fd_by_name(rt.obj, name);
	if (fd < 0)
		fprintf(stderr, "l7run: object has no map %s\n", name);
	return fd;
}

static void pin(int fd, const char *kind, const char *name)
{
	char p[512];

	if (!rt.pin_dir[0])
		return;
	snprintf(p, sizeof p, "%s/%s_%s", rt.pin_dir, kind, name);
	unlink(p);
	if (bpf_obj_pin(fd, p))
		fprintf(stderr, "l7run: pin %s: %s\n", p, strerror(errno));
}

int load_object(const char *path)
{
	libbpf_set_print(libbpf_print);
	if (ensure_bpffs())
		return -1;
	rt.obj = bpf_object__open_file(path, NULL);
	if (!rt.obj) {
		fprintf(stderr, "l7run: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	int err = bpf_object__load(rt.obj);
	if (err) {
		fprintf(stderr, "l7run: the kernel refused %s (%s); the verifier log is above, its last "
			"lines name the failing instruction and its source line\n", path, strerror(-err));
		return -1;
	}
	if (jwt_setup(rt.obj) || ident_setup(rt.obj))   /* keys and callers before any request */
		return -1;
	if (fill_rule_tables(rt.obj, path))   /* before anything is attached */
		return -1;
	rt.map_clients = map_fd("l7_clients");
	rt.map_upstreams = map_fd("l7_upstreams");
	rt.map_conns = map_fd("l7_conns");
	rt.map_ctl = map_fd("l7_ctl");
	rt.map_pass = map_fd("l7_pass");
	rt.map_txq = map_fd("l7_txq");
	rt.map_txport = map_fd("l7_txport");
	rt.map_stats = map_fd("l7_stats");
	if (rt.map_clients < 0 || rt.map_upstreams < 0 || rt.map_conns < 0 || rt.map_ctl < 0 ||
	    rt.map_pass < 0 || rt.map_txq < 0 || rt.map_txport < 0 || rt.map_stats < 0)
		return -1;
	if (rt.pin_dir[0])
		mkdir(rt.pin_dir, 0700);
	for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
		if (!strncmp(progs[i].map, "l7_mesh_", 8))
			continue;   /* mesh-mode programs: not attached in gateway mode */
		struct bpf_program *p = bpf_object__find_program_by_name(rt.obj, progs[i].name);
		int type = attach_type(progs[i].section);
		int mfd = bpf_object__find_map_fd_by_name(rt.obj, progs[i].map);
		if (!p || type < 0 || mfd < 0) {
			fprintf(stderr, "l7run: object lacks program %s or its map %s\n", progs[i].name, progs[i].map);
			return -1;
		}
		int fd = bpf_program__fd(p);
		if (bpf_prog_attach(fd, mfd, type, 0)) {
			fprintf(stderr, "l7run: attach %s to %s: %s\n", progs[i].name, progs[i].map, strerror(errno));
			return -1;
		}
		rt.prog_fd[rt.n_progs] = fd;
		rt.prog_map[rt.n_progs] = mfd;
		rt.prog_type[rt.n_progs] = type;
		rt.n_progs++;
		pin(fd, "prog", progs[i].name);
	}
	pin(rt.map_stats, "map", "l7_stats");
	pin(map_fd("l7_counters"), "map", "l7_counters");   /* l7run --metrics */
	pin(rt.map_clients, "map", "l7_clients");
	pin(rt.map_upstreams, "map", "l7_upstreams");
	return 0;
}

void unload_object(void)
{
	for (int i = 0; i < rt.n_progs; i++)
		bpf_prog_detach2(rt.prog_fd[i], rt.prog_map[i], rt.prog_type[i]);
	if (rt.pin_dir[0]) {
		char p[512];
		for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
			snprintf(p, sizeof p, "%s/prog_%s", rt.pin_dir, progs[i].name);
			unlink(p);
		}
		/* every map load_object pins: a missed one keeps the directory (rmdir fails) */
		const char *maps[] = { "l7_stats", "l7_clients", "l7_upstreams", "l7_counters" };
		for (int i = 0; i < 4; i++) {
			snprintf(p, sizeof p, "%s/map_%s", rt.pin_dir, maps[i]);
			unlink(p);
		}
		rmdir(rt.pin_dir);
	}
	bpf_object__close(rt.obj);
	rt.obj = NULL;
}

int parse_addr(const char *s, struct sockaddr_in *a)
{
	char host[64];
	const char *colon = strrchr(s, ':');

	if (!colon || (size_t)(colon - s) >= sizeof host)
		return -1;
	memcpy(host, s, colon - s);
	host[colon - s] = 0;
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)atoi(colon + 1));
	if (!strcmp(host, "localhost"))
		strcpy(host, "127.0.0.1");
	return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

/* The text of the object's l7.config section (format in l7/abi.h), malloc'd; NULL if none. */
char *config_text(const char *path)
{
	int fd = open(path, O_RDONLY);
	char *text = NULL;
	if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t shstrndx;
	for (Elf_Scn *scn = NULL; e && !elf_getshdrstrndx(e, &shstrndx) && (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstrndx, sh.sh_name) : NULL;
		Elf_Data *d = name && !strcmp(name, L7_CONFIG_SECTION) ? elf_getdata(scn, NULL) : NULL;
		if (d && d->d_buf) {
			text = strndup(d->d_buf, d->d_size);
			break;
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return text;
}

int read_config(const char *path, struct config *cfg)
{
	int rc = -1;

	cfg->fallback = -1;
	char *text = config_text(path);
	if (text) {
		for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char a[64], b[64], c[64];
			int idx;
			if (sscanf(line, "policy %63s", a) == 1) {
				snprintf(cfg->policy, sizeof cfg->policy, "%s", a);
			} else if (sscanf(line, "service %63s %63s", a, b) == 2 && cfg->n_services < MAX_SERVICES) {
				struct cfg_endpoint *s = &cfg->service[cfg->n_services++];
				snprintf(s->name, sizeof s->name, "%s", a);
				s->set = parse_addr(b, &s->addr) == 0;
			} else if (sscanf(line, "upstream %d %63s %63s", &idx, a, c) == 3 && idx >= 0 && idx < L7_MAX_UPSTREAMS) {
				snprintf(cfg->upstream[idx].name, sizeof cfg->upstream[idx].name, "%s", a);
				cfg->upstream[idx].set = parse_addr(c, &cfg->upstream[idx].addr) == 0;
			} else if (sscanf(line, "fallback %d", &idx) == 1) {
				cfg->fallback = idx;
			} else {
				if (!jwt_config_line(line))
					ident_config_line(line);
			}
		}
		free(text);
		rc = 0;
	}
	if (rc)
		fprintf(stderr, "l7run: %s has no %s section\n", path, L7_CONFIG_SECTION);
	return rc;
}

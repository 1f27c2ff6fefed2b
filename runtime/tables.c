/* Rule tables: the compiler turned long runs of method+path rules into tables (ir/passes.c
 * "tables") and wrote their entries into l7.config; they go into the l7_exact hash map and the
 * l7_prefix trie here, after the object is loaded and before anything is attached, so no
 * request is ever judged by a half-filled table. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "l7run.h"

static char *section_text(const char *path)
{
	int fd = open(path, O_RDONLY);
	char *text = NULL;
	if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
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

int fill_rule_tables(struct bpf_object *obj, const char *path)
{
	char *text = section_text(path);
	if (!text)
		return -1;
	int exact = bpf_object__find_map_fd_by_name(obj, "l7_exact");
	int prefix = bpf_object__find_map_fd_by_name(obj, "l7_prefix");
	int n = 0, rc = 0;
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned table, method;
		char kind[8], p[L7_TABLE_PATH + 1];
		if (sscanf(line, "table %u %7s %u %64s", &table, kind, &method, p) != 4) {
			if (sscanf(line, "table %u %7s %u", &table, kind, &method) != 3 || strcmp(kind, "exact"))
				continue;
			p[0] = 0;   /* the empty path (exact only) */
		}
		uint32_t one = 1;
		size_t len = strlen(p);
		if (exact < 0 || prefix < 0) {
			fprintf(stderr, "l7run: the object has rule tables but no l7_exact/l7_prefix maps\n");
			rc = -1;
			break;
		}
		if (!strcmp(kind, "exact")) {
			struct l7_table_key k = { .table = table, .method = method, .len = (uint32_t)len };
			memcpy(k.path, p, len);
			rc = bpf_map_update_elem(exact, &k, &one, BPF_ANY);
		} else {
			struct l7_prefix_key k = { .prefixlen = (uint32_t)(64 + 8 * len), .table = htonl(table),
						   .method = htonl(method) };
			memcpy(k.path, p, len);
			rc = bpf_map_update_elem(prefix, &k, &one, BPF_ANY);
		}
		if (rc) {
			fprintf(stderr, "l7run: rule table %u: cannot insert '%s': %s\n", table, p, strerror(errno));
			break;
		}
		n++;
	}
	if (!rc && n && getenv("L7RUN_VERBOSE_TABLES"))
		fprintf(stderr, "l7run: %d rule table entries loaded\n", n);
	free(text);
	return rc;
}

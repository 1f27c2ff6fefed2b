/* The manifest: what a compiled policy object tells l7run besides its programs and maps, so
 * that `l7run prog.o` needs no other configuration. Written by l7c (codegen/tables.c, the
 * only writer) into the ELF section L7_MANIFEST_SECTION, read by runtime/manifest.c (the
 * only reader) into typed records; `l7run --manifest prog.o` prints it.
 *
 * Layout (little-endian, no alignment: readers copy every field out):
 *   header   u32 magic L7M_MAGIC, u32 version L7M_VERSION, u32 size (of the whole section,
 *            header included), u32 count (of records)
 *   record   u16 kind (enum l7m_kind), u16 size (of the payload), payload: the kind's fields
 *            of l7/manifest.def in order, exactly `size` bytes
 * Strings are length-prefixed bytes, so a value may hold spaces or any byte.
 *
 * Versioning: any change to the layout (the header, a record kind, a field, their order)
 * bumps L7M_VERSION; l7run refuses every other version, naming both ("compiled by a newer
 * l7c: manifest version 3, this l7run reads 2"). The first 8 bytes (magic, version) are the
 * same in every version, so that any l7run can say which it found. Version 1 was the text
 * section `l7.config` of earlier l7c ("l7c-config 1"). */
#ifndef L7_MANIFEST_H
#define L7_MANIFEST_H

#include <linux/types.h>
#include "dataplane.h"

#define L7_MANIFEST_SECTION "l7.manifest"
#define L7_MANIFEST_V1_SECTION "l7.config"   /* version 1 (text), to name it when refused */
#define L7M_MAGIC   0x464d374cu   /* "L7MF" */
#define L7M_VERSION 6
#define L7M_HEADER  16            /* bytes of the header */
#define L7M_RECORD  4             /* bytes of a record's kind and size */

#define L7M_NAME_MAX     255      /* bytes of a name (policy, service, upstream, ...) */
#define L7M_PATH_MAX     4095     /* bytes of a file path */
#define L7M_MAX_SERVICES 16       /* services l7run listens on */
#define L7M_NONE         0xffffffffu   /* an L7M_OPT field that refers to nothing */

/* The values of L7M_ENUM fields, and their names (l7run --manifest, --metrics) */
enum l7m_match { L7M_EXACT, L7M_PREFIX };   /* TABLE.match: which map holds the entry */
#define L7M_MATCH_NAMES { "exact", "prefix" }
/* TABLE.method: enum l7_method (l7/abi.h), 0 = any method */
#define L7M_METHOD_NAMES { "any", "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH" }
/* RUNTIME.source and .balance */
enum l7m_rt_source { L7M_RT_DNS, L7M_RT_FILE };
#define L7M_RT_SOURCE_NAMES { "dns", "endpoints" }
enum l7m_rt_balance { L7M_RT_ROUND_ROBIN, L7M_RT_HASH };
#define L7M_RT_BALANCE_NAMES { "round_robin", "hash" }
/* RULE.decision: ir/ir.h enum ir_term, by name (codegen maps one to the other) */
enum l7m_decision { L7M_D_CONTINUE, L7M_D_FORWARD, L7M_D_DENY, L7M_D_FALLBACK, L7M_D_ALLOW };
#define L7M_DECISION_NAMES { "continue", "forward", "deny", "fallback", "allow" }
/* How many names a NAMES list has (variadic: the list's commas are its arguments) */
#define L7M_COUNT(...) (__u32)(sizeof((const char *const[])__VA_ARGS__) / sizeof(const char *))

/* A string field: len bytes at s. The reader NUL-terminates its copy, so names read as C
 * strings; values (TABLE.key) may hold any byte, NUL included. */
struct l7m_str {
	const char *s;
	__u32 len;
};

enum l7m_kind {
	L7M_NOKIND,               /* 0: never written, so zeroed bytes are no record */
#define L7M_KIND(id, name, max, help, fields) L7M_##id,
#include "manifest.def"
	L7M_KINDS
};

/* One struct per kind: struct l7m_service { struct l7m_str name; __u32 ip; __u32 port; }... */
#define L7M_U32(f, max) __u32 f;
#define L7M_ENUM(f, names) __u32 f;
#define L7M_IP4(f) __u32 f;
#define L7M_STR(f, max) struct l7m_str f;
#define L7M_REF(f, kind) __u32 f;
#define L7M_OPT(f, kind) __u32 f;
#define L7M_KIND(id, name, max, help, fields) struct l7m_##name { fields };
#include "manifest.def"

#endif

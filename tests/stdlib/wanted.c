/* The policy-side symbols http.h reads: header names a policy wants (lower case). */
#include <l7/abi.h>

const __u32 l7_n_wanted = 4;
const __u8 l7_wanted_len[L7_MAX_WANTED] = { 4, 6, 13, 12 };
const char l7_wanted_name[L7_MAX_WANTED][L7_MAX_NAME] = {
	"user", "x-user", "authorization", "content-type",
};

/* ... and the response field names a policy sets or removes (mesh_resp.h, gw_head.h). */
const __u32 l7_n_rhdr = 2;
const __u8 l7_rhdr_len[L7_MAX_RHDR] = { 6, 10 };
const char l7_rhdr_name[L7_MAX_RHDR][L7_MAX_NAME] = { "server", "set-cookie" };

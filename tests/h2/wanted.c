/* The policy-side symbols hpack.h reads (the BPF object defines the same: bpf/h2_kern.c). */
#include <l7/abi.h>
#include "wanted_names.h"

const __u32 l7_n_wanted = T_N_WANTED;
const __u8 l7_wanted_len[L7_MAX_WANTED] = T_WANTED_LEN;
const char l7_wanted_name[L7_MAX_WANTED][L7_MAX_NAME] = T_WANTED_NAME;

"""The "nodes" for the cross-node mesh tests: network namespaces the test makes, joined by veth
pairs with addresses of their own, processes started in them (by pid, through procs), and
this process moved into one of them as its client."""
import ctypes
import subprocess

import procs


def sh(*argv):
    subprocess.run(argv, check=True, timeout=20)


def setns(fd):
    """This process into the network namespace of fd (Python 3.11 has no os.setns)."""
    if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000):   # CLONE_NEWNET
        raise OSError(ctypes.get_errno(), "setns")


def make(names):
    """Network namespaces `names`, each with its loopback up."""
    for ns in names:
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")


def join(ns_a, dev_a, addr_a, ns_b, dev_b, addr_b, prefix=24):
    """A veth pair between ns_a and ns_b: dev_a with addr_a in ns_a, dev_b with addr_b in ns_b."""
    sh("ip", "link", "add", dev_a, "netns", ns_a, "type", "veth", "peer", "name", dev_b, "netns", ns_b)
    for ns, dev, addr in ((ns_a, dev_a, addr_a), (ns_b, dev_b, addr_b)):
        sh("ip", "-n", ns, "addr", "add", "%s/%d" % (addr, prefix), "dev", dev)
        sh("ip", "-n", ns, "link", "set", dev, "up")


def start(argv, ns, cgroup=None, **kw):
    """argv in node ns (nsenter, not `ip netns exec`: that remounts /sys and hides cgroup2)."""
    return procs.start(["nsenter", "--net=/run/netns/" + ns, "--"] + argv, cgroup=cgroup, **kw)


def remove(names):
    for ns in names:
        subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)

"""One TensorFlow worker of a LocalCluster:
`python -m tf_placeto.measure.runtimes.worker --cluster JSON --task N ...`.

Linux only. The process pins itself to one core and runs a `tf.distribute.Server` with one
intra-op thread, so N workers on N cores are N devices that truly run in parallel. Its inter-op
pool has several threads (OP_THREADS), all on that core: TensorFlow serves its peers' RunGraph
and RecvTensor calls on that same pool, and with one thread a request waited behind every op
already queued. A peer that needed one tensor then sat idle until the worker had run its whole
share of the step, in about half of the sessions.

It writes `ready TARGET` on stdout once it serves; TensorFlow's log goes to stderr, which the
parent sends to a file. It dies with its parent: prctl(PR_SET_PDEATHSIG) kills it even when
the parent is SIGKILLed, and a poll of the parent's pid backs that up.

TensorFlow binds its gRPC server to every interface (the address "0.0.0.0:PORT" is hard-coded
whatever host the cluster spec names), and anyone who can reach that port can run any op. So
before the server starts, the worker redirects TensorFlow's calls to bind() to a wrapper that
turns the wildcard address into loopback, and after it starts, it refuses to serve unless the
port listens on loopback only.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import signal
import socket
import struct
import sys
import time

import numpy as np

READY_LINE = "ready"
EXIT_PORT_TAKEN = 75          # the parent picks new ports and starts again
PARENT_POLL_S = 1.0
# Inter-op threads of a worker: more than the independent ops a share of a step usually has
# ready at once, so that one is always free to answer a peer (see the module docstring).
OP_THREADS = 8
_PR_SET_PDEATHSIG = 1
_SHT_RELA = 4
_TCP_LISTEN = "0A"


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent goes, however the parent died."""
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:   # the parent died before prctl took effect
        os._exit(1)


class _LoopbackBind:
    """A bind() for TensorFlow's libraries that binds wildcard addresses to loopback.

    The wildcard "0.0.0.0" becomes 127.0.0.1, and "::" (gRPC first tries a dual-stack IPv6
    socket) becomes ::ffff:127.0.0.1, which on a dual-stack socket accepts IPv4 connections to
    127.0.0.1 only. Installed by overwriting the libraries' GOT entry for bind, which is where
    their calls to libc's bind() jump through.
    """

    _BIND_TYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32)

    def __init__(self):
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.bind.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32]
        self._libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        # getattr: a dunder name written in a class body would be mangled
        self._errno_location = getattr(self._libc, "__errno_location")
        self._errno_location.restype = ctypes.POINTER(ctypes.c_int)
        self._function = self._BIND_TYPE(self._bind)   # kept alive as long as this object

    def _bind(self, fd: int, address: int, length: int) -> int:
        raw = bytearray(ctypes.string_at(address, length))
        family = struct.unpack_from("=H", raw)[0]
        if family == socket.AF_INET and raw[4:8] == bytes(4):
            raw[4:8] = socket.inet_aton("127.0.0.1")
        elif family == socket.AF_INET6 and raw[8:24] == bytes(16):
            raw[8:24] = socket.inet_pton(socket.AF_INET6, "::ffff:127.0.0.1")
        result = self._libc.bind(fd, (ctypes.c_char * length).from_buffer(raw), length)
        self._errno_location()[0] = ctypes.get_errno()   # gRPC reads errno on failure
        return result

    def install(self) -> None:
        """Point the bind GOT entry of every loaded TensorFlow library at the wrapper."""
        page = os.sysconf("SC_PAGE_SIZE")
        wrapper = ctypes.cast(self._function, ctypes.c_void_p).value
        for path, base in _loaded_tensorflow_libraries().items():
            for offset in _got_entries(path, b"bind"):
                entry = base + offset
                if self._libc.mprotect(entry & ~(page - 1), page,
                                       mmap.PROT_READ | mmap.PROT_WRITE) != 0:
                    raise OSError(ctypes.get_errno(), f"cannot patch bind() in {path}")
                ctypes.c_void_p.from_address(entry).value = wrapper


def _loaded_tensorflow_libraries() -> dict:
    """Path -> load address of each TensorFlow shared library mapped into this process."""
    bases = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if (len(fields) == 6 and int(fields[2], 16) == 0 and ".so" in fields[5]
                    and f"{os.sep}tensorflow{os.sep}" in fields[5]):
                bases.setdefault(fields[5], int(fields[0].split("-")[0], 16))
    return bases


def _got_entries(path: str, symbol: bytes) -> list:
    """Addresses (relative to the load address) of the GOT slots of `symbol` in an ELF64 file."""
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as elf:
        if elf[:6] != b"\x7fELF\x02\x01":   # 64-bit little-endian, as on x86-64 and arm64
            return []
        header_offset, = struct.unpack_from("<Q", elf, 0x28)
        header_size, header_count = struct.unpack_from("<HH", elf, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", elf, header_offset + i * header_size)
                    for i in range(header_count)]
        entries = []
        for _, kind, _, _, offset, size, symbols_index, *_ in sections:
            if kind != _SHT_RELA:
                continue
            _, _, _, _, symbols_offset, symbols_size, strings_index, *_ = sections[symbols_index]
            strings_offset, strings_size = sections[strings_index][4:6]
            found = elf.find(b"\0" + symbol + b"\0", strings_offset, strings_offset + strings_size)
            if found < 0:
                continue
            relocations = np.frombuffer(elf[offset:offset + size], dtype="<u8").reshape(-1, 3)
            symbol_type = np.dtype([("name", "<u4"), ("rest", "V20")])   # Elf64_Sym
            symbol_names = np.frombuffer(elf[symbols_offset:symbols_offset + symbols_size],
                                         dtype=symbol_type)["name"]
            symbol_of = (relocations[:, 1] >> np.uint64(32)).astype(np.int64)
            is_symbol = symbol_names[symbol_of] == found + 1 - strings_offset
            entries += [int(address) for address in relocations[is_symbol, 0]]
        return entries


def listen_addresses(port: int) -> list:
    """The local addresses of every TCP socket listening on `port`, as /proc/net shows them."""
    addresses = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        if not os.path.exists(table):
            continue
        with open(table) as rows:
            for row in list(rows)[1:]:
                local, _, state = row.split()[1:4]
                host, hex_port = local.split(":")
                if state == _TCP_LISTEN and int(hex_port, 16) == port:
                    # /proc writes each 32-bit word of the address in host byte order
                    packed = b"".join(struct.pack("=I", int(host[i:i + 8], 16))
                                      for i in range(0, len(host), 8))
                    addresses.append(socket.inet_ntop(family, packed))
    return addresses


def is_loopback(address: str) -> bool:
    return address.startswith(("127.", "::ffff:127.")) or address == "::1"


def port_is_taken(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def serve(cluster: dict, task: int, parent_pid: int, op_threads: int = OP_THREADS) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # heavy: loaded on first use, not with the package

    port = int(cluster["worker"][task].rsplit(":", 1)[1])
    _LoopbackBind().install()
    threads = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1,
                                       inter_op_parallelism_threads=op_threads)
    try:
        server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name="worker",
                                      task_index=task, config=threads, start=True)
    except tf.errors.OpError as error:
        if port_is_taken(port):
            print(f"port {port} is taken", file=sys.stderr, flush=True)
            sys.exit(EXIT_PORT_TAKEN)
        raise SystemExit(f"could not start the TensorFlow server: {error.message}")
    exposed = [a for a in listen_addresses(port) if not is_loopback(a)]
    if exposed:
        raise SystemExit(f"refusing to serve: port {port} listens on {', '.join(exposed)}, "
                         "not only on loopback")
    os.write(1, f"{READY_LINE} {server.target}\n".encode())   # one write: print() makes two
    os.dup2(2, 1)   # nobody reads stdout after the ready line; a full pipe would block
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_S)
    os._exit(0)   # TensorFlow has no clean server shutdown; the kernel frees the port


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", required=True,
                        help='JSON: {"worker": ["127.0.0.1:PORT", ...]}')
    parser.add_argument("--task", type=int, required=True)
    parser.add_argument("--core", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--op-threads", type=int, default=OP_THREADS)
    args = parser.parse_args(argv)
    die_with_parent(args.parent_pid)
    os.sched_setaffinity(0, {args.core})
    serve(json.loads(args.cluster), args.task, args.parent_pid, args.op_threads)


if __name__ == "__main__":
    main()

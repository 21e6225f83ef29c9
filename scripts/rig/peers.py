#!/usr/bin/env python3
"""Independent readers to run beside supercell on the same files, in the same run.

  peers.py raw    [--direct] [--threads N] [--chunk-mib M] [--span-mib S] [--cold] FILE...
      storage -> host memory: plain preadv calls from N threads (O_DIRECT with --direct),
      each thread taking the next chunk of the next file; a simple reader, well below fio.
      --span-mib: each thread's destination moves through S MiB of its own memory, chunk
      after chunk (default: one chunk, reused, as fio reuses its iodepth x bs buffers). A
      reader that lands frames in memory writes GBs that are not in any cache; on storage
      that is itself memory (the RAM lanes) the two differ, and this shows by how much.
  peers.py kvikio [--threads N] [--task-mib M] [--cold] FILE...
      storage -> GPU memory through KvikIO, the library a user would otherwise pick
      (cuFile where it works, its own POSIX thread pool otherwise; KVIKIO_COMPAT_MODE
      chooses). Needs kvikio and cupy: pip install kvikio-cu12 cupy-cuda12x (CUDA 12) or
      kvikio-cu13 cupy-cuda13x (CUDA 13).

Each prints one line: 'peer=NAME threads=N bytes=B seconds=S GBps=X' (GB = 10^9 bytes).
--cold drops the page cache first (root only). Exit status 3: the peer cannot run here.
"""

import argparse
import mmap
import os
import sys
import threading
import time

PAGE = 4096


def drop_page_cache():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        sys.exit(f"--cold: cannot drop the page cache ({e}); run as root")


def chunks(files, chunk):
    """(path, offset, length) for every chunk of every file, files interleaved so that
    threads spread over them."""
    per_file = []
    for p in files:
        size = os.path.getsize(p)
        per_file.append([(p, off, min(chunk, size - off)) for off in range(0, size, chunk)])
    out = []
    for i in range(max((len(c) for c in per_file), default=0)):
        out.extend(c[i] for c in per_file if i < len(c))
    return out


def raw_reader(args):
    chunk = args.chunk_mib << 20
    work = chunks(args.files, chunk)
    flags = os.O_RDONLY | (os.O_DIRECT if args.direct else 0)
    next_job = [0]
    total = [0]
    lock = threading.Lock()
    errors = []

    span = max(args.span_mib << 20, chunk) // chunk * chunk

    def destination():
        # An anonymous mapping is page-aligned, as O_DIRECT needs; touched before the clock
        # starts, as supercell's slots are, so that no page fault is timed.
        buf = mmap.mmap(-1, span)
        for at in range(0, span, PAGE):
            buf[at] = 1
        return buf

    def reader(buf):
        view = memoryview(buf)
        base = 0
        fds = {}
        done = 0
        try:
            while True:
                with lock:
                    k = next_job[0]
                    next_job[0] += 1
                if k >= len(work):
                    break
                path, off, length = work[k]
                fd = fds.get(path)
                if fd is None:
                    fd = fds[path] = os.open(path, flags)
                got = 0
                while got < length:
                    # O_DIRECT lengths must be page multiples: ask for whole pages, count
                    # what the file holds.
                    want = length - got
                    if args.direct:
                        want = (want + PAGE - 1) // PAGE * PAGE
                    n = os.preadv(fd, [view[base + got : base + got + want]], off + got)
                    if n <= 0:
                        break
                    got += n
                done += min(got, length)
                base = (base + chunk) % span
        except OSError as e:
            errors.append(e)
        finally:
            for fd in fds.values():
                os.close(fd)
            view.release()
        with lock:
            total[0] += done

    if args.cold:
        drop_page_cache()
    buffers = [destination() for _ in range(args.threads)]
    threads = [threading.Thread(target=reader, args=(b,)) for b in buffers]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    if errors:
        sys.exit(f"peer=raw failed: {errors[0]}")
    name = "raw-direct" if args.direct else "raw"
    print(
        f"peer={name} threads={args.threads} span_mib={max(args.span_mib, args.chunk_mib)} "
        f"bytes={total[0]} seconds={seconds:.3f} "
        f"GBps={total[0] / seconds / 1e9:.2f}"
    )


def kvikio_reader(args):
    try:
        import cupy
        import kvikio
        import kvikio.defaults
    except ImportError as e:
        print(
            f"peer=kvikio unavailable: {e} (pip install kvikio-cu12 cupy-cuda12x, or the -cu13 / cuda13x wheels)",
            file=sys.stderr,
        )
        sys.exit(3)
    kvikio.defaults.set({"num_threads": args.threads, "task_size": args.task_mib << 20})
    buffers = [cupy.empty(os.path.getsize(p), dtype=cupy.uint8) for p in args.files]
    if args.cold:
        drop_page_cache()
    files = [kvikio.CuFile(p, "r") for p in args.files]
    start = time.perf_counter()
    pending = [f.pread(b) for f, b in zip(files, buffers)]
    n = sum(p.get() for p in pending)
    cupy.cuda.runtime.deviceSynchronize()
    seconds = time.perf_counter() - start
    for f in files:
        f.close()
    mode = getattr(kvikio.defaults, "compat_mode", lambda: "unknown")()
    print(
        f"peer=kvikio threads={args.threads} compat_mode={mode} bytes={n} "
        f"seconds={seconds:.3f} GBps={n / seconds / 1e9:.2f}"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="peer", required=True)
    raw = sub.add_parser("raw", help="preadv from threads into host memory")
    raw.add_argument("--direct", action="store_true", help="O_DIRECT (bypass the page cache)")
    raw.add_argument("--threads", type=int, default=8)
    raw.add_argument("--chunk-mib", type=int, default=16)
    raw.add_argument("--span-mib", type=int, default=0, help="destination per thread (default: one chunk)")
    raw.add_argument("--cold", action="store_true", help="drop the page cache first (root)")
    raw.add_argument("files", nargs="+")
    kv = sub.add_parser("kvikio", help="KvikIO into GPU memory")
    kv.add_argument("--threads", type=int, default=8)
    kv.add_argument("--task-mib", type=int, default=4)
    kv.add_argument("--cold", action="store_true", help="drop the page cache first (root)")
    kv.add_argument("files", nargs="+")
    args = ap.parse_args()
    if args.threads < 1:
        ap.error("--threads must be at least 1")
    (raw_reader if args.peer == "raw" else kvikio_reader)(args)


if __name__ == "__main__":
    main()

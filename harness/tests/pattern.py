#!/usr/bin/env python3
"""Host side of harness/guest-tools/mmapio.c's pattern.

    pattern.py write FILE SIZE SEED
    pattern.py check FILE SEED SIZE

check fails unless FILE holds exactly SIZE bytes of SEED's pattern: a
short or empty file is as wrong as a wrong byte.
"""
import sys


def pattern(size, seed):
    out = bytearray(size)
    for i in range(size):
        out[i] = (i * 31 + seed + (i >> 12)) & 0xff
    return bytes(out)


def main():
    op, path = sys.argv[1], sys.argv[2]
    if op == "write":
        size, seed = int(sys.argv[3], 0), int(sys.argv[4])
        with open(path, "wb") as f:
            f.write(pattern(size, seed))
        return 0
    seed, size = int(sys.argv[3]), int(sys.argv[4], 0)
    with open(path, "rb") as f:
        data = f.read()
    if len(data) != size:
        print(f"{path}: {len(data)} bytes, want {size}")
        return 1
    want = pattern(size, seed)
    if data != want:
        i = next(i for i in range(len(data)) if data[i] != want[i])
        print(f"{path}: byte {i} is {data[i]}, want {want[i]}")
        return 1
    print(f"{path}: {len(data)} bytes ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Where a stripped Go server (Debian's etcd) spends its CPU, from `perf record -g`.

perf cannot name the functions of a stripped Go binary, but every Go binary keeps its
function table in the .gopclntab section for its own stack traces. This reads that
table (the Go 1.18-1.19 layout, magic 0xfffffff0, which Debian bookworm's etcd 3.4
has) and tallies the samples of one command: self and inclusive, by function.

usage: perf record -a -g -F 999 -o perf.data -- sleep 5   (while the bench runs)
       bench/go_perf_symbols.py perf.data [--comm etcd] [--binary /usr/bin/etcd] [--top 40]
"""
import argparse
import bisect
import collections
import struct
import subprocess


def function_table(binary):
    """(entry addresses, names), sorted, from the binary's .gopclntab."""
    sections = subprocess.check_output(['readelf', '-SW', binary], text=True)
    for line in sections.splitlines():
        if '.gopclntab' in line:
            fields = line.split(']')[1].split()
            offset, size = int(fields[3], 16), int(fields[4], 16)
            break
    else:
        raise SystemExit(f'{binary}: no .gopclntab section')
    with open(binary, 'rb') as f:
        f.seek(offset)
        data = f.read(size)
    magic, ptr = struct.unpack_from('<I', data, 0)[0], data[7]
    if magic != 0xfffffff0 or ptr != 8:
        raise SystemExit(f'{binary}: pclntab magic {magic:#x} (only Go 1.18-1.19 is read)')
    # pcHeader: magic, pad, minLC, ptrSize, nfunc, nfiles, textStart, funcnameOffset,
    # cuOffset, filetabOffset, pctabOffset, pclnOffset.
    nfunc, _, text_start, funcname_off = struct.unpack_from('<QQQQ', data, 8)
    pcln_off = struct.unpack_from('<Q', data, 8 + 7 * ptr)[0]
    entries, names = [], []
    for i in range(nfunc):
        entry, func_off = struct.unpack_from('<II', data, pcln_off + i * 8)
        name_off = struct.unpack_from('<i', data, pcln_off + func_off + 4)[0]
        start = funcname_off + name_off
        entries.append(text_start + entry)
        names.append(data[start:data.index(b'\0', start)].decode(errors='replace'))
    return entries, names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('perf_data')
    ap.add_argument('--comm', default='etcd')
    ap.add_argument('--binary', default='/usr/bin/etcd')
    ap.add_argument('--load-base', type=lambda s: int(s, 0), default=0x400000,
                    help='where the binary is loaded (perf script prints file offsets)')
    ap.add_argument('--top', type=int, default=40)
    args = ap.parse_args()
    entries, names = function_table(args.binary)

    def name(ip, dso):
        if dso.endswith(args.binary + ')'):
            i = bisect.bisect_right(entries, ip + args.load_base) - 1
            return names[i] if i >= 0 else '?'
        return '[kernel]' if 'kallsyms' in dso else '[' + dso.strip('()').split('/')[-1] + ']'

    own, within, total = collections.Counter(), collections.Counter(), 0
    script = subprocess.Popen(['perf', 'script', '-i', args.perf_data, '--comm', args.comm,
                               '-F', 'ip,dso'], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    frames = []
    for line in list(script.stdout) + ['']:
        fields = line.split()
        if fields:
            frames.append(name(int(fields[0], 16), fields[-1]))
            continue
        if frames:
            total += 1
            own[frames[0]] += 1
            within.update(set(frames))
            frames = []
    print(f'{total} samples of {args.comm}')
    for title, counts in (('self', own), ('inclusive', within)):
        print(f'--- {title}')
        for fn, n in counts.most_common(args.top):
            print(f'{100 * n / total:5.1f}% {fn}')


if __name__ == '__main__':
    main()

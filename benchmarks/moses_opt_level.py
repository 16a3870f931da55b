"""What CI's -O1 Moses build (moses_ff/build-moses.sh -O1, issue 45) saves and costs against
the release -O3 build: compile seconds on a sample of the build's own compile commands, and
decode seconds on the same input with identical output.

Compiling: bjam's dry run (`-n -a -d2`) in the -O1 tree lists the exact g++ commands of the
targets CI builds (the release ones: the -O1 build appends -O1 to each through a g++ wrapper);
every k-th is run twice, as it is and with -O1 appended, alternating, so that load on a shared
machine hits both alike. Decoding: both trees' decoder runs on the same ini and input,
alternating, and the outputs must be identical (the two builds compute the same floating
point; only the speed may differ).

    python3 benchmarks/moses_opt_level.py --o3 RELEASE --o1 FAST --sample 16 \
        --ini WORK/ini/lexical-dl12.test.ini --input WORK/corpus/test.ja --sentences 100

RELEASE and FAST are the trees build-moses.sh prints without and with -O1 (FAST is
CACHE/moses-<hash>-O1/<top>). It builds nothing and writes only into a temporary folder. It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import shlex
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

BUILD_SCRIPT = Path(__file__).resolve().parents[1] / "moses_ff" / "build-moses.sh"
COMPILE = re.compile(r'^\s*"g\+\+"\s.*\s-c -o "([^"]+)" "([^"]+)"\s*$')


def ci_targets() -> list[str]:
    """The bjam targets CI builds, as build-moses.sh --ci lists them (its CI_TARGETS)."""
    found = re.search(r'^CI_TARGETS="([^"]*)"', BUILD_SCRIPT.read_text(), re.MULTILINE)
    if not found:
        raise SystemExit(f"{BUILD_SCRIPT}: no CI_TARGETS=\"...\" line")
    return found.group(1).split()


def compile_commands(tree: Path, targets: list[str]) -> list[str]:
    """bjam's own compile commands for TARGETS in TREE: the release build's, at -O3."""
    out = subprocess.run(["./bjam", "-n", "-a", "-d2", "--with-boost=/usr", "--no-xmlrpc-c", *targets],
                         cwd=tree, capture_output=True, text=True, check=False).stdout
    return [line.strip() for line in out.splitlines() if COMPILE.match(line)]


def timed(cmd: list[str], cwd: Path, stdin: Path | None = None, stdout: Path | None = None) -> float:
    started = time.perf_counter()
    with open(stdin or "/dev/null", "rb") as fin, open(stdout or "/dev/null", "wb") as fout:
        subprocess.run(cmd, cwd=cwd, stdin=fin, stdout=fout, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def compile_sample(o1_tree: Path, sample: int) -> None:
    commands = compile_commands(o1_tree, ci_targets())
    if not commands:
        raise SystemExit(f"{o1_tree}: bjam's dry run listed no g++ compile command")
    step = max(1, len(commands) // sample)
    picked = commands[::step][:sample]
    secs = {"-O3": [], "-O1": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i, line in enumerate(picked):
            argv = shlex.split(line)
            out = argv.index("-o") + 1
            argv[out] = str(Path(tmp) / f"{i}.o")
            o1 = [*argv, "-O1"]                            # what the -O1 build's g++ wrapper runs
            for label, cmd in (("-O3", argv), ("-O1", o1)) if i % 2 == 0 else (("-O1", o1), ("-O3", argv)):
                secs[label].append(timed(cmd, o1_tree))
    o3, o1 = sum(secs["-O3"]), sum(secs["-O1"])
    print(f"compile: {len(picked)} of the {len(commands)} compile commands of CI's targets, each at both levels")
    print(f"  -O3 {o3:.1f} s, -O1 {o1:.1f} s: -O1 takes {o1 / o3:.2f}x the time of -O3")


def decode(o3_tree: Path, o1_tree: Path, ini: Path, source: Path, sentences: int, repeat: int,
           binaries: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "input"
        with open(source, encoding="utf-8") as f:
            src.write_text("".join(line for _, line in zip(range(sentences), f)), encoding="utf-8")
        for binary in binaries:
            secs = {"-O3": [], "-O1": []}
            outs = {}
            for r in range(repeat):
                order = (("-O3", o3_tree), ("-O1", o1_tree)) if r % 2 == 0 else (("-O1", o1_tree), ("-O3", o3_tree))
                for label, tree in order:
                    out = Path(tmp) / f"{binary}{label}.out"
                    secs[label].append(timed([str(tree / "bin" / binary), "-f", str(ini), "-threads", "1"],
                                             Path(tmp), stdin=src, stdout=out))
                    outs[label] = out.read_bytes()
            o3, o1 = statistics.median(secs["-O3"]), statistics.median(secs["-O1"])
            print(f"decode {binary}: {sentences} sentences, median of {repeat}: -O3 {o3 / sentences:.3f} s/sent, "
                  f"-O1 {o1 / sentences:.3f} s/sent: {o1 / o3:.2f}x; identical output: {outs['-O3'] == outs['-O1']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--o3", type=Path, required=True, help="the release build's tree")
    ap.add_argument("--o1", type=Path, required=True, help="the -O1 build's tree")
    ap.add_argument("--sample", type=int, default=16, help="compile commands to time (0: none)")
    ap.add_argument("--ini", type=Path, help="a moses.ini both decoders can load (whole-process time is timed)")
    ap.add_argument("--input", type=Path)
    ap.add_argument("--sentences", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--binaries", nargs="+", default=["moses2", "moses"])
    args = ap.parse_args()
    if args.sample:
        compile_sample(args.o1.resolve(), args.sample)
    if args.ini:
        binaries = [b for b in args.binaries if (args.o3 / "bin" / b).exists() and (args.o1 / "bin" / b).exists()]
        decode(args.o3.resolve(), args.o1.resolve(), args.ini.resolve(), args.input, args.sentences,
               args.repeat, binaries)


if __name__ == "__main__":
    main()

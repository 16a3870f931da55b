#!/bin/sh
# Build Moses with ExternalReordering from a source tarball, into a cache folder that later
# runs reuse: the tests' MOSES_DIR and CI's build are made by this one command.
#
#   moses_ff/build-moses.sh [-O1 | --O1-if-new] [--all | --ci] TARBALL [CACHE]
#
# TARBALL  a Moses source tarball (e.g. ../shared/moses/mosesdecoder-3445289.tar.xz).
# CACHE    where build trees are kept (default ${MOSES_REORDER_CACHE:-$HOME/.cache/moses-reorder}).
#          The tree is CACHE/moses-<first 16 hex digits of the tarball's sha256>/<top folder>,
#          so another tarball gets another tree and an unchanged one is built only once.
# --all    build the whole Moses tree (~30 min on 2 cores) instead of the programs the tests
#          and benchmarks/translation.py run (the default; TARGETS below).
# --ci     build what CI has time for (CI_TARGETS: moses2, KenLM and the tuners, about 260 of
#          the default's 570 compilations): the moses decoder alone is 337 of them.
# -O1      compile at -O1 instead of Moses's release -O3, in a tree of its own
#          (CACHE/moses-<hash>-O1), so the two never mix: a file compiles in about 0.7x the
#          time, and the decoders run more slowly (benchmarks/RESULTS.md, "CI (issue 45)").
# --O1-if-new
#          -O1 unless CACHE already holds the release tree of TARBALL, which is then built
#          on: what .ci/run passes, so a machine with no Moses build compiles the fast way
#          and one that has a release build keeps using it instead of starting another.
#
# A second run re-runs moses_ff/install.sh (which rewrites no unchanged file) and lets bjam
# rebuild only what changed, so a change to moses_ff/ or proto/ costs only its own objects.
# The tree is built in place: its bin/ holds the programs, and the last line printed is the
# tree, which is what MOSES_DIR should name. Nothing is written outside CACHE. A --ci build
# from an empty tree also writes the seconds it took to CACHE/moses-<hash>[-O1]/.ci-seconds,
# which .ci/run reads to decide whether the machine has time to build the moses decoder.
# Needs the Debian packages of the README (Boost, gRPC and protobuf dev packages, xz-utils).
set -eu

die() { echo "build-moses.sh: $*" >&2; exit 1; }

ALL=0 CI_ONLY=0 O1=0
while :; do
    case "${1:-}" in
        --all) ALL=1; shift;;
        --ci) CI_ONLY=1; shift;;
        -O1) O1=1; shift;;
        --O1-if-new) O1=new; shift;;
        *) break;;
    esac
done
[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 [-O1 | --O1-if-new] [--all | --ci] TARBALL [CACHE]"
TARBALL=$1
[ -f "$TARBALL" ] || die "no such tarball: $TARBALL"
CACHE=${2:-${MOSES_REORDER_CACHE:-$HOME/.cache/moses-reorder}}
HERE=$(cd "$(dirname "$0")" && pwd)
JOBS=${BJAM_JOBS:-$(nproc 2>/dev/null || echo 2)}

# What tests/ and benchmarks/translation.py run: the two decoders, KenLM, the tuners, and the
# phrase-table steps of train-model.perl (steps 4-9).
TARGETS="moses-cmd//moses moses2//moses2 lm/builder//lmplz lm//build_binary
mert//mert mert//extractor mert//evaluator mert//pro mert//kbmira
phrase-extract//extract phrase-extract//score phrase-extract//consolidate
phrase-extract/lexical-reordering//lexical-reordering-score"
CI_TARGETS="moses2//moses2 lm/builder//lmplz lm//build_binary
mert//mert mert//extractor mert//evaluator mert//pro mert//kbmira"
[ "$CI_ONLY" -eq 1 ] && TARGETS=$CI_TARGETS

HASH=$(sha256sum "$TARBALL" | cut -c1-16)
ROOT=$CACHE/moses-$HASH
[ "$O1" = new ] && { if [ -f "$ROOT/.unpacked" ]; then O1=0; else O1=1; fi; }
# bjam does not rebuild an object when its compiler's flags change, and the build folders it
# names by the build's properties leave them out: a -O1 build gets its own tree instead.
[ "$O1" -eq 1 ] && ROOT=$ROOT-O1
TOP=$(tar -tJf "$TARBALL" | head -n 1 | cut -d/ -f1)
[ -n "$TOP" ] || die "$TARBALL lists no top folder"
TREE=$ROOT/$TOP

STARTED=$(date +%s) FROM_NOTHING=0
if [ ! -f "$ROOT/.unpacked" ]; then
    FROM_NOTHING=1
    rm -rf "$ROOT"
    mkdir -p "$ROOT"
    tar -C "$ROOT" -xJf "$TARBALL"
    [ -f "$TREE/Jamroot" ] || die "$TARBALL does not unpack to a Moses tree ($TOP/Jamroot is missing)"
    # A git commit of the pristine sources: tests/client/test_install.py reads Moses's own
    # files from HEAD, since install.sh edits the working copies.
    git -C "$TREE" init -q
    git -C "$TREE" -c user.name=build-moses -c user.email=build-moses@localhost \
        -c core.autocrlf=false add -A
    git -C "$TREE" -c user.name=build-moses -c user.email=build-moses@localhost \
        commit -q -m "$TOP as unpacked from $(basename "$TARBALL")"
    touch "$ROOT/.unpacked"
fi

sh "$HERE/install.sh" "$TREE"

if [ "$O1" -eq 1 ]; then
    # g++ with -O1 after the release build's -O3 (the last -O wins), first on bjam's PATH.
    # Not bjam's cxxflags=-O1: a free feature on its command line took its dependency scan
    # from 3 s and 25 MB to minutes and 16 GB for these targets.
    CXX=$(command -v g++) || die "no g++ on PATH"
    mkdir -p "$ROOT/cc-O1"
    printf '#!/bin/sh\nexec %s "$@" -O1\n' "$CXX" >"$ROOT/cc-O1/g++"
    chmod +x "$ROOT/cc-O1/g++"
    PATH=$ROOT/cc-O1:$PATH
    export PATH
fi

cd "$TREE"
if [ "$ALL" -eq 1 ]; then
    ./bjam -j"$JOBS" --with-boost=/usr --no-xmlrpc-c -q
else
    # shellcheck disable=SC2086  # TARGETS is a word list on purpose
    ./bjam -j"$JOBS" --with-boost=/usr --no-xmlrpc-c -q $TARGETS
    # bjam leaves named targets in their build folders; put them in bin/ as a full build does.
    mkdir -p bin
    for t in $TARGETS; do
        name=${t##*//}
        built=$(find "${t%%//*}/bin" -type f -name "$name" -perm -u+x 2>/dev/null | head -n 1)
        [ -n "$built" ] || die "bjam built no $name under ${t%%//*}/bin"
        ln -sf "../$built" "bin/$name"
    done
fi
[ -x bin/moses2 ] || die "the build left no bin/moses2 in $TREE"
[ "$CI_ONLY" -eq 1 ] || [ -x bin/moses ] || die "the build left no bin/moses in $TREE"
# How fast this machine is, for .ci/run: the seconds a --ci build took from an empty tree
# (unpacking included), kept beside the tree. Only such a build measures it; a build that
# resumed or reused objects would say the machine is faster than it is.
if [ "$CI_ONLY" -eq 1 ] && [ "$FROM_NOTHING" -eq 1 ]; then
    echo $(( $(date +%s) - STARTED )) >"$ROOT/.ci-seconds.tmp"
    mv "$ROOT/.ci-seconds.tmp" "$ROOT/.ci-seconds"
fi
echo "$TREE"

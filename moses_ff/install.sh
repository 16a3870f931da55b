#!/bin/sh
# Install the ExternalReordering feature function into a Moses checkout: for moses and,
# when the checkout has it, for moses2.
#
#   moses_ff/install.sh MOSES_DIR
#
# moses:  copies our sources to MOSES_DIR/moses/FF/ExternalReordering/ (the feature, the
# gRPC client library and the code protoc generates from proto/), registers the feature in
# moses/FF/Factory.cpp, and teaches moses/Jamfile to build and link it (gRPC and protobuf
# flags from pkg-config).
# moses2: copies the Moses2 feature (moses_ff/moses2/) to
# MOSES_DIR/moses2/FF/ExternalReordering/, registers it in moses2/FF/FeatureRegistry.cpp
# and adds it to moses2/Jamfile, linked with the same client library (moses//reordering_client:
# one copy of the client sources, built once for both decoders).
# Idempotent: a second run changes no file (not even its timestamp), so it never forces a
# rebuild. Then rebuild Moses as usual, e.g.
#   cd MOSES_DIR && ./bjam -j4 --with-boost=/usr
# Needs: pkg-config, protoc, grpc_cpp_plugin (Debian: libgrpc++-dev libprotobuf-dev
# protobuf-compiler protobuf-compiler-grpc pkg-config).
set -eu

die() { echo "install.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 MOSES_DIR"
MOSES=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
FACTORY=$MOSES/moses/FF/Factory.cpp
JAMFILE=$MOSES/moses/Jamfile
for f in "$FACTORY" "$JAMFILE" "$MOSES/moses/FF/LexicalReordering/LexicalReordering.h"; do
    [ -f "$f" ] || die "$1 is not a Moses checkout: $f is missing"
done
HERE=$(cd "$(dirname "$0")" && pwd)
PROTO_ROOT=$HERE/../proto
for tool in pkg-config protoc grpc_cpp_plugin; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (Debian: protobuf-compiler protobuf-compiler-grpc pkg-config)"
done
pkg-config --exists grpc++ protobuf || die "pkg-config knows no grpc++/protobuf (Debian: libgrpc++-dev libprotobuf-dev)"

DEST=$MOSES/moses/FF/ExternalReordering
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# Copy $1 to $2 only when the content differs (keeps timestamps: no needless rebuild).
put() {
    mkdir -p "$(dirname "$2")"
    if ! cmp -s "$1" "$2"; then
        cp "$1" "$2.tmp.$$" && mv "$2.tmp.$$" "$2"
        echo "installed $2"
    fi
}

# 1. Sources. The *.cpp glob of moses/Jamfile picks up ExternalReordering.cpp (built with
#    Moses's flags); the client (*.cc, C++17) is a separate library target below.
put "$HERE/moses/ExternalReordering.h" "$DEST/ExternalReordering.h"
put "$HERE/moses/ExternalReordering.cpp" "$DEST/ExternalReordering.cpp"
put "$HERE/moses/ReorderingType.h" "$DEST/ReorderingType.h"
put "$HERE/client/reordering_client.h" "$DEST/reordering_client.h"
put "$HERE/client/reordering_client.cc" "$DEST/client/reordering_client.cc"
put "$HERE/client/feature_options.h" "$DEST/feature_options.h"
put "$HERE/client/feature_options.cc" "$DEST/client/feature_options.cc"
put "$HERE/client/sentence_scorer.h" "$DEST/sentence_scorer.h"
put "$HERE/client/sentence_scorer.cc" "$DEST/client/sentence_scorer.cc"
protoc -I "$PROTO_ROOT" --cpp_out "$TMP" --grpc_out "$TMP" \
    --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" "$PROTO_ROOT/reordering/v1/reordering.proto"
for f in reordering.pb.h reordering.pb.cc reordering.grpc.pb.h reordering.grpc.pb.cc; do
    put "$TMP/reordering/v1/$f" "$DEST/client/gen/reordering/v1/$f"
done

# Apply a sed edit to a file only if `marker` is absent; write through a temp copy.
edit() {  # edit FILE MARKER SED_SCRIPT
    grep -qF "$2" "$1" && return 0
    sed "$3" "$1" > "$TMP/edit" || die "editing $1 failed"
    grep -qF "$2" "$TMP/edit" || die "could not find where to edit $1 (Moses layout changed?)"
    cp -p "$1" "$1.tmp.$$" && cat "$TMP/edit" > "$1.tmp.$$" && mv "$1.tmp.$$" "$1"
    echo "edited $1"
}

# 2. Factory.cpp: include the header and register the class by name.
edit "$FACTORY" '#include "moses/FF/ExternalReordering/ExternalReordering.h"' \
    '/#include "moses\/FF\/LexicalReordering\/LexicalReordering.h"/a\
#include "moses/FF/ExternalReordering/ExternalReordering.h"'
edit "$FACTORY" 'MOSES_FNAME(ExternalReordering);' \
    '/MOSES_FNAME(LexicalReordering);/a\
  MOSES_FNAME(ExternalReordering);'

# 3. moses/Jamfile: the client library (its own -std and gRPC link flags), the feature's
#    directory in the glob of lib moses, and the client as a source of lib moses.
edit "$JAMFILE" '# moses-reorder: ExternalReordering client' \
    '/^lib moses :/i\
# moses-reorder: ExternalReordering client (added by moses_ff/install.sh)\
local reordering-grpc = [ SHELL "pkg-config --libs grpc++ protobuf" : strip-eol ] ;\
lib reordering_client :\
  [ glob FF/ExternalReordering/client/*.cc FF/ExternalReordering/client/gen/reordering/v1/*.cc ]\
  : <cxxflags>-std=c++17 <include>FF/ExternalReordering <include>FF/ExternalReordering/client/gen <link>static\
  : : <linkflags>$(reordering-grpc) ;\
'
edit "$JAMFILE" 'FF/ExternalReordering/*.cpp' \
    's|^\( *\)FF/LexicalReordering/\*\.cpp$|&\
\1FF/ExternalReordering/*.cpp|'
edit "$JAMFILE" 'FF_Factory.o reordering_client' \
    's|^FF_Factory\.o *$|FF_Factory.o reordering_client|'

# 4. moses2 (a checkout without moses2/ gets the moses part only).
REGISTRY=$MOSES/moses2/FF/FeatureRegistry.cpp
JAMFILE2=$MOSES/moses2/Jamfile
if [ -f "$REGISTRY" ] && [ -f "$JAMFILE2" ] && [ -f "$MOSES/moses2/FF/LexicalReordering/LexicalReordering.h" ]; then
    DEST2=$MOSES/moses2/FF/ExternalReordering
    put "$HERE/moses2/ExternalReordering.h" "$DEST2/ExternalReordering.h"
    put "$HERE/moses2/ExternalReordering.cpp" "$DEST2/ExternalReordering.cpp"
    # headers only: the client library itself is moses//reordering_client (step 3)
    put "$HERE/moses/ReorderingType.h" "$DEST2/ReorderingType.h"
    put "$HERE/client/reordering_client.h" "$DEST2/reordering_client.h"
    put "$HERE/client/feature_options.h" "$DEST2/feature_options.h"
    put "$HERE/client/sentence_scorer.h" "$DEST2/sentence_scorer.h"
    edit "$REGISTRY" '#include "ExternalReordering/ExternalReordering.h"' \
        '/#include "LexicalReordering\/LexicalReordering.h"/a\
#include "ExternalReordering/ExternalReordering.h"'
    edit "$REGISTRY" 'MOSES_FNAME(ExternalReordering);' \
        '/MOSES_FNAME(LexicalReordering);/a\
  MOSES_FNAME(ExternalReordering);'
    edit "$JAMFILE2" 'FF/ExternalReordering/ExternalReordering.cpp' \
        's|^\( *\)FF/LexicalReordering/ReorderingStack\.cpp *$|&\
\1FF/ExternalReordering/ExternalReordering.cpp ../moses//reordering_client|'
    echo "ExternalReordering is installed in $MOSES for moses and moses2; rebuild Moses (./bjam --with-boost=... as before)."
else
    echo "ExternalReordering is installed in $MOSES for moses (no moses2/ with FeatureRegistry.cpp there); rebuild Moses (./bjam --with-boost=... as before)."
fi

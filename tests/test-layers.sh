#!/bin/sh
# The layering of docs/architecture.md, read from the built objects: src/core includes
# no engine header; within libspsim, no file and no folder of src/core calls into one
# that calls it back (nm: A -> B when A uses a symbol B defines; tsort finds loops);
# no subcommand of the CLI calls into main.c.
build="${SPSIM_BUILDDIR:-.}"
src="${SPSIM_SRCDIR:-.}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
echo "1..4"

# 1: engines stay out of the library
if grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](simgrid|mpi|cuda|nccl)' "$src/src/core" >"$tmp/eng"; then
  nok "src/core includes an engine header: $(tr '\n' ' ' <"$tmp/eng")"
else ok "src/core includes no SimGrid, MPI, CUDA or NCCL header"; fi

# edges DIR PREFIX: "FOLDER/UNIT FOLDER/UNIT" per use of a symbol defined in another
# object of DIR (objects named PREFIXUNIT.o). One copy of each object (libtool may
# build two), and only objects whose UNIT.c still exists: a build tree keeps the
# objects of files that have moved.
edges() {
  find "$build/$1" -name "$2*.o" | sort | awk '{ k = $0; sub(/\/\.libs\//, "/", k); if (!(k in seen)) { seen[k] = 1; print } }' >"$tmp/objs"
  [ -s "$tmp/objs" ] || return 1
  : >"$tmp/syms"
  while read -r o; do
    d=${o%/*}; d=${d%/.libs}; unit="${d#"$build/$1"}/$(basename "$o" .o)"; unit=${unit#/}
    unit=$(printf '%s' "$unit" | sed "s|$2||")
    [ -f "$src/$1/$unit.c" ] || continue
    nm -P "$o" | awk -v u="$unit" '$2 ~ /^[TDBRCV]$/ { print "D", $1, u } $2 == "U" { print "U", $1, u }' >>"$tmp/syms"
  done <"$tmp/objs"
  awk '$1 == "D" { def[$2] = $3; next } { use[NR] = $3 " " $2 }
       END { for (i in use) { split(use[i], p, " "); if ((p[2] in def) && def[p[2]] != p[1]) print p[1], def[p[2]] } }' \
    "$tmp/syms" | sort -u
}

# 2-3: libspsim's files and folders call down only
if edges src/core libspsim_la- >"$tmp/files" && [ -s "$tmp/files" ]; then
  if tsort "$tmp/files" >/dev/null 2>"$tmp/err"; then ok "no call cycle between the files of src/core ($(wc -l <"$tmp/files") edges)"
  else nok "call cycle between files of src/core: $(tr '\n' ' ' <"$tmp/err")"; fi
  awk '{ split($1, a, "/"); split($2, b, "/"); if (a[1] != b[1]) print a[1], b[1] }' "$tmp/files" | sort -u >"$tmp/folders"
  if tsort "$tmp/folders" >/dev/null 2>"$tmp/err"; then ok "no call cycle between the folders of src/core: $(sed 's/ /->/' "$tmp/folders" | tr '\n' ' ' | sed 's/ $//')"
  else nok "call cycle between folders of src/core: $(tr '\n' ' ' <"$tmp/err")"; fi
else skip "no objects of libspsim under $build/src/core"; skip "no objects of libspsim"; fi

# 4: subcommands share helpers through cli_util.c, never through main.c
if edges src/cli spsim- >"$tmp/cli"; then
  if grep -q ' main$' "$tmp/cli"; then nok "a subcommand calls into main.c: $(grep ' main$' "$tmp/cli" | tr '\n' ' ')"
  else ok "no subcommand of src/cli calls into main.c"; fi
else skip "no objects of spsim under $build/src/cli"; fi

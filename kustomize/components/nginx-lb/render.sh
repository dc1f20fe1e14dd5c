#!/bin/sh
# render.sh TEMPLATE KNOBFILE...  -> the nginx.conf on stdout.
# Knob files are KEY=VALUE lines (the .env format a kustomize configMapGenerator reads); a
# later file overrides an earlier one. POSIX sh + awk only: it also runs inside a minimal
# Debian nginx image. Comment lines are not rendered. A ${KNOB} without a definition is an error, so a typo cannot pass.
# A line rendered to "@EACH N@ TEXT" is TEXT N times, @I@ in it 1 to N (bench:routes' routes).
set -eu
[ $# -ge 2 ] || { echo "usage: render.sh TEMPLATE KNOBFILE..." >&2; exit 2; }
tmpl=$1; shift
awk '
  FNR == 1 { fileno++ }
  fileno < last && /^[A-Za-z_][A-Za-z0-9_]*=/ {
    i = index($0, "="); knob[substr($0, 1, i - 1)] = substr($0, i + 1); next
  }
  fileno < last { next }
  /^[ \t]*#/ { print; next }   # comments are copied as they are, knobs and all
  {
    line = $0; out = ""; drop = 0
    while (match(line, /\$\{[A-Za-z_][A-Za-z0-9_]*\}/)) {
      name = substr(line, RSTART + 2, RLENGTH - 3)
      if (!(name in knob)) { printf "render.sh: knob %s is not defined in any knob file\n", name > "/dev/stderr"; bad = 1; exit 1 }
      if (knob[name] == "") drop = 1
      out = out substr(line, 1, RSTART - 1) knob[name]
      line = substr(line, RSTART + RLENGTH)
    }
    out = out line
    if (drop) next
    if (match(out, /^[ \t]*@EACH [0-9]+@ /)) {
      head = substr(out, 1, RLENGTH); n = head; sub(/^[ \t]*@EACH /, "", n); sub(/@ $/, "", n)
      indent = head; sub(/@EACH.*/, "", indent); text = substr(out, RLENGTH + 1)
      for (i = 1; i <= n + 0; i++) { l = text; gsub(/@I@/, i, l); print indent l }
      next
    }
    print out
  }
' last=$(($# + 1)) "$@" "$tmpl"

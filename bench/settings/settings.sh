# The settings registry as the shell sees it: bench/settings/settings.tsv, generated from
# bench/settings/settings.yaml (bench/settings/generate.py). Sourced by bench/lib.sh; no side
# effects.
IB_SETTINGS_TSV=$IB_ROOT/bench/settings/settings.tsv

# setting_names [REACH]: the user settings' names (those reaching REACH if given), one a line.
setting_names() {
  awk -F'\t' -v r="${1:-}" '!/^#/ && $2 != "internal" && (r == "" || index("," $2 ",", "," r ",")) {print $1}' "$IB_SETTINGS_TSV"
}

# setting_values NAME: an enum setting's values, separated by spaces.
setting_values() { awk -F'\t' -v n="$1" '$1 == n {print $4}' "$IB_SETTINGS_TSV"; }

# duration_ms TEXT: a k6 duration (30s, 1m30s, 1500ms, 2h) in milliseconds; exit 1 on
# anything else. The one parser of bash; k6/lib/settings.js durationMs and bench/run/cases.py
# duration_s are the others, and ci/tests/test_settings.py holds all three to one table.
duration_ms() {
  awk -v d="$1" 'BEGIN { if (d !~ /^([0-9]+(ms|s|m|h))+$/) exit 1; t = 0
    while (match(d, /^[0-9]+(ms|s|m|h)/)) { n = substr(d, 1, RLENGTH); d = substr(d, RLENGTH + 1); v = n + 0; u = n; sub(/^[0-9]+/, "", u)
      t += v * ((u == "ms") ? 1 : (u == "s") ? 1000 : (u == "m") ? 60000 : 3600000) }
    printf "%d\n", t }'
}

# setting_default NAME: the registry's default of NAME (empty: none, or decided at run time).
setting_default() { awk -F'\t' -v n="$1" '$1 == n {print $3}' "$IB_SETTINGS_TSV"; }

# setting NAME [ENTRY]: NAME's value from the environment, else the entry point ENTRY's own
# default (the registry's `defaults`), else the registry's default; checked by its type with
# k6/lib/settings.js check()'s words (enum, list, duration, flag (printed 1 or 0), int and its
# range, number, cpu and cpus, text by its pattern as bash reads it). Dies with one line on a
# bad one.
setting() {
  local row v type values def own range rule ere w
  row=$(awk -F'\t' -v n="$1" '$1 == n && $2 != "internal"' "$IB_SETTINGS_TSV")
  [ -n "$row" ] || die "$1 is not a setting of the registry (bench/settings/settings.yaml)"
  # (a tab is blank to read, so empty fields would merge: split on another byte)
  IFS=$'\x1f' read -r _ _ def values type own range rule ere <<<"${row//$'\t'/$'\x1f'}"
  own=$(tr ',' '\n' <<<"$own" | awk -F= -v e="${2:-}" 'e != "" && $1 == e {sub(/^[^=]*=/, ""); print; exit}')
  v=${!1:-${own:-$def}}
  [ -n "$v" ] || { echo; return 0; }
  case $type in
    enum) [[ " $values " == *" $v "* ]] || die "unknown $1 '$v' (known: ${values// /, })" ;;
    list) for w in $v; do [[ " $values " == *" $w "* ]] || die "unknown $1 '$w' (known: ${values// /, })"; done ;;
    duration) duration_ms "$v" >/dev/null || die "$1 must look like 30s, 3m or 1m30s, got '$v'" ;;
    flag) case $v in 1 | true) v=1 ;; 0 | false) v=0 ;; *) die "$1 must be 1/true or 0/false, got '$v'" ;; esac ;;
    int)
      [[ $v =~ ^[0-9]+$ ]] || die "$1 must be a whole number, got '$v'"
      [ -z "${range%%..*}" ] || [ "$((10#$v))" -ge "${range%%..*}" ] || die "$1 must be at least ${range%%..*}, got $((10#$v))"
      [ -z "${range##*..}" ] || [ "$((10#$v))" -le "${range##*..}" ] || die "$1 must be at most ${range##*..}, got $((10#$v))" ;;
    number) [[ $v =~ ^[0-9]*\.?[0-9]+([eE]-?[0-9]+)?$ ]] || die "$1 must be a number, got '$v'" ;;
    cpu) [[ " $values " == *" $v "* ]] || is_cpu_quantity "$v" || die "$1 must be $rule, got '$v'" ;;
    cpus) # (no empty amount at either end, as k6's split on [ ,]+ would find)
      [[ $v != ,* && $v != *, ]] || die "$1 must be $rule, got '$v'"
      for w in ${v//,/ }; do is_cpu_quantity "$w" || die "$1 must be $rule, got '$v'"; done ;;
    text) [ -z "$ere" ] || [[ $v =~ $ere ]] || die "$1 must be $rule, got '$v'" ;;
  esac
  echo "$v"
}

# setting_closest NAME: the user setting nearest to NAME (edit distance, case ignored).
setting_closest() {
  setting_names | awk -v w="$(tr '[:lower:]-' '[:upper:]_' <<<"$1")" '
    function dist(a, b,   i, j, la, lb, d, c) {
      la = length(a); lb = length(b)
      for (i = 0; i <= la; i++) d[i, 0] = i
      for (j = 0; j <= lb; j++) d[0, j] = j
      for (i = 1; i <= la; i++) for (j = 1; j <= lb; j++) {
        c = d[i-1, j-1] + (substr(a, i, 1) != substr(b, j, 1))
        if (d[i-1, j] + 1 < c) c = d[i-1, j] + 1
        if (d[i, j-1] + 1 < c) c = d[i, j-1] + 1
        d[i, j] = c
      }
      return d[la, lb]
    }
    { n = dist(w, $1); if (best == "" || n < bestn) { best = $1; bestn = n } }
    END { print best }'
}

# settings_from_args ARGS...: exports every NAME=value of a task line (before a "--") after
# checking NAME against the registry, and leaves the other arguments in TASK_ARGS. Dies on
# an unknown name, with the nearest one. go-task itself would drop a variable its Taskfile
# does not name, silently: the wrapper hands settings over as the environment instead.
settings_from_args() {
  local a name value rest=0
  TASK_ARGS=()
  for a in "$@"; do
    if [ $rest = 0 ] && [[ $a =~ ^([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]]; then
      name=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
      # A side's own (bench:compare's BASE_TARGET, bench:migrate's FROM_INGRESS_PODS, ...):
      # checked by the setting it names, by bench/run/cases.py side_settings.
      [[ $name =~ ^(BASE|HEAD|FROM|TO)_(.+)$ ]] && setting_names | grep -qx -- "${BASH_REMATCH[2]}" ||
      setting_names | grep -qx -- "$name" ||
        die "unknown setting '$name' (did you mean $(setting_closest "$name")? every setting: docs/reference/settings.md)"
      export "$name=$value"
    else
      [ "$a" != -- ] || rest=1
      TASK_ARGS+=("$a")
    fi
  done
}

# settings_must_reach WHERE REACH...: dies if a setting meant for k6 is set but reaches none
# of REACH (the paths of the entry point WHERE): it would be validated, then dropped.
settings_must_reach() {
  local where=$1 v r ok; shift
  for v in $(setting_names k6); do
    [ -n "${!v:-}" ] || continue
    ok=0; for r in "$@"; do setting_names "$r" | grep -qx -- "$v" && ok=1; done
    [ $ok = 1 ] || die "$v does not reach $where (bench/settings/settings.yaml): unset it, or run on a platform it reaches"
  done
}

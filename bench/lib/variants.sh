# Variants, overlays and scenarios: what a run names, checked before anything starts.
# Sourced by bench/lib.sh (which every script sources); no side effects beyond variables.
# Variants. VARIANT names an overlay on every platform (overlays/<name>). The lab runs plain
# NGINX only, so there it reads the overlay's tuning components' knob files; it also takes
# "default" or knob names joined by '+' (each a kustomize/components/tuning-<name>), applied in
# order over the defaults (later knobs win), for ad-hoc combinations.
IB_LB_DIR=$IB_ROOT/kustomize/components/nginx-lb
known_variants() { (cd "$IB_ROOT/kustomize/components" && ls -d tuning-*/ | sed 's|^tuning-||; s|/$||' | paste -sd' '); }
# overlay_components OVERLAY: the names of the components it lists, in order.
overlay_components() {
  sed -nE 's#^ *- *(\.\./)*kustomize/components/([a-z0-9-]+)/?$#\2#p' "$IB_ROOT/overlays/$1/kustomization.yaml"
}
# variant_knob_files VARIANT: the lab's knob files, defaults first; dies on a name that is
# neither, or on an overlay with parts the lab cannot reproduce.
variant_knob_files() {
  local v=$1 k
  echo "$IB_LB_DIR/defaults.env"
  [ "$v" = default ] && return 0
  if [ -f "$IB_ROOT/overlays/$v/kustomization.yaml" ]; then
    for k in $(overlay_components "$v"); do
      case $k in
        tuning-*) echo "$IB_ROOT/kustomize/components/$k/nginx.env" ;;
        nginx-lb|images) ;;
        *) die "overlay $v uses component $k, which the bare-metal lab cannot reproduce: use PLATFORM=local" ;;
      esac
    done
    return 0
  fi
  [[ $v =~ ^[a-z0-9-]+(\+[a-z0-9-]+)*$ ]] || die "unknown variant '$v' (an overlay: $(known_overlays); or knob names joined by '+': $(known_variants))"
  for k in ${v//+/ }; do
    [ -f "$IB_ROOT/kustomize/components/tuning-$k/nginx.env" ] || die "unknown variant '$k' (an overlay: $(known_overlays); or knob names joined by '+': $(known_variants))"
    echo "$IB_ROOT/kustomize/components/tuning-$k/nginx.env"
  done
}
DEFAULT_OVERLAY=$(setting_default VARIANT)
# variant_now NAME: NAME as it is called now. Overlays and knob sets were once named by the seed
# they reproduce (overlays/catalog.yaml keeps each old name as `formerly`); saved baselines,
# matrices and scripts still say them, so an old name, whole or as a '+'-joined knob, is read
# as the new one.
variant_now() {
  local v=$1 k out=() now
  [[ $v == *seed* && $v =~ ^[a-z0-9+-]+$ && ! -e $IB_ROOT/overlays/$v ]] || { echo "$v"; return 0; }
  for k in ${v//+/ }; do
    now=$(sed -nE "s/^  - \{name: ([a-z0-9-]+), .*, formerly: ${k}\}\$/\1/p" "$IB_ROOT/overlays/catalog.yaml")
    out+=("${now:-$k}")
  done
  (IFS=+; echo "${out[*]}")
}
# Every variant a run is given, as it is called now (exported: the Python entry points read it).
for _name in VARIANT BASE HEAD RELOAD_TO; do
  _was=${!_name:-}
  [ -n "$_was" ] || continue
  _now=$(variant_now "$_was")
  [ "$_now" = "$_was" ] || { echo "note: $_name=$_was is now called $_now (overlays/catalog.yaml)" >&2; export "$_name=$_now"; }
done
unset _name _was _now
known_overlays() { (cd "$IB_ROOT/overlays" && ls -d */ 2>/dev/null | tr -d / | paste -sd' '); }
# need_overlay NAME: dies unless NAME is an overlay (overlays/NAME/kustomization.yaml).
# A name, never a path: "../kustomize/base" has a kustomization too.
need_overlay() {
  [[ $1 =~ ^[a-z0-9][a-z0-9-]*$ ]] && [ -f "$IB_ROOT/overlays/$1/kustomization.yaml" ] || die "unknown overlay '$1' (known: $(known_overlays))"
}
# need_new_results_dir DIR: DIR can be made (it does not exist, and the nearest directory that
# does is writable), checked before the platform starts; DIR itself is made only after.
need_new_results_dir() {
  local d=$1
  [ ! -e "$d" ] || die "results directory $d exists already: results are never overwritten (choose another TESTID)"
  while [ ! -e "$d" ]; do d=$(dirname "$d"); done
  # Tried, not judged from the mode bits: root passes -w on /proc and on read-only mounts.
  local t; t=$(mktemp -d "$d/.ingress-bench-write-test.XXXXXX" 2>/dev/null) && rmdir "$t" ||
    die "results directory $1 cannot be made: $d is not a writable directory (set RESULTS_ROOT)"
}
# run_testid SCENARIO: TESTID, else the run's own: its start, SCENARIO and VARIANT ("existing" for an ingress you run: bench.sh,
# rounds.sh).
run_testid() { echo "${TESTID:-$(date -u +%Y%m%dT%H%M%SZ)-$1-$(if [ -n "${INGRESS_PODS:-}" ]; then echo existing; else tr + _ <<<"${VARIANT:-$DEFAULT_OVERLAY}"; fi)}"; }
# need_scenario NAME: dies unless NAME is a scenario (the SCENARIO setting's values, each a
# k6/NAME.js with its profile in k6/lib/config.js).
need_scenario() {
  [[ " $(setting_values SCENARIO) " == *" $1 "* ]] || die "unknown scenario '$1' (known: $(setting_values SCENARIO | sed 's/ /, /g'))"
}
# scenario_profile SCENARIO: its profile (k6/SCENARIO.js, the JSON after `export const profile =`).
scenario_profile() { sed -n '/^export const profile = {$/,/^};$/p' "$IB_ROOT/k6/$1.js" | sed '1s/^export const profile = //; $s/;$//'; }
# scenario_scheme SCENARIO: SCHEME, else the profile's; https for a scenario that measures TLS
# handshakes (its profile's tls).
scenario_scheme() {
  local p; p=$(scenario_profile "$1")
  if [ "$(jq -r '.tls // false' <<<"$p")" = true ]; then echo https; else echo "${SCHEME:-$(jq -r .scheme <<<"$p")}"; fi
}

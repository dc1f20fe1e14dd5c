#!/usr/bin/env bash
# Renders the distributed-load manifests from one set of values, so the plain Indexed Job
# (k6/distributed/job.yaml) and the k6-operator TestRun (k6/distributed/testrun.yaml)
# always describe the same run. Their @MARKER@s are replaced here and nowhere else.
#   . bench/run/render_distributed.sh          defines the functions below (bench/run/distributed.sh)
#   bench/run/render_distributed.sh FILE       prints FILE rendered from the environment
# Values (environment variables, or shell variables when sourced):
#   SEGMENTS  1-16 k6 pods          SCENARIO  a scenario (the SCENARIO setting's values)
#   TARGET    the ingress's base URL (scheme://address)
#   TESTID, VARIANT, PLATFORM       tags of the run, as in bench/run/bench.sh
#   every other setting that reaches the pods (bench/settings/settings.yaml, reaches "pods"): each
#             one set is written into the pods' environment (@K6_SETTINGS@), checked by
#             k6/lib/config.js in the pods; PROMETHEUS_URL also adds k6's remote-write output
#   NAME      the object's name; distributed_name TESTID when unset
#   RUNNER_CPU each runner's CPU request and limit (a quantity); none when unset
# The k6 image is k6_image (bench/lib.sh: local build or Grafana's, by IMAGE_SET); the starter
# is K6_OPERATOR_STARTER_IMAGE (ci/tools/versions.env). A TestRun is checked against
# k6/distributed/testrun.schema.json (kubeconform, offline) before it is printed.
declare -F die >/dev/null || . "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# distributed_name TESTID: a DNS label for the Job or TestRun, 51 characters at most: the
# operator names its objects <name>-initializer and <name>-service-<i>, and a Job's name must
# fit in a label value (63).
distributed_name() {
  echo "k6-$(tr -c 'a-z0-9\n' - <<<"${1,,}" | cut -c1-48 | sed 's/-*$//')"
}

# segment_sequence N: N equal execution segments, "0,1/N,...,(N-1)/N,1": the sequence
# k6-operator computes for its runners, so both manifests split the load the same way.
segment_sequence() {
  local i seq=0
  for ((i = 1; i < $1; i++)); do seq+=",$i/$1"; done
  echo "$seq,1"
}

# validate_testrun FILE [LABEL]: kubeconform -strict against the hand-written schema of the
# TestRun fields the manifest uses (the operator's CRD cannot be installed here). The
# template resolves to k6/distributed/testrun.schema.json for kind TestRun; any other kind
# has no schema there and fails. The schema itself forbids unknown fields; -strict adds
# duplicate keys. Dies with kubeconform's reason on one line (its file URL and boilerplate
# cut), after LABEL (default: the file's name).
validate_testrun() {
  command -v kubeconform >/dev/null || die "kubeconform $KUBECONFORM_VERSION is not built: run ci/tools/tools.sh"
  local out
  out=$(kubeconform -strict -schema-location "$IB_ROOT/k6/distributed/{{ .ResourceKind }}.schema.json" <"$1" 2>&1) ||
    die "${2:-$(basename "$1")}: $(printf '%s' "$out" | tr -s '\n ' ' ' | sed -E 's/^stdin - //; s/^[^ ]+ [^ ]+ (is invalid|failed validation): //;
      s/problem validating schema\. Check JSON formatting: //; s/jsonschema validation failed with .[^ ]*. - //')"
}

# k6_settings_env: stdin with its "@K6_SETTINGS@" line replaced by one env entry, at its
# indentation, for each setting reaching the pods that is set: the registry decides what
# the pods receive, so a setting cannot be validated on the host and dropped on the way.
k6_settings_env() {
  local entries="" v
  for v in $(setting_names pods); do [ -z "${!v:-}" ] || entries+="$v=${!v}"$'\n'; done
  # With a Prometheus, the pods stream to it as the host's k6 does (k6_rw_env, bench/lib.sh).
  [ -z "${PROMETHEUS_URL:-}" ] || entries+="K6_OUT=experimental-prometheus-rw"$'\n'"$(k6_rw_env "$PROMETHEUS_URL")"$'\n'
  # An existing ingress's values (bench/lib/existing.sh), PromQL matchers with quotes: escaped as
  # JSON escapes a string, which a YAML double-quoted scalar reads back.
  [ -z "${IB_EXISTING:-}" ] || entries+="IB_EXISTING=$(jq -c . <<<"$IB_EXISTING" | jq -Rr '@json | .[1:-1]')"$'\n'
  # bench:change's load: the runners print their timelines (k6/distributed/job.yaml).
  [ -z "${IB_TIMELINE:-}" ] || entries+="IB_TIMELINE=$IB_TIMELINE"$'\n'
  # (through the environment: awk's -v would read the escapes in a value)
  ENTRIES=$entries awk '
    /^ *@K6_SETTINGS@$/ {
      indent = $0; sub(/@K6_SETTINGS@$/, "", indent)
      n = split(ENVIRON["ENTRIES"], e, "\n")
      for (i = 1; i < n; i++) { k = e[i]; sub(/=.*/, "", k); v = substr(e[i], length(k) + 2)
        printf "%s- { name: %s, value: \"%s\" }\n", indent, k, v }
      next
    }
    { print }'
}

# render_distributed FILE: FILE with its markers replaced, on stdout. Dies on a missing or
# malformed value, or a marker left without one, before printing anything.
render_distributed() {
  local file=$1 v
  [ -f "$file" ] || die "no manifest template at $file"
  local segments; segments=$(setting SEGMENTS) || exit 1
  [ -n "$segments" ] || die "SEGMENTS must be set to render $(basename "$file")"
  need_scenario "${SCENARIO:-}"
  for v in TARGET TESTID VARIANT PLATFORM; do [ -n "${!v:-}" ] || die "$v must be set to render $(basename "$file")"; done
  # Values land in double-quoted YAML strings and in sed replacements.
  for v in NAME $(setting_names pods); do
    [[ ${!v:-} != *[\"\\\|\&]* && ${!v:-} != *$'\n'* ]] || die "$v must not contain quotes, backslashes, '|', '&' or line breaks, got '${!v//$'\n'/\\n}'"
  done
  local name=${NAME:-$(distributed_name "$TESTID")} out marker cpu=${RUNNER_CPU:-} res
  # RUNNER_CPU: each runner's CPU request and limit alike. Not set: neither. A request alone
  # would not bound k6, and the rules read a request without a quota as a pinned pod's cores.
  [ -z "$cpu" ] || setting RUNNER_CPU >/dev/null
  res="{ requests: { memory: 64Mi${cpu:+, cpu: \"$cpu\"} }, limits: { memory: 1Gi${cpu:+, cpu: \"$cpu\"} } }"
  # The run's tags as k6/lib/config.js sets them (its `tags`), on the command line.
  local tags="--tag testid=$TESTID --tag variant=$VARIANT --tag platform=$PLATFORM --tag scenario=$SCENARIO"
  out=$(sed -e "s|@NAME@|$name|g" -e "s|@RESOURCES@|$res|g" -e "s|@RUN_TAGS@|$tags|g" -e "s|@SEGMENTS@|$SEGMENTS|g" -e "s|@SEQUENCE@|$(segment_sequence "$SEGMENTS")|g" \
    -e "s|@SCENARIO@|$SCENARIO|g" -e "s|@IMAGE@|$(k6_image)|g" -e "s|@STARTER_IMAGE@|$K6_OPERATOR_STARTER_IMAGE|g" "$file" |
    k6_settings_env)
  # Upper case between two @ is a marker ("@@summary.json.gz.b64" in job.yaml is not).
  marker=$(grep -o -m1 '@[A-Z][A-Z_]*@' <<<"$out" | head -n1) || true
  [ -z "$marker" ] || die "$(basename "$file"): marker $marker has no value in bench/run/render_distributed.sh"
  if grep -q '^kind: TestRun$' <<<"$out"; then validate_testrun <(printf '%s\n' "$out") "$(basename "$file") rendered"; fi
  printf '%s\n' "$out"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  [ $# = 1 ] || die "usage: bench/run/render_distributed.sh FILE (values from the environment: see the header)"
  render_distributed "$1"
fi

# Small helpers every script uses: state removal, root, polling, arithmetic.
# Sourced by bench/lib.sh (which every script sources); no side effects beyond variables.
# rm_state DIR: removes a platform's state directory, and /run/ingress-bench with the last one
# (an empty parent a down would otherwise leave on a host that had none).
rm_state() { rm -rf "$1"; rmdir "$(dirname "$1")" 2>/dev/null || true; }
need_root() { [ "$(id -u)" = 0 ] || die "$1 needs root (network namespaces, nginx on ports 80/443): run it as root"; }
# median "N N N ...": the middle value (the upper one of an even count's two).
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int(NR / 2) + 1]}'; }
# calc FORMAT EXPR: awk arithmetic, printf-formatted.
calc() { awk "BEGIN { printf \"$1\", $2 }"; }
# poll SECONDS CMD...: run CMD every 0.2 s until it succeeds (0) or SECONDS pass (1).
poll() {
  local secs=$1 i; shift
  for i in $(seq $((secs * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  return 1
}
# live PID: a thread of the process is not a zombie. A killed process's leader thread is one
# as soon as it has exited, while its other threads may still be exiting and holding its
# files: a killed containerd's streaming port listened on past a down that took it for dead.
live() {
  local t s
  for t in /proc/"$1"/task/*/stat; do
    { read -r s <"$t"; } 2>/dev/null || continue
    s=${s##*) }
    [ "${s%% *}" = Z ] || return 0
  done
  return 1
}
# http_ok URL [CURL_ARGS...]: the URL answers 200.
http_ok() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "${@:2}" "$1")" = 200 ]; }
# without_our_fds CMD...: exec CMD with none of this shell's descriptors but 0-2 (call it in a
# subshell, or as a background job). A daemon inherits every descriptor open where it starts: one
# started in a run that holds the machine's load lock (bench/lib/k6.sh) held that lock for as long
# as it lived, and every later run waited for it.
# The descriptors are listed first and closed outside any redirection: a loop redirected as a
# whole has bash keep the caller's stderr in a descriptor of its own, which the loop then closed,
# and the command's stderr was left on /dev/null.
without_our_fds() {
  local fd fds=()
  for fd in /proc/"$BASHPID"/fd/*; do fd=${fd##*/}; [ "$fd" -le 2 ] || fds+=("$fd"); done
  for fd in "${fds[@]}"; do eval "exec $fd>&-"; done
  exec "$@"
}

# make_certs DIR NAME [IP]: the ingress's certificates for NAME (and IP), made at each start,
# never committed: tls.crt/tls.key RSA-2048 (seed 002's) and ecdsa.crt/ecdsa.key P-256 (the
# ecdsa knob's), self-signed.
make_certs() {
  local dir=$1 san="DNS:$2${3:+,IP:$3}" name
  mkdir -p "$dir"
  for name in tls ecdsa; do
    local key=(rsa:2048); [ "$name" = tls ] || key=(ec -pkeyopt ec_paramgen_curve:P-256)
    openssl req -x509 -newkey "${key[@]}" -nodes -days 30 -subj "/CN=$2" -addext "subjectAltName=$san" \
      -keyout "$dir/$name.key" -out "$dir/$name.crt" 2>/dev/null || die "openssl could not make the $name certificate"
  done
}

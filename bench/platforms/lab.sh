#!/usr/bin/env bash
# The bare-metal lab: a client, an NGINX load balancer and N backend NGINX servers, each in
# its own network namespace, joined by a bridge on the host (seed 001's "traditional
# architecture", seed 003's LB -> backends).
#   bench/platforms/lab.sh up       bring it up with $VARIANT (converges: a running lab is reconfigured)
#   bench/platforms/lab.sh down     remove every process, namespace, bridge and file it made (idempotent)
#   bench/platforms/lab.sh status   print what is running; exit 1 when the lab is not up
#   bench/platforms/lab.sh check    validate the lab settings only
#   bench/platforms/lab.sh procs    print the pids of every live process of the lab (none: nothing runs)
#   bench/platforms/lab.sh reload GENERATION [KEY=VALUE...]   the running LB reloaded in place into $VARIANT's knobs (and these)
#                                (bench:change CHANGE=reload); its status port's /generation
#                                answers GENERATION once the new workers serve
#   bench/platforms/lab.sh backend stop|start I   backend I's nginx stopped (SIGTERM, as a kubelet
#                                stops a pod) or started again (idempotent)
#   bench/platforms/lab.sh lb-prefix   print the LB's nginx prefix (its logs/, nginx.pid)
# Addresses are in 198.18.0.0/15 (RFC 2544). The namespaces get no default route, so nothing
# they send can leave the host.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

VARIANT=${VARIANT:-$DEFAULT_OVERLAY}
LAB_BACKENDS=${LAB_BACKENDS:-$(setting_default LAB_BACKENDS)}
STATE=${IB_LAB_STATE:-/run/ingress-bench/lab}
BRIDGE=ibench0
NS_PREFIX=$LAB_NS_PREFIX
# Addresses: bench/platforms/lab.env (through bench/lib.sh).
HOST_IP=$LAB_HOST_IP LB_IP=$LAB_LB_IP CLIENT_IP=$LAB_CLIENT_IP LB_STATUS_PORT=$LAB_STATUS_PORT
backend_ip() { lab_backend_ip "$1"; }
# name=bytes: the PAYLOAD setting's values (bench/settings/settings.yaml), sized by their unit.
PAYLOADS=$(for p in $(setting_values PAYLOAD); do
  n=${p%[km]b}; [[ $p == *mb ]] && echo "$p=$((n * 1048576))" || echo "$p=$((n * 1024))"; done | paste -sd' ')

nginx_pids() { # every nginx master/worker started from our state dir (also strays of a crashed up)
  pgrep -f "nginx: .* -p $STATE/" || true
}

down() {
  local pid ns
  # The lab's monitoring listens on the bridge removed below: it goes first.
  PLATFORM=lab bash "$IB_ROOT/bench/platforms/monitoring/monitoring.sh" down >/dev/null 2>&1 || true
  for pid in $(nginx_pids); do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 50); do [ -z "$(nginx_pids)" ] && break; sleep 0.1; done
  for pid in $(nginx_pids); do kill -KILL "$pid" 2>/dev/null || true; done
  for ns in $(ip netns list 2>/dev/null | awk -v p="$NS_PREFIX" 'index($1, p) == 1 {print $1}'); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  ip route del blackhole "$LAB_RANGE" 2>/dev/null || true
  bash "$IB_ROOT/bench/platforms/monitoring/cgroups.sh" remove
  # The first `ip netns add` on a host makes /run/netns a mount (and the directory): undone
  # when up recorded that it made them and no namespace of anyone is left in it.
  if [ -f "$STATE/netns-mount-made" ] && [ -z "$(ip netns list 2>/dev/null)" ]; then
    umount /run/netns 2>/dev/null || true
    [ "$(cat "$STATE/netns-mount-made")" = dir ] && rmdir /run/netns 2>/dev/null || true
  fi
  rm_state "$STATE"
}

# add_host NAME IP: a namespace with one veth on the bridge. The kernel settings are the
# namespace's own and vanish with it: seed 004's, the same the nginx-lb pod sets
# (kustomize/components/nginx-lb/deployment.yaml), so both platforms run one kernel config.
add_host() {
  local ns=$NS_PREFIX$1 ip=$2 peer=ibv-$1
  ip netns add "$ns"
  ip link add "$peer" type veth peer name eth0 netns "$ns"
  ip link set "$peer" master "$BRIDGE" up
  ip -n "$ns" addr add "$ip/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_port_range="1024 65535" net.ipv4.tcp_tw_reuse=1
}

# start_nginx NAME CONF: nginx in namespace NAME with prefix $STATE/NAME/.
start_nginx() {
  local name=$1 conf=$2 p=$STATE/$1
  mkdir -p "$p/logs" "$p/tmp"
  ip netns exec "$NS_PREFIX$name" nginx -q -t -p "$p/" -c "$conf" -e "$p/logs/error.log" 2>"$p/logs/test.log" ||
    die "nginx config for $name is invalid: $(grep -m1 emerg "$p/logs/test.log" || tail -n1 "$p/logs/test.log")"
  # In its role's cgroup: the CPU the bench:* rules attribute to the ingress or the backends.
  local role=backend; [ "$name" = lb ] && role=ingress
  (without_our_fds bash "$IB_ROOT/bench/platforms/monitoring/cgroups.sh" run "$role" ip netns exec "$NS_PREFIX$name" taskset -c "$SERVER_CPUS" nginx -p "$p/" -c "$conf" -e "$p/logs/error.log") ||
    die "nginx for $name did not start: $(tail -n1 "$p/logs/error.log")"
}

wait_http() { poll 5 http_ok "$1" || die "$1 did not answer 200 within 5 s"; }

failpoint() { # lets the test suite make `up` fail half-way, to prove the rollback
  [ "${LAB_FAILPOINT:-}" = "$1" ] && die "failpoint $1 reached (LAB_FAILPOINT is set)"
  return 0
}

render_lb() { # OUT GENERATION [KNOBFILE]: $VARIANT's nginx.conf (KNOBFILE's knobs last)
  local files; files=$(variant_knob_files "$VARIANT") || exit 1
  mkdir -p "$STATE/lb/tls"
  # shellcheck disable=SC2086
  sh "$IB_LB_DIR/render.sh" "$IB_LB_DIR/nginx.conf.tmpl" $files ${3:-} | sed "s/@GENERATION@/$2/g" >"$1"
  local i; for i in $(seq "$LAB_BACKENDS"); do echo "server $(backend_ip "$i"):80;"; done >"$STATE/lb/upstreams.conf"
}

start_lb() {
  # The LB's certificates, once per lab (the variant's CERT knob picks one).
  [ -f "$STATE/lb/tls/ecdsa.key" ] || make_certs "$STATE/lb/tls" bench.ingress.test "$LB_IP"
  render_lb "$STATE/lb/nginx.conf" 0
  start_nginx lb "$STATE/lb/nginx.conf"
  wait_http "http://$LB_IP:$LB_STATUS_PORT/stub_status"
  wait_http "http://$LB_IP/1kb.bin"
  echo "$VARIANT" >"$STATE/lb/variant" # only once the LB answers with it
}

stop_lb() {
  local pid; pid=$(cat "$STATE/lb/logs/nginx.pid" 2>/dev/null) || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  die "lb nginx (pid $pid) did not stop"
}

is_up() { [ -f "$STATE/up" ] && [ -n "$(nginx_pids)" ] && ip link show "$BRIDGE" >/dev/null 2>&1; }

check() { # every lab setting, before anything is made
  LAB_BACKENDS=$(setting LAB_BACKENDS) || exit 1
  variant_knob_files "$VARIANT" >/dev/null
  local placement; placement=$(lab_cpus) || exit 1
  read -r _ SERVER_CPUS <<<"$placement"
  command -v nginx >/dev/null || die "nginx is not installed: run './task tools'"
}

up() {
  need_root "lab:up"
  check
  # nginx's master inherits this; workers raise theirs to worker_rlimit_nofile where set.
  ulimit -n "$(ulimit -Hn)"
  # Any failure from here on (a die, a failed command under set -e, Ctrl-C) removes whatever
  # was made, so a failed or interrupted up never leaves half a lab behind.
  trap 'rc=$?; [ $rc = 0 ] || down; exit $rc' EXIT
  trap 'exit 130' INT TERM
  if is_up; then
    if [ "$(cat "$STATE/lb/variant")" = "$VARIANT" ] && [ "$(cat "$STATE/shape")" = "$LAB_BACKENDS $SERVER_CPUS" ]; then
      trap - EXIT INT TERM
      say lab "up (variant $VARIANT, $LAB_BACKENDS backends, servers on CPUs $SERVER_CPUS)"; return 0
    fi
    if [ "$(cat "$STATE/shape")" = "$LAB_BACKENDS $SERVER_CPUS" ]; then
      # Restart rather than reload so stub_status counters and workers start clean.
      say lab "switching the load balancer to variant $VARIANT"
      stop_lb; start_lb; trap - EXIT INT TERM; return 0
    fi
  fi
  down # a half-made lab from a crash, or a different backend count: start from nothing
  mkdir -p "$STATE/payloads" && chmod 755 "$STATE" "$STATE/payloads"
  local kv; for kv in $PAYLOADS; do head -c "${kv#*=}" /dev/zero >"$STATE/payloads/${kv%%=*}.bin"; done
  chmod 644 "$STATE"/payloads/*
  if ! mountpoint -q /run/netns; then [ -d /run/netns ] && echo mount || echo dir; fi >"$STATE/netns-mount-made"
  [ -s "$STATE/netns-mount-made" ] || rm "$STATE/netns-mount-made"

  ip link add "$BRIDGE" type bridge
  ip addr add "$HOST_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # While the lab is up, an address of the range that no lab host holds ends here instead of
  # following the host's default route (the bridge's /24 is more specific and still wins).
  ip route add blackhole "$LAB_RANGE"
  add_host client "$CLIENT_IP"
  add_host lb "$LB_IP"
  local i; for i in $(seq "$LAB_BACKENDS"); do
    add_host "be$i" "$(backend_ip "$i")"
    mkdir -p "$STATE/be$i" && ln -s "$STATE/payloads" "$STATE/be$i/payloads"
    start_nginx "be$i" "$IB_ROOT/kustomize/base/backend/nginx.conf"
  done
  for i in $(seq "$LAB_BACKENDS"); do wait_http "http://$(backend_ip "$i")/1kb.bin"; done
  failpoint after-backends

  start_lb
  echo "$LAB_BACKENDS $SERVER_CPUS" >"$STATE/shape"
  touch "$STATE/up"
  trap - EXIT INT TERM
  say lab "up: lb $LB_IP (variant $VARIANT), $LAB_BACKENDS backends, servers on CPUs $SERVER_CPUS"
}

# reload GENERATION: as an ingress controller applies a configuration change (and as the
# in-cluster LB's lb.sh reload does): the new config tested, then SIGHUP to the master; a
# config nginx refuses leaves the running one as it was.
# KEY=VALUE arguments after it are knobs over the variant's (bench:routes' ROUTES), as lb.sh
# reload's stdin is in the cluster.
reload() {
  [[ ${1:-} =~ ^[0-9]+$ ]] || die "lab.sh reload: GENERATION must be a number, got '${1:-}'"
  local kv; for kv in "${@:2}"; do [[ $kv =~ ^[A-Z_][A-Z0-9_]*= ]] || die "lab.sh reload: a knob is KEY=VALUE, got '$kv'"; done
  is_up || die "the lab is not up: ./task lab:up"
  local p=$STATE/lb
  read -r LAB_BACKENDS _ <"$STATE/shape" # the upstreams render_lb writes: the running lab's
  printf '%s\n' "${@:2}" >"$p/knobs.extra"
  render_lb "$p/nginx.conf.new" "$1" "$p/knobs.extra" # checks $VARIANT first (variant_knob_files)
  ip netns exec "$NS_PREFIX"lb nginx -q -t -p "$p/" -c "$p/nginx.conf.new" -e "$p/logs/error.log" 2>"$p/logs/test.log" ||
    die "variant $VARIANT's config is invalid: $(grep -m1 emerg "$p/logs/test.log" || tail -n1 "$p/logs/test.log")"
  mv "$p/nginx.conf.new" "$p/nginx.conf"
  kill -HUP "$(cat "$p/logs/nginx.pid")"
  echo "$VARIANT" >"$p/variant" # `up` converges from what runs
}

# backend stop|start I
backend() {
  local i=${2:-} pid n
  is_up || die "the lab is not up: ./task lab:up"
  read -r n SERVER_CPUS <"$STATE/shape"
  [[ $i =~ ^[0-9]+$ ]] && [ "$i" -ge 1 ] && [ "$i" -le "$n" ] || die "lab.sh backend: I must be a backend from 1 to $n, got '$i'"
  pid=$(cat "$STATE/be$i/logs/nginx.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null || pid=
  case ${1:-} in
    stop)
      [ -n "$pid" ] || return 0
      kill -TERM "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
      die "backend $i (pid $pid) did not stop" ;;
    start)
      [ -n "$pid" ] && return 0
      start_nginx "be$i" "$IB_ROOT/kustomize/base/backend/nginx.conf"
      wait_http "http://$(backend_ip "$i")/1kb.bin" ;;
    *) die "usage: bench/platforms/lab.sh backend stop|start I" ;;
  esac
}

procs() { # the lab's servers, whatever runs in its namespaces, its monitoring
  local ns
  nginx_pids
  for ns in $(ip netns list 2>/dev/null | awk -v p="$NS_PREFIX" 'index($1, p) == 1 {print $1}'); do
    ip netns pids "$ns" 2>/dev/null || true
  done
  PLATFORM=lab bash "$IB_ROOT/bench/platforms/monitoring/monitoring.sh" procs
}

status() {
  if ! is_up; then echo "lab: down"; return 1; fi
  read -r n cpus <"$STATE/shape"
  echo "lab: up, variant $(cat "$STATE/lb/variant"), $n backends, lb $LB_IP, servers on CPUs $cpus"
  curl -s "http://$LB_IP:$LB_STATUS_PORT/stub_status"
}

case "${1:-}" in
  check) check ;;
  up) up ;;
  down) need_root "lab:down"; down; say lab "down" ;;
  status) status ;;
  procs) procs ;;
  reload) need_root "lab:reload"; reload "${@:2}" ;;
  backend) need_root "lab:backend"; backend "${2:-}" "${3:-}" ;;
  lb-prefix) echo "$STATE/lb" ;;
  *) die "usage: bench/platforms/lab.sh up|down|status|check|procs|reload|backend|lb-prefix" ;;
esac

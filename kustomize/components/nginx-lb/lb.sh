#!/bin/sh
# lb.sh start | reload GENERATION: the in-cluster LB (deployment.yaml runs it).
#   start   renders nginx.conf from the template and the merged knob ConfigMap (one file per
#           knob, turned back into KEY=VALUE lines for render.sh), then runs nginx
#   reload  renders it from KEY=VALUE lines on stdin (another variant's knobs: bench:change
#           CHANGE=reload) and reloads nginx in place, as an ingress controller does; the
#           status port's /generation answers GENERATION once the new workers serve
# @NODE_IP@ in the config or upstreams: the LB's own node (components/path-lb-nodeport,
# nginx-lb-hostnetwork); an upstreams line with it is one line per node of BACKEND_NODE_IPS
# when set (the nodes the backends run on, as seed 003's LB listed its cluster's: deploy sets
# it on our cluster of several nodes).
set -eu
p=/run/lb
render() { # KNOBS GENERATION
  sh /etc/lb/template/render.sh /etc/lb/template/nginx.conf.tmpl "$1" |
    sed "s/@NODE_IP@/$NODE_IP/g; s/@GENERATION@/$2/g" >$p/conf/nginx.conf.new
  mv $p/conf/nginx.conf.new $p/conf/nginx.conf
}
case ${1:-} in
  start)
    mkdir -p $p/conf $p/logs $p/tmp
    for f in /etc/lb/knobs/*; do printf '%s=%s\n' "${f##*/}" "$(cat "$f")"; done >$p/knobs.env
    render $p/knobs.env 0
    while IFS= read -r line; do
      case $line in
        '#'*) printf '%s\n' "$line" ;;
        *@NODE_IP@*) for ip in ${BACKEND_NODE_IPS:-$NODE_IP}; do printf '%s\n' "$line" | sed "s/@NODE_IP@/$ip/g"; done ;;
        *) printf '%s\n' "$line" ;;
      esac
    done </etc/lb/upstreams/upstreams.conf >$p/conf/upstreams.conf
    ln -sfn /etc/lb/tls $p/conf/tls
    exec nginx -p $p/ -c $p/conf/nginx.conf -e /dev/stderr -g 'daemon off;' ;;
  reload)
    case ${2:-} in '' | *[!0-9]*) echo "lb.sh reload: GENERATION must be a number, got '${2:-}'" >&2; exit 2 ;; esac
    cat >$p/knobs.env.new
    cp $p/conf/nginx.conf $p/conf/nginx.conf.old
    render $p/knobs.env.new "$2"
    # A config nginx refuses leaves the running one as it was.
    if ! nginx -p $p/ -c $p/conf/nginx.conf -e /dev/stderr -t -q; then mv $p/conf/nginx.conf.old $p/conf/nginx.conf; exit 1; fi
    mv $p/knobs.env.new $p/knobs.env
    exec nginx -p $p/ -c $p/conf/nginx.conf -e /dev/stderr -s reload ;;
  *) echo "usage: lb.sh start | reload GENERATION" >&2; exit 2 ;;
esac

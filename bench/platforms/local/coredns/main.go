// CoreDNS with only the plugins the local cluster's Corefile uses (bench/platforms/local/coredns.yaml),
// the way CoreDNS documents a custom build: its own main imports coremain and the plugins.
// The full build compiles every cloud SDK its other plugins need (route53, azure, clouddns),
// which cost minutes of a cold build for nothing the cluster runs.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The plugins' order in the server's chain, as CoreDNS' own plugin.cfg orders these.
func init() {
	dnsserver.Directives = []string{"ready", "health", "errors", "cache", "kubernetes", "loop"}
}

func main() {
	coremain.Run()
}

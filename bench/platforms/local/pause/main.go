// pause: the sandbox process every pod holds its namespaces with. Built locally because no
// registry is reachable (registry.k8s.io/pause is what a connected cluster would pull).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}

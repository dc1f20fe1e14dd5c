// kind-validate FILE: offline check of a kind cluster config (bench/platforms/kind/cluster.yaml), since
// kind itself cannot run on the project's machines (no container engine). Three layers:
//
//  1. the file decodes into kind's own v1alpha4 types exactly as `kind create cluster` does
//     (go.yaml.in/yaml/v3 with KnownFields, sigs.k8s.io/kind/pkg/internal/apis/config/encoding),
//     so a typo'd or misplaced field fails here as it would there;
//  2. each kubeadmConfigPatches entry decodes strictly into the Kubernetes 1.34 type it patches
//     (KubeletConfiguration, KubeProxyConfiguration): kind passes unknown fields through and
//     silently drops a patch whose kind matches nothing;
//  3. the properties the benchmark relies on (the local cluster's shape, the network rules of
//     docs/platforms.md), after kind's defaults.
//
// Prints one line: what the cluster will be, or "FILE: reason" (exit 1).
package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/cpuset"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

var (
	// Every address the project assigns is in the RFC 2544 benchmarking range; the lab owns
	// its first /24 (bench/platforms/lab.sh).
	benchRange = netip.MustParsePrefix("198.18.0.0/15")
	labRange   = netip.MustParsePrefix("198.18.0.0/24")
	// A node image of Kubernetes 1.34 pinned by digest (kind supports only images built for
	// its release; the tag alone can point at another build).
	nodeImage = regexp.MustCompile(`^kindest/node:v1\.34\.[0-9]+@sha256:[0-9a-f]{64}$`)
	// The unsafe sysctl the nginx-lb pod sets (kustomize/components/nginx-lb/deployment.yaml).
	neededSysctl = "net.ipv4.tcp_tw_reuse"
)

// The documents kind generates for the kubelet and kube-proxy, which a patch must name to
// apply (kind matches on kind, and on apiVersion when the patch sets one).
const (
	kubeletAPIVersion   = "kubelet.config.k8s.io/v1beta1"
	kubeProxyAPIVersion = "kubeproxy.config.k8s.io/v1alpha1"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kind-validate FILE")
		os.Exit(2)
	}
	summary, err := validate(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	fmt.Println(summary)
}

func validate(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var cfg kindv1alpha4.Cluster
	if err := decodeLikeKind(raw, &cfg); err != nil {
		return "", err
	}
	if cfg.APIVersion != "kind.x-k8s.io/v1alpha4" || cfg.Kind != "Cluster" {
		return "", fmt.Errorf("want kind Cluster of apiVersion kind.x-k8s.io/v1alpha4, got %q %q", cfg.Kind, cfg.APIVersion)
	}
	kindv1alpha4.SetDefaultsCluster(&cfg)

	if err := checkNodes(cfg.Nodes); err != nil {
		return "", err
	}
	net := cfg.Networking
	if net.IPFamily != kindv1alpha4.IPv4Family {
		return "", fmt.Errorf("networking.ipFamily must be ipv4 (the project's ranges are IPv4), got %q", net.IPFamily)
	}
	if addr, err := netip.ParseAddr(net.APIServerAddress); err != nil || !addr.IsLoopback() {
		return "", fmt.Errorf("networking.apiServerAddress must be a loopback address, got %q", net.APIServerAddress)
	}
	pods, err := benchPrefix("networking.podSubnet", net.PodSubnet)
	if err != nil {
		return "", err
	}
	services, err := benchPrefix("networking.serviceSubnet", net.ServiceSubnet)
	if err != nil {
		return "", err
	}
	if pods.Overlaps(services) {
		return "", fmt.Errorf("networking.podSubnet %s and serviceSubnet %s overlap", pods, services)
	}
	if net.KubeProxyMode != kindv1alpha4.IPTablesProxyMode {
		return "", fmt.Errorf("networking.kubeProxyMode must be iptables (as on the local cluster), got %q", net.KubeProxyMode)
	}
	if net.DisableDefaultCNI {
		return "", errors.New("networking.disableDefaultCNI: the cluster would come up without pod networking")
	}

	// Cluster-wide patches first, then each node's, as kind applies them.
	patches := slices.Clone(cfg.KubeadmConfigPatches)
	for _, n := range cfg.Nodes {
		patches = append(patches, n.KubeadmConfigPatches...)
	}
	kubelet, proxy, err := decodePatches(patches)
	if err != nil {
		return "", err
	}
	if kubelet.CPUManagerPolicy != "static" {
		return "", fmt.Errorf("the KubeletConfiguration patch must set cpuManagerPolicy: static (the ingress gets whole CPUs), got %q", kubelet.CPUManagerPolicy)
	}
	reserved, err := cpuset.Parse(kubelet.ReservedSystemCPUs)
	if err != nil || reserved.IsEmpty() {
		return "", fmt.Errorf("the KubeletConfiguration patch must set reservedSystemCPUs to a CPU list (the static policy needs reserved CPUs), got %q", kubelet.ReservedSystemCPUs)
	}
	if !slices.Contains(kubelet.AllowedUnsafeSysctls, neededSysctl) {
		return "", fmt.Errorf("the KubeletConfiguration patch must allow the unsafe sysctl %s (allowedUnsafeSysctls), or the nginx-lb pod is rejected", neededSysctl)
	}

	ports := []string{}
	for _, n := range cfg.Nodes {
		for _, m := range n.ExtraPortMappings {
			ports = append(ports, fmt.Sprintf("%s:%d", m.ListenAddress, m.HostPort))
		}
	}
	return fmt.Sprintf("%s ok: %s, pods %s, services %s, kube-proxy %s (nodePortAddresses %s), cpuManagerPolicy static reserving CPU %s, unsafe sysctls %s, host ports %s",
		cfg.Name, strings.SplitN(cfg.Nodes[0].Image, "@", 2)[0], pods, services, net.KubeProxyMode,
		orNone(proxy.NodePortAddresses), reserved, strings.Join(kubelet.AllowedUnsafeSysctls, ","), orNone(ports)), nil
}

// decodeLikeKind decodes as kind's config loader does: YAML v3, unknown fields an error.
func decodeLikeKind(raw []byte, out any) error {
	d := yamlv3.NewDecoder(bytes.NewReader(raw))
	d.KnownFields(true)
	if err := d.Decode(out); err != nil {
		return fmt.Errorf("not a valid kind v1alpha4 config: %v", oneLine(err))
	}
	return nil
}

// checkNodes: one node like the local cluster (kind drops the control-plane taint when there
// are no workers), a pinned 1.34 image, host ports on loopback only.
func checkNodes(nodes []kindv1alpha4.Node) error {
	if len(nodes) != 1 || nodes[0].Role != kindv1alpha4.ControlPlaneRole {
		return fmt.Errorf("want exactly one node, role control-plane, like the local cluster; got %d", len(nodes))
	}
	if !nodeImage.MatchString(nodes[0].Image) {
		return fmt.Errorf("nodes[0].image must be kindest/node:v1.34.<patch>@sha256:<digest> (pinned, the local cluster's minor), got %q", nodes[0].Image)
	}
	for i, m := range nodes[0].ExtraPortMappings {
		// kind listens on 0.0.0.0 when listenAddress is empty.
		if addr, err := netip.ParseAddr(m.ListenAddress); err != nil || !addr.IsLoopback() {
			return fmt.Errorf("nodes[0].extraPortMappings[%d].listenAddress must be a loopback address, got %q", i, m.ListenAddress)
		}
		if m.HostPort == 0 || m.ContainerPort == 0 {
			return fmt.Errorf("nodes[0].extraPortMappings[%d]: set containerPort and hostPort (a random host port cannot be documented)", i)
		}
	}
	return nil
}

// benchPrefix parses one IPv4 CIDR that must lie in the benchmarking range, clear of the lab.
func benchPrefix(field, value string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(value)
	if err != nil || p != p.Masked() {
		return p, fmt.Errorf("%s must be one IPv4 network in CIDR form, got %q", field, value)
	}
	if !benchRange.Contains(p.Addr()) || p.Bits() < benchRange.Bits() {
		return p, fmt.Errorf("%s %s is outside 198.18.0.0/15, the only range the project assigns (docs/platforms.md)", field, p)
	}
	if p.Overlaps(labRange) {
		return p, fmt.Errorf("%s %s overlaps the lab's 198.18.0.0/24 (bench/platforms/lab.sh)", field, p)
	}
	return p, nil
}

// decodePatches decodes every kubeadm patch strictly into the type of the document it
// patches, in order, so later patches override earlier ones field by field as kind's merge
// patches do.
func decodePatches(patches []string) (*kubeletv1beta1.KubeletConfiguration, *kubeproxyv1alpha1.KubeProxyConfiguration, error) {
	kubelet := &kubeletv1beta1.KubeletConfiguration{}
	proxy := &kubeproxyv1alpha1.KubeProxyConfiguration{}
	for i, p := range patches {
		var tm struct {
			Kind       string `json:"kind"`
			APIVersion string `json:"apiVersion"`
		}
		if err := yaml.Unmarshal([]byte(p), &tm); err != nil {
			return nil, nil, fmt.Errorf("kubeadmConfigPatches[%d] is not YAML: %v", i, oneLine(err))
		}
		var target any
		var want string
		switch tm.Kind {
		case "KubeletConfiguration":
			target, want = kubelet, kubeletAPIVersion
		case "KubeProxyConfiguration":
			target, want = proxy, kubeProxyAPIVersion
		default:
			return nil, nil, fmt.Errorf("kubeadmConfigPatches[%d] has kind %q: only KubeletConfiguration and KubeProxyConfiguration are checked here (kind drops a patch that matches none of its documents)", i, tm.Kind)
		}
		if tm.APIVersion != "" && tm.APIVersion != want {
			return nil, nil, fmt.Errorf("kubeadmConfigPatches[%d]: kind generates %s %s, a patch for %q matches nothing", i, tm.Kind, want, tm.APIVersion)
		}
		if err := yaml.UnmarshalStrict([]byte(p), target); err != nil {
			return nil, nil, fmt.Errorf("kubeadmConfigPatches[%d] (%s): %v", i, tm.Kind, oneLine(err))
		}
	}
	return kubelet, proxy, nil
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"clouddb"
	"clouddb/blob"
	k8sdriver "clouddb/driver/kubernetes"
	"clouddb/driver/local"
	"clouddb/task"
)

// The data-plane drivers of --driver.
const (
	driverLocal      = "local"
	driverKubernetes = "kubernetes"
)

// Defaults of the kubernetes driver's flags.
const (
	DefaultNamespace  = "clouddb"
	DefaultRedisImage = "redis:7.0.15"
	// DefaultServiceType makes each database's endpoint a NodePort.
	DefaultServiceType = string(corev1.ServiceTypeNodePort)
	// defaultNodePorts and defaultClusterPorts split Kubernetes' default NodePort range,
	// 30000-32767: with --driver kubernetes a database's port is its Service's NodePort,
	// and the other nodes of an OSS Cluster database have NodePorts of their own.
	defaultNodePorts    = "30000-31999"
	defaultClusterPorts = "32000-32767"
)

// minK8sRedis is the oldest Redis the kubernetes driver runs.
const minK8sRedis = "7.0"

// redisImage parses --k8s-redis-image: IMAGE, whose tag is the full Redis version
// (redis:7.0.15), or VERSION=IMAGE.
func redisImage(s string) (full, image string, err error) {
	full, image, ok := strings.Cut(s, "=")
	if !ok {
		image = s
		i := strings.LastIndex(s, ":")
		if i < 0 || strings.Contains(s[i:], "/") {
			return "", "", fmt.Errorf("--k8s-redis-image %q: name the Redis version, as VERSION=IMAGE or in the image's tag", s)
		}
		full = s[i+1:]
	}
	mm, ok := clouddb.MajorMinor(full)
	if !ok || image == "" {
		return "", "", fmt.Errorf("--k8s-redis-image %q: want VERSION=IMAGE with a Redis version such as 7.0.15", s)
	}
	// The pods' readiness probe runs redis-cli -e, and cluster nodes announce hostnames.
	if clouddb.CompareRedisVersions(mm, minK8sRedis) < 0 {
		return "", "", fmt.Errorf("--k8s-redis-image %q: Redis %s is older than %s, which the kubernetes driver needs", s, full, minK8sRedis)
	}
	return full, image, nil
}

// redisImagesFlag is --k8s-redis-image: repeatable, and a value may list several images
// separated by commas or spaces (no image reference holds either), which is how its
// environment twin offers several versions. The first value given replaces the default.
type redisImagesFlag struct {
	images *[]string
	set    bool
}

func (f *redisImagesFlag) String() string {
	if f == nil || f.images == nil {
		return ""
	}
	return strings.Join(*f.images, ",")
}

func (f *redisImagesFlag) Set(v string) error {
	images := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	if len(images) == 0 {
		return errors.New("no image: give IMAGE or VERSION=IMAGE")
	}
	if !f.set {
		*f.images, f.set = nil, true
	}
	*f.images = append(*f.images, images...)
	return nil
}

// redisImages parses the --k8s-redis-image values: the versions they offer (the first
// value's the default) and each major.minor's image. Two images of one major.minor are
// refused: a database of that version could run either.
func redisImages(given []string) (clouddb.RedisVersions, map[string]string, error) {
	if len(given) == 0 {
		given = []string{DefaultRedisImage}
	}
	images := make(map[string]string, len(given))
	asGiven := make(map[string]string, len(given)) // major.minor → value as given
	fulls := make([]string, 0, len(given))
	for _, s := range given {
		full, image, err := redisImage(s)
		if err != nil {
			return clouddb.RedisVersions{}, nil, err
		}
		mm, _ := clouddb.MajorMinor(full) // redisImage checked it
		if other, dup := asGiven[mm]; dup {
			return clouddb.RedisVersions{}, nil, fmt.Errorf("--k8s-redis-image %s and %s are both Redis %s: give one image per major.minor version", other, s, mm)
		}
		asGiven[mm], images[mm] = s, image
		fulls = append(fulls, full)
	}
	versions, err := clouddb.NewRedisVersions(fulls...)
	if err != nil {
		return clouddb.RedisVersions{}, nil, fmt.Errorf("--k8s-redis-image: %w", err)
	}
	return versions, images, nil
}

// flagSet reports whether the flag was given, on the command line or by its environment
// twin (see envFlags).
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// validateDriver checks --driver and the kubernetes driver's flags.
func validateDriver(c *Config) error {
	switch c.Driver {
	case "", driverLocal:
		return nil
	case driverKubernetes:
	default:
		return fmt.Errorf("--driver %q: want local or kubernetes", c.Driver)
	}
	if c.Namespace == "" {
		return errors.New("--namespace must not be empty")
	}
	if t := corev1.ServiceType(c.ServiceType); t != corev1.ServiceTypeNodePort && t != corev1.ServiceTypeLoadBalancer {
		return fmt.Errorf("--k8s-service-type %q: want NodePort or LoadBalancer", c.ServiceType)
	}
	if _, err := clusterNetworks(c.ClusterNetworks); err != nil {
		return err
	}
	if _, err := clusterPorts(c); err != nil {
		return err
	}
	_, _, err := redisImages(c.RedisImages)
	return err
}

// clusterNetworks parses --k8s-cluster-networks.
func clusterNetworks(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("--k8s-cluster-networks: %q is not a CIDR such as 10.96.0.0/12", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// clusterPorts parses --k8s-cluster-ports, which must not overlap --db-ports (a node
// would take a port the store hands to a database); empty refuses OSS Cluster.
func clusterPorts(c *Config) ([2]int, error) {
	if c.ClusterPorts == "" {
		return [2]int{}, nil
	}
	lo, hi, err := task.ParseRange(c.ClusterPorts)
	if err != nil {
		return [2]int{}, fmt.Errorf("--k8s-cluster-ports: %v", err)
	}
	if portsOverlap(c.ClusterPorts, c.DBPorts) {
		return [2]int{}, fmt.Errorf("--k8s-cluster-ports %s overlaps --db-ports %s: a cluster node would take a database's port", c.ClusterPorts, c.DBPorts)
	}
	return [2]int{lo, hi}, nil
}

// portsOverlap reports whether two LOW-HIGH ranges share a port (false if either does
// not parse: that is reported where it is parsed).
func portsOverlap(a, b string) bool {
	alo, ahi, aerr := task.ParseRange(a)
	blo, bhi, berr := task.ParseRange(b)
	return aerr == nil && berr == nil && alo <= bhi && blo <= ahi
}

// newKubernetesDriver is the data plane of --driver kubernetes: the cluster of
// --kubeconfig, or the one clouddb runs in when it is empty.
func newKubernetesDriver(c Config, log *slog.Logger, ca clouddb.CertificateAuthority, blobOpts blob.Options) (*k8sdriver.Driver, clouddb.RedisVersions, error) {
	var cfg *rest.Config
	var err error
	if c.Kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	}
	if err != nil {
		return nil, clouddb.RedisVersions{}, fmt.Errorf("--kubeconfig: %w", err)
	}
	// Ensure polls a database's pods while it waits for them, and the reconciler ensures
	// databases side by side: client-go's default rate (5 requests a second, bursts of
	// 10) would queue one database's Ensure behind the others'.
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, clouddb.RedisVersions{}, err
	}
	kc, versions, err := kubernetesConfig(c, client, log, ca, blobOpts)
	if err != nil {
		return nil, clouddb.RedisVersions{}, err
	}
	d, err := k8sdriver.New(kc)
	return d, versions, err
}

// kubernetesConfig is the kubernetes driver's configuration from the flags, and the
// versions it offers; apart from newKubernetesDriver so that tests read it without a
// cluster.
func kubernetesConfig(c Config, client kubernetes.Interface, log *slog.Logger, ca clouddb.CertificateAuthority, blobOpts blob.Options) (k8sdriver.Config, clouddb.RedisVersions, error) {
	versions, images, err := redisImages(c.RedisImages)
	if err != nil {
		return k8sdriver.Config{}, clouddb.RedisVersions{}, err
	}
	networks, err := clusterNetworks(c.ClusterNetworks)
	if err != nil {
		return k8sdriver.Config{}, clouddb.RedisVersions{}, err
	}
	nodePorts, err := clusterPorts(&c)
	if err != nil {
		return k8sdriver.Config{}, clouddb.RedisVersions{}, err
	}
	// A database's data waits here while its pod is replaced: under the data directory,
	// which outlives restarts (not the temp directory, emptied at each start).
	pending := filepath.Join(c.DataDir, "k8s-pending")
	if err = os.MkdirAll(pending, 0o700); err != nil {
		return k8sdriver.Config{}, clouddb.RedisVersions{}, err
	}
	return k8sdriver.Config{
		PendingDir:      pending,
		ClusterNetworks: networks,
		ClusterPorts:    nodePorts,
		Client:          client,
		Namespace:       c.Namespace,
		Images:          images,
		DefaultVersion:  versions.Default,
		StorageClass:    c.StorageClass,
		NodeAddress:     c.AdvertiseHost,
		ServiceType:     corev1.ServiceType(c.ServiceType),
		Logger:          log,
		// Imports are checked in a throwaway server of this machine (see Driver.Load).
		RedisServer: firstOr(c.RedisServers, local.DefaultRedisServer),
		CA:          ca,
		DialSource: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return blob.Dial(ctx, network, addr, blobOpts)
		},
	}, versions, nil
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

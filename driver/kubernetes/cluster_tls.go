package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"clouddb"
)

// TLS of an OSS Cluster database. A replicated database takes a TLS change on new pods,
// one node at a time (tls.go, renew.go); a cluster's nodes cannot: a node without
// persistence loses its data with its pod, and each renewal of the server certificate
// would fail its shards over. So a cluster's servers take new TLS files live: a renewed
// certificate, new client certificates (or none). Its pods mount the whole Secret (a
// pod's items are fixed at its creation), where the TLS files are also held under keys
// named after their content (tlsPath) that the shared redis.conf names; the kubelet swaps
// a mounted Secret's files all at once, so a server that restarts reads a config and
// files that belong together. Ensure then has each server load the new files with one
// CONFIG SET of every tls-* file setting: their new paths make redis load them (it fails,
// changing nothing, while the pod does not show them yet, and Ensure tries again). An
// annotation of the pod that Ensure updates (annotationTLSFiles) has the kubelet refresh
// its volumes at once rather than within its sync period. The bus (tls-cluster) and
// replication speak TLS, with clouddb's client certificate; each node serves TLS only on
// its own port (its file, nodeConfig). Turning TLS on or off on a running cluster is
// refused: its nodes' bus and ports would change protocol, and a cluster cannot mix
// plain and TLS nodes.

// tlsLive is annotationTLS on a TLS cluster's pod template and pods: they serve TLS, with
// files they take live.
const tlsLive = "live"

// annotationTLSFiles on a cluster's pod is the digest of the TLS files Ensure last had
// its server load: updating it has the kubelet refresh the pod's Secret volume.
const annotationTLSFiles = "clouddb.io/tls-files"

// clusterTLS reports whether the cluster's StatefulSet makes pods that serve TLS.
func clusterTLS(sts *appsv1.StatefulSet) bool {
	return sts.Spec.Template.Annotations[annotationTLS] != ""
}

// clusterTLSSettings are the tls-* settings of a TLS cluster's servers that change with
// the Secret's data: the files by their content-named keys, and whether clients must
// present a certificate. Ensure sets them live in one CONFIG SET, in this order.
func clusterTLSSettings(in clouddb.Instance, data map[string][]byte) [][2]string {
	path := func(k string) string { return confDir + "/" + tlsPath(k, data[k]) }
	auth := "no"
	if len(in.TLS.ClientCertificates) > 0 {
		auth = "yes"
	}
	return [][2]string{
		{"tls-cert-file", path(keyTLSCert)},
		{"tls-key-file", path(keyTLSKey)},
		{"tls-ca-cert-file", path(keyTLSCA)},
		{"tls-client-cert-file", path(keyTLSClientCert)},
		{"tls-client-key-file", path(keyTLSClientKey)},
		{"tls-auth-clients", auth},
	}
}

// clusterConfig is the redis.conf every node of a cluster reads (in: a node's share of
// the instance), with the TLS files of the Secret's data when it has TLS. The node's own
// file, included after it, has its port (nodeConfig).
func clusterConfig(in clouddb.Instance, internal string, data map[string][]byte) ([]byte, error) {
	conf, err := renderConfig(in, internal)
	if err != nil || in.TLS == nil {
		return conf, err
	}
	for _, k := range tlsKeys {
		if len(data[k]) == 0 {
			return nil, fmt.Errorf("database %d: its secret has no %s", in.DatabaseID, k)
		}
	}
	for _, s := range clusterTLSSettings(in, data) {
		conf = appendLine(conf, s[0], s[1])
	}
	conf = appendLine(conf, "tls-replication", "yes")
	return appendLine(conf, "tls-cluster", "yes"), nil
}

// addClusterTLSConfig puts into data, a TLS cluster's Secret, the TLS files under their
// content-named keys and the redis.conf that names them. The files of before go: a
// running server holds what it loaded, and a pod's volume shows the new config with the
// new files.
func addClusterTLSConfig(in clouddb.Instance, internal string, data map[string][]byte) error {
	conf, err := clusterConfig(in, internal, data)
	if err != nil {
		return err
	}
	for _, k := range tlsKeys {
		data[tlsPath(k, data[k])] = data[k]
	}
	data[keyConfig] = conf
	return nil
}

// tlsServed reports whether the server of c runs with the settings.
func tlsServed(ctx context.Context, c *redis.Client, want [][2]string) (bool, error) {
	got, err := c.ConfigGet(ctx, "tls-*").Result()
	if err != nil {
		return false, fmt.Errorf("CONFIG GET tls-*: %w", err)
	}
	for _, s := range want {
		if got[s[0]] != s[1] {
			return false, nil
		}
	}
	return true, nil
}

// applyClusterTLS has the nodes' servers serve the TLS files of the Secret (see the top
// of this file), waiting up to StartTimeout for their pods to show them; then the error
// wraps ErrServerStarting. The pods are all told first, so that the kubelet refreshes
// their volumes together. Connections open meanwhile stay as they were made.
func (d *Driver) applyClusterTLS(ctx context.Context, in clouddb.Instance, nodes []*clusterMember, secret *corev1.Secret) error {
	want := clusterTLSSettings(in, secret.Data)
	digest := tlsDigest(in, secret.Data)
	var stale []*clusterMember
	for _, m := range nodes {
		ok, err := tlsServed(ctx, m.c, want)
		if err != nil {
			return fmt.Errorf("database %d: pod %s: %w", in.DatabaseID, m.pod.Name, err)
		}
		if ok {
			continue
		}
		stale = append(stale, m)
		if m.pod.Annotations[annotationTLSFiles] == digest {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annotationTLSFiles, digest)
		if _, err = d.cfg.Client.CoreV1().Pods(d.ns).Patch(ctx, m.pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("database %d: pod %s: annotating it with its TLS files: %w", in.DatabaseID, m.pod.Name, err)
		}
	}
	args := []any{"config", "set"}
	for _, s := range want {
		args = append(args, s[0], s[1])
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	for _, m := range stale {
		if err := loadTLSFiles(wctx, m.c, args); err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				err = fmt.Errorf("its pod does not show the secret's new TLS files after %v (%v): %w", d.cfg.StartTimeout, err, clouddb.ErrServerStarting)
			}
			return fmt.Errorf("database %d: pod %s: %w", in.DatabaseID, m.pod.Name, err)
		}
		d.log.Info("a cluster node loaded new TLS files", "database_id", in.DatabaseID, "pod", m.pod.Name,
			"after", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// loadTLSFiles runs the CONFIG SET of args on c until it succeeds: redis refuses it,
// changing nothing, while a file it names is not there yet.
func loadTLSFiles(ctx context.Context, c *redis.Client, args []any) error {
	for {
		err := c.Do(ctx, args...).Err()
		if err == nil {
			return nil
		}
		var rerr redis.Error
		if !errors.As(err, &rerr) {
			return fmt.Errorf("CONFIG SET tls-*: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CONFIG SET tls-*: %w", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

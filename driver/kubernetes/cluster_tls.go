package kubernetes

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"

	"clouddb"
)

// TLS of an OSS Cluster database. Its servers take new TLS files live as other
// databases' do (see tls.go), but all its nodes read one redis.conf (keyConfig) whose TLS
// lines name the files by their content-named keys, then their node's own file (its
// port, nodeConfig): each node serves TLS only on its own port, and the bus
// (tls-cluster) and replication speak TLS, with clouddb's client certificate. Turning TLS
// on or off changes the protocol of every node's port and of the bus, and a cluster
// cannot mix plain and TLS nodes: the cluster is rebuilt, its data saved and loaded (see
// cluster_rebuild.go).

// clusterTLS reports whether the cluster's StatefulSet makes pods that serve TLS.
func clusterTLS(sts *appsv1.StatefulSet) bool {
	return sts.Spec.Template.Annotations[annotationTLS] != ""
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
	for _, s := range tlsFileSettings(in, data) {
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
	addLiveTLSFiles(data)
	data[keyConfig] = conf
	return nil
}
